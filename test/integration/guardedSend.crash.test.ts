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
 */
import { closeAllPostgresLedgers } from '../../lib/ledger';
import { freshPostgresLedger, settingsFromUrl } from '../support/db';
import { slackServer, smtpServer, stripeLikeServer, type SlackServer, type SmtpTestServer, type StripeLikeServer } from '../support/destinations';
import { idempotencyKeyFor } from '../../nodes/GuardedSend/channels/http';
import { startChild } from './fixtures/guarded-child-runner';
import { rerunAfterCrash, SEND_NODE, type ChannelName, type SendSpec } from './fixtures/guarded-workflow';

type Point = 'claim' | 'mark' | 'acted' | 'record';

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
	/** An API that ignores the Idempotency-Key (every request acts), with a look-up by order. */
	let crm: StripeLikeServer;
	let slack: SlackServer;
	let smtp: SmtpTestServer;
	const kills: string[] = [];
	const measured: string[] = [];

	beforeAll(async () => {
		fx = await freshPostgresLedger();
		[api, crm, slack, smtp] = await Promise.all([stripeLikeServer(), stripeLikeServer({ honoursKey: false }), slackServer(), smtpServer()]);
	});
	afterAll(async () => {
		console.log(`crash tests: ${kills.length} SIGKILLs:\n  ${kills.join('\n  ')}\n\ndelivered / Needs Review after the rerun, per case and point:\n  ${measured.join('\n  ')}`);
		await Promise.all([api?.close(), crm?.close(), slack?.close(), smtp?.close()]);
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
	const slackPosts = (id: string) => slack.messages.filter((m) => m.text === `Order ${id} paid`).length;
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
			spec: () => ({ url: crm.url, honoursKey: false }),
			server: () => crm,
			delivered: (id) => charges(crm, id),
		},
		{
			name: 'slack (check on, the default)',
			slug: 'slack',
			channel: 'slack',
			takeover: 'check',
			spec: () => ({ url: slack.apiUrl, slackChannel: SLACK_CHANNEL }),
			server: () => slack,
			delivered: slackPosts,
		},
		{
			name: 'slack, check off',
			slug: 'slack-nocheck',
			channel: 'slack',
			takeover: 'review',
			spec: () => ({ url: slack.apiUrl, slackChannel: SLACK_CHANNEL, slackCheck: false }),
			server: () => slack,
			delivered: slackPosts,
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
			const r = await crashThenRerun(c, 'claim');
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
		}, 60_000);

		test(`${c.name}: killed after the "sending" mark, before the request`, async () => {
			const r = await crashThenRerun(c, 'mark');
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
		}, 60_000);

		test(`${c.name}: killed after the destination acted, before the result was recorded`, async () => {
			const r = await crashThenRerun(c, 'acted');
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
		}, 60_000);

		test(`${c.name}: killed right after the record → the rerun skips, replaying the result`, async () => {
			const r = await crashThenRerun(c, 'record');
			expect(r.afterCrash).toEqual([1, 1, 1]);
			expect(r.second.skipped.sort()).toEqual([...r.ids].sort());
			expect(r.second.review).toEqual([]);
			expect(r.afterRerun).toEqual([1, 1, 1]);
			expect(r.third.skipped).toHaveLength(3);
		}, 60_000);
	}
});
