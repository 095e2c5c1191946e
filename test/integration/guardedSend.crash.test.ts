/**
 * Crash recovery: a child process running Guarded Send is SIGKILLed at four points, then the
 * same items run again (and once more). Real PostgreSQL, real local destinations.
 *
 *   after claim        nothing was sent, no recovery point    → the rerun sends, once
 *   after "sending"    recovery point set, request not made   → HTTP re-sends with the same key;
 *                                                               Slack/email cannot know → Needs Review
 *   destination acted  the destination has it, no record      → HTTP: same key again, acted once;
 *                      (it acted, then the child was killed     Slack/email: no second message,
 *                       before the answer arrived)              Needs Review
 *   after record       everything done                        → Skipped
 */
import { closeAllPostgresLedgers } from '../../lib/ledger';
import { freshPostgresLedger, settingsFromUrl } from '../support/db';
import { slackServer, smtpServer, stripeLikeServer, type SlackServer, type SmtpTestServer, type StripeLikeServer } from '../support/destinations';
import { runWorkflow } from '../support/engine';
import { idempotencyKeyFor } from '../../nodes/GuardedSend/channels/http';
import { startChild } from './fixtures/guarded-child-runner';
import { credentialsFor, itemsFor, nodeTypes, sendWorkflow, SEND_NODE, summarize, type ChannelName, type SendSpec } from './fixtures/guarded-workflow';

type Point = 'claim' | 'mark' | 'acted' | 'record';

