/**
 * Crash recovery: a child process running Guarded Send is SIGKILLed at four points, then the
 * same items run again (and once more). Real PostgreSQL, real local destinations.
 *
 *   after claim        nothing was sent, no recovery point    → the rerun sends, once
 *   after "sending"    recovery point set, request not made   → HTTP re-sends with the same key;
 *                                                               Slack (history check) and HTTP
 *                                                               with a check request: not found,
 *                                                               sent once; without a check, they
 *                                                               cannot know → Needs Review
 *   destination acted  the destination has it, no record      → HTTP: same key again, acted once;
 *                      (it acted, then the child was killed     with a check: found, recorded as
 *                       before the answer arrived)              sent, Skipped (recovered); without
 *                                                               one: no second message, Needs Review
 *   after record       everything done                        → Skipped
 *
 * Cases: HTTP to an API that honours the key; HTTP to one that does not, with and without a check
 * request; Slack with "Check Slack Before Resending" (the default) and with it off; email.
 *
 * Most of a crash's time is waiting: for the child to load, for the killed run's lease to lapse.
 * So three cases run side by side (LANES), each against a destination of its own, each case's
 * four crashes one after the other; they start in beforeAll, and each test awaits its crash and
 * asserts on it (the same assertions as when the 24 ran one by one: 158 s in CI). Not all six at
 * once: the destinations answer from this same process, and Guarded Send's timeout here is 1 s.
 */
import { closeAllPostgresLedgers } from '../../lib/ledger';
import { freshPostgresLedger, settingsFromUrl } from '../support/db';
import { slackServer, smtpServer, stripeLikeServer, type SlackServer, type SmtpTestServer, type StripeLikeServer } from '../support/destinations';
import { idempotencyKeyFor } from '../../nodes/GuardedSend/channels/http';
import { startChild } from './fixtures/guarded-child-runner';
import { rerunAfterCrash, SEND_NODE, type ChannelName, type SendSpec } from './fixtures/guarded-workflow';

type Point = 'claim' | 'mark' | 'acted' | 'record';
const POINTS: Point[] = ['claim', 'mark', 'acted', 'record'];
/** Cases at a time. */
const LANES = 3;

/**
 * How a run that takes over a step in phase `sending` finds out whether it went out:
 * - `same key`: it does not need to; the destination honours the Idempotency-Key (HTTP);
 * - `check`: it asks the destination (Slack history, an HTTP check request);
 * - `review`: it cannot; the step goes to Needs Review.
 */
type Takeover = 'same key' | 'check' | 'review';

/** A Slack channel ID: the history check reads channels by ID. */
const SLACK_CHANNEL = 'C0ORDERS01';