describe('Guarded Send: SIGKILL at each point, then run again', () => {
	let fx: Awaited<ReturnType<typeof freshPostgresLedger>>;
	let api: StripeLikeServer;
	let slack: SlackServer;
	let smtp: SmtpTestServer;
	const kills: string[] = [];

	beforeAll(async () => {
		fx = await freshPostgresLedger();
		[api, slack, smtp] = await Promise.all([stripeLikeServer(), slackServer(), smtpServer()]);
	});
	afterAll(async () => {
		console.log(`crash tests: ${kills.length} SIGKILLs:\n  ${kills.join('\n  ')}`);
		await Promise.all([api?.close(), slack?.close(), smtp?.close()]);
		await closeAllPostgresLedgers();
		await fx?.dispose();
	});

	const specFor = (channel: ChannelName, workflowId: string, leaseMs: number): SendSpec => ({
		channel,
		workflowId,
		ledger: settingsFromUrl(fx.table),
		url: channel === 'http' ? api.url : channel === 'slack' ? slack.apiUrl : undefined,
		smtp: channel === 'email' ? smtp.credential : undefined,
		leaseMs,
		whenInProgress: 'wait',
		maxWaitSeconds: 15,
		options: { timeout: 1 },
	});

	/** What the destination actually did, per id. */
	const delivered = (channel: ChannelName, ids: string[]) =>
		ids.map((id) => {
			if (channel === 'http') return api.actions.filter((a) => (a.body as { order?: string })?.order === id).length;
			if (channel === 'slack') return slack.messages.filter((m) => m.text === `Order ${id} paid`).length;
			return smtp.mails.filter((m) => m.subject === `Your order ${id}`).length;
		});
	const server = (channel: ChannelName) => (channel === 'http' ? api : channel === 'slack' ? slack : smtp);

	async function crashThenRerun(channel: ChannelName, point: Point) {
		const ids = [1, 2, 3].map((n) => `${channel}-${point}-${n}-${Date.now()}`);
		const workflowId = `crash-${channel}-${point}`;
		const first = specFor(channel, workflowId, 4_000);
		const run = startChild({ spec: first, ids, executionId: `crash-${channel}-${point}-1`, pauseAfter: point === 'acted' ? undefined : point });
		if (point === 'acted') {
			// The destination acts on each request and then holds the answer; once it has acted on
			// all three, the sender is killed: it never learns the result.
			let acted = 0;
			const all = new Promise<void>((resolve) => {
				const onReceived = () => ++acted === ids.length && resolve();
				server(channel).events.on('received', onReceived);
			});
			server(channel).setPlan(() => ({ kind: 'hang' }));
			await Promise.race([all, run.when('done').then(() => Promise.reject(new Error('the child finished before it was killed')))]);
		} else {
			await run.when('paused');
		}
		const how = await run.kill();
		server(channel).setPlan(() => ({ kind: 'normal' }));
		server(channel).events.removeAllListeners('received');
		kills.push(`${channel} killed after ${point}: ${how}; destination had ${delivered(channel, ids).join('/')} per item`);
		expect(how).toBe('SIGKILL');
		const afterCrash = delivered(channel, ids);

		const rerun = async (executionId: string) =>
			summarize(
				await runWorkflow(sendWorkflow({ ...first, leaseMs: 60_000 }), {
					credentials: credentialsFor(first),
					nodeTypes,
					executionId,
					startNode: SEND_NODE,
					startItems: itemsFor(ids),
				}),
			);
		const second = await rerun(`crash-${channel}-${point}-2`);
		const afterRerun = delivered(channel, ids);
		const third = await rerun(`crash-${channel}-${point}-3`);
		expect(delivered(channel, ids)).toEqual(afterRerun);
		const rows = await Promise.all(ids.map(async (id) => (await fx.ledger.get(`workflow:${workflowId}`, id))[0]));
		// The Idempotency-Key the HTTP channel sent for each item, and how often the API saw it.
		const keysSeen = rows.map((row, i) => api.keysSeen.get(idempotencyKeyFor(`workflow:${workflowId}`, ids[i], SEND_NODE, row.firstSeenAt)) ?? 0);
		return { ids, afterCrash, second, afterRerun, third, rows, keysSeen };
	}

	for (const channel of ['http', 'slack', 'email'] as const) {
		test(`${channel}: killed right after the claim → the rerun sends each message once`, async () => {
			const r = await crashThenRerun(channel, 'claim');
			expect(r.afterCrash).toEqual([0, 0, 0]);
			expect(r.second.sent.sort()).toEqual([...r.ids].sort());
			expect(r.second.resent).toEqual([]);
			expect(r.afterRerun).toEqual([1, 1, 1]);
			if (channel === 'http') expect(r.keysSeen).toEqual([1, 1, 1]);
			expect(r.third.skipped.sort()).toEqual([...r.ids].sort());
			expect(r.rows.map((row) => row.status)).toEqual(['completed', 'completed', 'completed']);
		}, 60_000);

		test(`${channel}: killed after the "sending" mark, before the request`, async () => {
			const r = await crashThenRerun(channel, 'mark');
			expect(r.afterCrash).toEqual([0, 0, 0]);
			if (channel === 'http') {
				// Repeating is safe with the same key: sent once, no Needs Review.
				expect(r.second.sent.sort()).toEqual([...r.ids].sort());
				expect(r.second.resent.sort()).toEqual([...r.ids].sort());
				expect(r.afterRerun).toEqual([1, 1, 1]);
				expect(r.keysSeen).toEqual([1, 1, 1]);
				expect(r.third.skipped).toHaveLength(3);
			} else {
				// The ledger cannot tell "about to send" from "sent": a person decides; nothing is sent.
				expect(r.second.review.map((x) => x.reason)).toEqual(['ambiguous', 'ambiguous', 'ambiguous']);
				expect(r.afterRerun).toEqual([0, 0, 0]);
				expect(r.third.review.map((x) => x.reason)).toEqual(['marked_for_review', 'marked_for_review', 'marked_for_review']);
				expect(r.rows.map((row) => row.status)).toEqual(['needs_review', 'needs_review', 'needs_review']);
			}
		}, 60_000);

		test(`${channel}: killed after the destination acted, before the result was recorded`, async () => {
			const r = await crashThenRerun(channel, 'acted');
			expect(r.afterCrash).toEqual([1, 1, 1]);
			if (channel === 'http') {
				// The destination saw each key twice and acted once; the rerun got the stored answer.
				expect(r.second.sent.sort()).toEqual([...r.ids].sort());
				expect(r.second.resent).toHaveLength(3);
				expect(r.afterRerun).toEqual([1, 1, 1]);
				expect(r.keysSeen).toEqual([2, 2, 2]);
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

		test(`${channel}: killed right after the record → the rerun skips, replaying the result`, async () => {
			const r = await crashThenRerun(channel, 'record');
			expect(r.afterCrash).toEqual([1, 1, 1]);
			expect(r.second.skipped.sort()).toEqual([...r.ids].sort());
			expect(r.afterRerun).toEqual([1, 1, 1]);
			expect(r.third.skipped).toHaveLength(3);
		}, 60_000);
	}
});