describe('Guarded Send: SIGKILL at each point, then run again', () => {
	let fx: Awaited<ReturnType<typeof freshPostgresLedger>>;
	let api: StripeLikeServer;
	/**
	 * APIs that ignore the Idempotency-Key (every request acts), with a look-up by order: one for
	 * the case with a check request, one for the case without (each case its own destination, as
	 * the cases run side by side and "acted" makes the destination hang).
	 */
	let crm: StripeLikeServer;
	let crmNoCheck: StripeLikeServer;
	let slack: SlackServer;
	let slackNoCheck: SlackServer;
	let smtp: SmtpTestServer;
	const kills: string[] = [];
	const measured: string[] = [];
	/** Each case's crashes, by `<slug> <point>`, started in beforeAll. */
	const crashes = new Map<string, Promise<Crash>>();

	beforeAll(async () => {
		fx = await freshPostgresLedger();
		[api, crm, crmNoCheck, slack, slackNoCheck, smtp] = await Promise.all([
			stripeLikeServer(),
			stripeLikeServer({ honoursKey: false }),
			stripeLikeServer({ honoursKey: false }),
			slackServer(),
			slackServer(),
			smtpServer(),
		]);
		const lanes: Array<Promise<unknown>> = Array.from({ length: LANES }, () => Promise.resolve());
		for (const [i, c] of cases.entries()) {
			// One case's crashes one after the other (each sets its destination's plan), then the
			// next case of its lane.
			let previous = lanes[i % LANES];
			for (const point of POINTS) {
				const crash = previous.then(() => crashThenRerun(c, point));
				// Awaited by its test; a failure is reported there, not as an unhandled rejection.
				crash.catch(() => undefined);
				crashes.set(`${c.slug} ${point}`, crash);
				previous = crash.catch(() => undefined);
			}
			lanes[i % LANES] = previous;
		}
	});
	afterAll(async () => {
		// A test that failed early leaves crashes of its case running: let them end first.
		await Promise.allSettled(crashes.values());
		console.log(`crash tests: ${kills.length} SIGKILLs:\n  ${kills.join('\n  ')}\n\ndelivered / Needs Review after the rerun, per case and point:\n  ${measured.join('\n  ')}`);
		await Promise.all([api?.close(), crm?.close(), crmNoCheck?.close(), slack?.close(), slackNoCheck?.close(), smtp?.close()]);
		await closeAllPostgresLedgers();
		await fx?.dispose();
	});

	interface Case {
		/** As in the test names. */
		name: string;
		/** Short, for ids and workflow ids. */
		slug: string;
		channel: ChannelName;
		takeover: Takeover;
		/** Spec fields beyond the common ones. */
		spec: () => Partial<SendSpec>;
		/** The destination, which can be told to act and then hang. */
		server: () => StripeLikeServer | SlackServer | SmtpTestServer;
		/** What the destination actually did for one id. */
		delivered: (id: string) => number;
	}
	const charges = (server: StripeLikeServer, id: string) => server.actions.filter((a) => (a.body as { order?: string })?.order === id).length;
	const slackPosts = (server: SlackServer, id: string) => server.messages.filter((m) => m.text === `Order ${id} paid`).length;
	const cases: Case[] = [
		{ name: 'http', slug: 'http', channel: 'http', takeover: 'same key', spec: () => ({ url: api.url }), server: () => api, delivered: (id) => charges(api, id) },
		{
			name: 'http, key not honoured, with a check request',
			slug: 'http-check',
			channel: 'http',
			takeover: 'check',
			spec: () => ({ url: crm.url, honoursKey: false, checkUrl: crm.url }),
			server: () => crm,
			delivered: (id) => charges(crm, id),
		},
		{
			name: 'http, key not honoured, no check',
			slug: 'http-nocheck',
			channel: 'http',
			takeover: 'review',
			spec: () => ({ url: crmNoCheck.url, honoursKey: false }),
			server: () => crmNoCheck,
			delivered: (id) => charges(crmNoCheck, id),
		},
		{
			name: 'slack (check on, the default)',
			slug: 'slack',
			channel: 'slack',
			takeover: 'check',
			spec: () => ({ url: slack.apiUrl, slackChannel: SLACK_CHANNEL }),
			server: () => slack,
			delivered: (id) => slackPosts(slack, id),
		},
		{
			name: 'slack, check off',
			slug: 'slack-nocheck',
			channel: 'slack',
			takeover: 'review',
			spec: () => ({ url: slackNoCheck.apiUrl, slackChannel: SLACK_CHANNEL, slackCheck: false }),
			server: () => slackNoCheck,
			delivered: (id) => slackPosts(slackNoCheck, id),
		},
		{
			name: 'email',
			slug: 'email',
			channel: 'email',
			takeover: 'review',
			spec: () => ({ smtp: smtp.credential }),
			server: () => smtp,
			delivered: (id) => smtp.mails.filter((m) => m.subject === `Your order ${id}`).length,
		},
	];

	const specFor = (c: Case, workflowId: string, leaseMs: number): SendSpec => ({
		channel: c.channel,
		workflowId,
		ledger: settingsFromUrl(fx.table),
		leaseMs,
		whenInProgress: 'wait',
		maxWaitSeconds: 15,
		options: { timeout: 1 },
		...c.spec(),
	});

	type Crash = Awaited<ReturnType<typeof crashThenRerun>>;
	async function crashThenRerun(c: Case, point: Point) {
		const ids = [1, 2, 3].map((n) => `${c.slug}-${point}-${n}-${Date.now()}`);
		const workflowId = `crash-${c.slug}-${point}`;
		const first = specFor(c, workflowId, 4_000);
		const delivered = () => ids.map(c.delivered);
		const run = startChild({ spec: first, ids, executionId: `crash-${c.slug}-${point}-1`, pauseAfter: point === 'acted' ? undefined : point });
		if (point === 'acted') {
			// The destination acts on each request and then holds the answer; once it has acted on
			// all three, the sender is killed: it never learns the result.
			let acted = 0;
			const all = new Promise<void>((resolve) => {
				const onReceived = () => ++acted === ids.length && resolve();
				c.server().events.on('received', onReceived);
			});
			c.server().setPlan(() => ({ kind: 'hang' }));
			await Promise.race([all, run.when('done').then(() => Promise.reject(new Error('the child finished before it was killed')))]);
		} else {
			await run.when('paused');
		}
		const how = await run.kill();
		c.server().setPlan(() => ({ kind: 'normal' }));
		c.server().events.removeAllListeners('received');
		kills.push(`${c.name} killed after ${point}: ${how}; destination had ${delivered().join('/')} per item`);
		expect(how).toBe('SIGKILL');
		const afterCrash = delivered();

		const rerun = (executionId: string) => rerunAfterCrash(first, ids, executionId);
		const second = await rerun(`crash-${c.slug}-${point}-2`);
		const afterRerun = delivered();
		const third = await rerun(`crash-${c.slug}-${point}-3`);
		expect(delivered()).toEqual(afterRerun);
		const rows = await Promise.all(ids.map(async (id) => (await fx.ledger.get(`workflow:${workflowId}`, id))[0]));
		// The Idempotency-Key the HTTP channel sent for each item, and how often the API saw it.
		const keysSeen = rows.map((row, i) => api.keysSeen.get(idempotencyKeyFor(`workflow:${workflowId}`, ids[i], SEND_NODE, row.firstSeenAt)) ?? 0);
		/** What the check found, kept in each row's result (null: no check was made). */
		const checks = rows.map((row) => ((row.result as { check?: { outcome?: string } } | null)?.check?.outcome ?? null));
		const recovered = rows.map((row) => (row.result as { recovered?: boolean } | null)?.recovered === true);
		measured.push(`${c.name}, killed after ${point}: delivered ${afterRerun.join('/')}, Needs Review ${second.review.length}`);
		return { ids, afterCrash, second, afterRerun, third, rows, keysSeen, checks, recovered };
	}

	for (const c of cases) {
		test(`${c.name}: killed right after the claim → the rerun sends each message once`, async () => {
			const r = await crashes.get(`${c.slug} claim`)!;
			expect(r.afterCrash).toEqual([0, 0, 0]);
			expect(r.second.sent.sort()).toEqual([...r.ids].sort());
			expect(r.second.resent).toEqual([]);
			expect(r.second.review).toEqual([]);
			expect(r.afterRerun).toEqual([1, 1, 1]);
			if (c.takeover === 'same key') expect(r.keysSeen).toEqual([1, 1, 1]);
			// Nothing was marked `sending`: nothing to ask the destination.
			expect(r.checks).toEqual([null, null, null]);
			expect(r.third.skipped.sort()).toEqual([...r.ids].sort());
			expect(r.rows.map((row) => row.status)).toEqual(['completed', 'completed', 'completed']);
		}, 120_000);

		test(`${c.name}: killed after the "sending" mark, before the request`, async () => {
			const r = await crashes.get(`${c.slug} mark`)!;
			expect(r.afterCrash).toEqual([0, 0, 0]);
			if (c.takeover === 'same key') {
				// Repeating is safe with the same key: sent once, no Needs Review.
				expect(r.second.sent.sort()).toEqual([...r.ids].sort());
				expect(r.second.resent.sort()).toEqual([...r.ids].sort());
				expect(r.afterRerun).toEqual([1, 1, 1]);
				expect(r.keysSeen).toEqual([1, 1, 1]);
				expect(r.third.skipped).toHaveLength(3);
			} else if (c.takeover === 'check') {
				// The destination says it does not have it: sent once, no Needs Review.
				expect(r.second.review).toEqual([]);
				expect(r.second.sent.sort()).toEqual([...r.ids].sort());
				expect(r.second.resent.sort()).toEqual([...r.ids].sort());
				expect(r.afterRerun).toEqual([1, 1, 1]);
				expect(r.checks).toEqual(['not_found', 'not_found', 'not_found']);
				expect(r.third.skipped).toHaveLength(3);
				expect(r.rows.map((row) => row.status)).toEqual(['completed', 'completed', 'completed']);
			} else {
				// The ledger cannot tell "about to send" from "sent": a person decides; nothing is sent.
				expect(r.second.review.map((x) => x.reason)).toEqual(['ambiguous', 'ambiguous', 'ambiguous']);
				expect(r.afterRerun).toEqual([0, 0, 0]);
				expect(r.checks).toEqual([null, null, null]);
				expect(r.third.review.map((x) => x.reason)).toEqual(['marked_for_review', 'marked_for_review', 'marked_for_review']);
				expect(r.rows.map((row) => row.status)).toEqual(['needs_review', 'needs_review', 'needs_review']);
			}
		}, 120_000);

		test(`${c.name}: killed after the destination acted, before the result was recorded`, async () => {
			const r = await crashes.get(`${c.slug} acted`)!;
			expect(r.afterCrash).toEqual([1, 1, 1]);
			if (c.takeover === 'same key') {
				// The destination saw each key twice and acted once; the rerun got the stored answer.
				expect(r.second.sent.sort()).toEqual([...r.ids].sort());
				expect(r.second.resent).toHaveLength(3);
				expect(r.afterRerun).toEqual([1, 1, 1]);
				expect(r.keysSeen).toEqual([2, 2, 2]);
				expect(r.third.skipped).toHaveLength(3);
				expect(r.rows.map((row) => row.status)).toEqual(['completed', 'completed', 'completed']);
			} else if (c.takeover === 'check') {
				// The destination has it: recorded as sent, Skipped (recovered), not sent again.
				expect(r.second.sent).toEqual([]);
				expect(r.second.review).toEqual([]);
				expect(r.second.skipped.sort()).toEqual([...r.ids].sort());
				expect(r.afterRerun).toEqual([1, 1, 1]);
				expect(r.checks).toEqual(['found', 'found', 'found']);
				expect(r.recovered).toEqual([true, true, true]);
				// The external ID is the destination's: the Slack message's ts, the charge's id.
				for (const row of r.rows) expect(row.externalId).toMatch(c.channel === 'slack' ? /^\d+\.\d{6}$/ : /^ch_\d+$/);
				expect(r.third.skipped).toHaveLength(3);
				expect(r.rows.map((row) => row.status)).toEqual(['completed', 'completed', 'completed']);
			} else {
				expect(r.second.sent).toEqual([]);
				expect(r.second.review.map((x) => x.reason)).toEqual(['ambiguous', 'ambiguous', 'ambiguous']);
				expect(r.afterRerun).toEqual([1, 1, 1]);
				expect(r.third.sent).toEqual([]);
				expect(r.rows.map((row) => row.status)).toEqual(['needs_review', 'needs_review', 'needs_review']);
			}
		}, 120_000);

		test(`${c.name}: killed right after the record → the rerun skips, replaying the result`, async () => {
			const r = await crashes.get(`${c.slug} record`)!;
			expect(r.afterCrash).toEqual([1, 1, 1]);
			expect(r.second.skipped.sort()).toEqual([...r.ids].sort());
			expect(r.second.review).toEqual([]);
			expect(r.afterRerun).toEqual([1, 1, 1]);
			expect(r.third.skipped).toHaveLength(3);
		}, 120_000);
	}
});
