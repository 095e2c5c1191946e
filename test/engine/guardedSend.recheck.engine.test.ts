/**
 * Guarded Send through n8n-core's real engine, checking Slack within Slack's rate limits: after
 * runs died while sending, each channel is read once per chunk (paged with Slack's cursor, at
 * the page size Slack allows), a 429 is waited out within the run's budget, and a check that
 * cannot answer for now leaves the step on In Progress for the next delivery to check again,
 * not on Needs Review. A local Slack stand-in enforces "1 history read per window, 15 messages a
 * page", like Slack for a commercially distributed app outside the Marketplace (the window is
 * short here). Real PostgreSQL.
 */
import type { INodeParameters } from 'n8n-workflow';

import type { LedgerRecord } from '../../lib/ledger/types';
import { SLACK_METADATA_EVENT } from '../../lib/n8n/channels/slack';
import { idempotencyKeyFor } from '../../nodes/GuardedSend/channels/http';
import { SLACK_CREDENTIAL, postgresBackend, useEngineLedger } from '../support/engineBackends';
import { slackServer, stripeLikeServer, type HistoryRateLimit, type SlackServer, type StripeLikeServer } from '../support/destinations';
import { chain, node, runWorkflow, type EngineRunResult } from '../support/engine';
import { SEND_OUTPUT } from '../support/outputs';
import { nodeTypes } from '../integration/fixtures/guarded-workflow';

const CHANNEL = 'C0ORDERS01';
const DAY = 86_400_000;
const orders = (ids: string[]) => JSON.stringify(ids.map((id) => ({ id, amount: 100 })));
const byKey = { keyFrom: 'expression', keyExpression: '={{ $json.id }}' };
const facts = (r: EngineRunResult, output: number) => (r.outputs('Send')[output] ?? []).map((i) => i.json.idempotency as Record<string, unknown>);
const { SENT, SKIPPED, REVIEW, IN_PROGRESS } = SEND_OUTPUT;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('engine: Guarded Send checks Slack within its rate limits; a check that meets a limit waits for the next delivery', () => {
	const fx = useEngineLedger(postgresBackend, () => SLACK_CREDENTIAL);
	let slack: SlackServer | null = null;
	let wf: string;
	let n = 0;

	beforeEach(() => {
		wf = `wf-recheck-${++n}-${Date.now()}`;
	});
	afterEach(async () => {
		await slack?.close();
		slack = null;
	});

	/** A Slack stand-in of its own per test, so that one test's rate limit window is not another's. */
	async function slackWith(historyPageSize: number, historyRateLimit?: HistoryRateLimit): Promise<SlackServer> {
		slack = await slackServer({ historyPageSize, historyRateLimit });
		return slack;
	}
	const ns = () => `workflow:${wf}`;
	const slackSend = (server: SlackServer, options: INodeParameters = {}) => ({
		channel: 'slack',
		...byKey,
		slackChannel: CHANNEL,
		slackText: '=Order {{ $json.id }} paid',
		slackOptions: { apiUrl: server.apiUrl },
		options,
	});
	const run = (parameters: INodeParameters, ids: string[]) =>
		runWorkflow(
			{ id: wf, nodes: [node('Orders', 'test.items', { items: orders(ids) }), node('Send', 'n8n-nodes-idempotency.guardedSend', parameters)], connections: chain('Orders', 'Send') },
			{ credentials: fx.credentials, nodeTypes },
		);
	/** Runs that claimed these steps, marked them `sending`, and died: their leases lapse at once. */
	async function deadRuns(keys: string[]): Promise<Map<string, LedgerRecord>> {
		const claimed = await fx.ledger.claim(keys.map((key) => ({ namespace: ns(), key, step: 'Send', fingerprint: null })), { mode: 'lease', holder: 'execution:dead', leaseMs: 300, ttlMs: DAY });
		const records = claimed.map((c) => {
			if (c.kind !== 'claimed') throw new Error(`not claimed: ${c.kind}`);
			return c.record;
		});
		await fx.ledger.markPhase(records.map((r) => ({ namespace: ns(), key: r.key, step: 'Send', fence: r.fence! })), 'sending');
		await sleep(450);
		return new Map(records.map((r) => [r.key, r]));
	}
	/** What the dead run had posted before it died: the message with its step's hash. */
	const postedByDeadRun = (server: SlackServer, key: string, dead: LedgerRecord) =>
		server.addMessage({ channel: CHANNEL, text: `Order ${key} paid`, metadata: { event_type: SLACK_METADATA_EVENT, event_payload: { key: idempotencyKeyFor(ns(), key, 'Send', dead.firstSeenAt) } } });
	const row = async (key: string) => (await fx.ledger.get(ns(), key)).find((r) => r.step === 'Send');
	const postedFor = (server: SlackServer, key: string) => server.messages.filter((m) => m.text === `Order ${key} paid`);
	/** History reads Slack answered (not refused with 429). */
	const answeredReads = (server: SlackServer) => server.historyRequests.length - server.historyLimited;

	test('20 uncertain steps in one channel, 1 read per window and 15 messages a page: the channel is read once (2 pages), every step resolved, none posted twice', async () => {
		const server = await slackWith(15, { calls: 1, windowMs: 1_500 });
		const keys = Array.from({ length: 20 }, (_, i) => `o-${String(i + 1).padStart(2, '0')}`);
		const dead = await deadRuns(keys);
		// 12 of the dead runs had posted; 8 other messages arrived in the channel meanwhile.
		const posted = keys.slice(0, 12);
		for (const [i, key] of posted.entries()) {
			postedByDeadRun(server, key, dead.get(key)!);
			if (i < 8) server.addMessage({ channel: CHANNEL, text: `chatter ${i}` });
		}
		const r = await run(slackSend(server, { maxTotalWait: 10 }), keys);
		expect(r.error).toBeUndefined();
		expect(facts(r, REVIEW)).toEqual([]);
		expect(facts(r, IN_PROGRESS)).toEqual([]);
		expect(facts(r, SKIPPED).map((f) => [f.key, f.recovered])).toEqual(posted.map((k) => [k, true]));
		expect(facts(r, SENT).map((f) => [f.key, f.resent, (f.check as { outcome: string }).outcome])).toEqual(keys.slice(12).map((k) => [k, true, 'not_found']));
		for (const key of keys) expect(postedFor(server, key)).toHaveLength(1);
		// 20 messages at 15 a page: two reads, the second after Slack's Retry-After (one 429).
		expect(answeredReads(server)).toBe(2);
		expect(server.historyLimited).toBe(1);
		expect(server.historyRequests.map((q) => [q.params.channel, q.params.cursor === undefined])).toEqual([
			[CHANNEL, true],
			[CHANNEL, false],
			[CHANNEL, false],
		]);
		// Bounded by the oldest claim in question (less Slack's clock margin), asking for 200 and taking 15.
		const earliest = Math.min(...[...dead.values()].map((d) => d.firstSeenAt.getTime()));
		expect(Number(server.historyRequests[0].params.oldest) * 1000).toBeCloseTo(earliest - 5 * 60_000, -1);
		expect(server.historyRequests[0].params.limit).toBe('200');
	});

	test('a step that met a 429 waits on In Progress (not Needs Review); a delivery before Retry-After does not ask; the next one after it resolves the step without a person', async () => {
		const server = await slackWith(15, { calls: 1, windowMs: 2_500 });
		const dead = await deadRuns(['r-1', 'r-2']);
		postedByDeadRun(server, 'r-1', dead.get('r-1')!);
		// Another workflow of the same Slack app has just read a history: the limit is used up.
		await fetch(`${server.apiUrl}/conversations.history?channel=C0OTHER001`, { headers: { Authorization: 'Bearer xoxb-test-token' } });
		const before = server.historyRequests.length;

		// No waiting allowed in this run: the check meets the limit and leaves both steps for later.
		const first = await run(slackSend(server, { maxTotalWait: 0 }), ['r-1', 'r-2']);
		expect(facts(first, REVIEW)).toEqual([]);
		const waiting = facts(first, IN_PROGRESS);
		expect(waiting).toEqual([
			expect.objectContaining({ key: 'r-1', reason: 'check_later', checks: 1, check: expect.objectContaining({ outcome: 'later' }) }),
			expect.objectContaining({ key: 'r-2', reason: 'check_later', checks: 1 }),
		]);
		expect(String(waiting[0].detail)).toMatch(/Slack is limiting how often the channel history may be read .*try again in \d s/);
		expect(String(waiting[0].detail)).toMatch(/Nothing was sent; it is checked again on the next delivery after .* \(1 of 5 checks without an answer/);
		// One read for both steps (the same channel), refused.
		expect(server.historyRequests.length - before).toBe(1);
		expect(await row('r-2')).toMatchObject({ status: 'failed_retryable', phase: 'sending', result: expect.objectContaining({ reason: 'check_later', checks: 1 }) });
		expect(postedFor(server, 'r-2')).toHaveLength(0);

		// Delivered again before Retry-After: still In Progress, and Slack is not asked.
		const early = await run(slackSend(server, { maxTotalWait: 0 }), ['r-1', 'r-2']);
		expect(facts(early, IN_PROGRESS).map((f) => [f.key, f.reason, f.checks, f.checkAgainAt, (f.check as { outcome?: string } | undefined)?.outcome])).toEqual([
			['r-1', 'check_later', 1, waiting[0].checkAgainAt, 'later'],
			['r-2', 'check_later', 1, waiting[1].checkAgainAt, 'later'],
		]);
		expect(server.historyRequests.length - before).toBe(1);

		// After Retry-After: checked again; r-1 is there (recorded as sent), r-2 is not (posted once).
		await sleep(Math.max(0, Date.parse(String(waiting[0].checkAgainAt)) - Date.now()) + 300);
		const later = await run(slackSend(server, { maxTotalWait: 0 }), ['r-1', 'r-2']);
		expect(facts(later, REVIEW)).toEqual([]);
		expect(facts(later, IN_PROGRESS)).toEqual([]);
		expect(facts(later, SKIPPED)).toEqual([expect.objectContaining({ key: 'r-1', recovered: true })]);
		expect(facts(later, SENT)).toEqual([expect.objectContaining({ key: 'r-2', resent: true, check: expect.objectContaining({ outcome: 'not_found' }) })]);
		expect(postedFor(server, 'r-1')).toHaveLength(1);
		expect(postedFor(server, 'r-2')).toHaveLength(1);
		expect(server.historyRequests.length - before).toBe(2);
		expect(await row('r-1')).toMatchObject({ status: 'completed', phase: null });
	});

	test('a long read across deliveries: each run reads on below where the last one stopped, and reading on is not counted as a failed check', async () => {
		const server = await slackWith(15, { calls: 1, windowMs: 1_000 });
		const dead = await deadRuns(['l-1']);
		postedByDeadRun(server, 'l-1', dead.get('l-1')!);
		for (let i = 0; i < 40; i++) server.addMessage({ channel: CHANNEL, text: `chatter ${i}` });
		const outcomes: Array<[string, unknown]> = [];
		for (let delivery = 0; delivery < 8 && outcomes.at(-1)?.[0] !== 'skipped'; delivery++) {
			const r = await run(slackSend(server, { maxTotalWait: 0, checksBeforeReview: 1 }), ['l-1']);
			const [f] = [...facts(r, SKIPPED), ...facts(r, IN_PROGRESS), ...facts(r, REVIEW), ...facts(r, SENT)];
			outcomes.push([String(f.outcome), f.checks ?? null]);
			if (f.checkAgainAt) await sleep(Math.max(0, Date.parse(String(f.checkAgainAt)) - Date.now()) + 100);
		}
		// 41 messages at 15 a page: three pages, one per delivery; with "Checks Before Review" at 1
		// a run that read on is still not a failed check.
		expect(outcomes).toEqual([
			['in_progress', 0],
			['in_progress', 0],
			['skipped', null],
		]);
		const reads = server.historyRequests.filter((q) => q.params.channel === CHANNEL);
		// One answered read per delivery (plus the 429s of deliveries that came too early for Slack).
		expect(reads.length - server.historyLimited).toBe(3);
		// The second and third deliveries start below what the one before read (a new `latest`, no cursor).
		const firstPages = reads.filter((q) => q.params.cursor === undefined).map((q) => Number(q.params.latest));
		expect(new Set(firstPages).size).toBe(3);
		expect(postedFor(server, 'l-1')).toHaveLength(1);
	});

	test('more than 1,000 messages in the window: read to the end, found, not sent to a person', async () => {
		const server = await slackWith(200);
		const dead = await deadRuns(['m-1']);
		postedByDeadRun(server, 'm-1', dead.get('m-1')!);
		for (let i = 0; i < 1_100; i++) server.addMessage({ channel: CHANNEL, text: `chatter ${i}` });
		const r = await run(slackSend(server), ['m-1']);
		expect(facts(r, REVIEW)).toEqual([]);
		expect(facts(r, SKIPPED)).toEqual([expect.objectContaining({ key: 'm-1', recovered: true })]);
		expect(server.historyRequests).toHaveLength(6);
		expect(postedFor(server, 'm-1')).toHaveLength(1);
	});

	test('"Checks Before Review": a check that keeps failing for a passing reason goes to a person after that many checks; nothing is posted', async () => {
		const server = await slackWith(15);
		await deadRuns(['c-1']);
		server.setHistoryPlan(() => ({ kind: 'status', status: 503, body: { ok: false, error: 'service_unavailable' } }));
		const first = await run(slackSend(server, { checksBeforeReview: 2 }), ['c-1']);
		expect(facts(first, IN_PROGRESS)).toEqual([expect.objectContaining({ reason: 'check_later', checks: 1, checkAgainAt: null })]);
		expect(String(facts(first, IN_PROGRESS)[0].detail)).toMatch(/\(1 of 2 checks without an answer/);
		const second = await run(slackSend(server, { checksBeforeReview: 2 }), ['c-1']);
		expect(facts(second, IN_PROGRESS)).toEqual([]);
		const [review] = facts(second, REVIEW);
		expect(review).toMatchObject({ reason: 'ambiguous', check: expect.objectContaining({ outcome: 'later' }) });
		expect(String(review.detail)).toMatch(/could not tell whether the message arrived \(2 checks could not answer; the last: Slack answered HTTP 503/);
		expect(await row('c-1')).toMatchObject({ status: 'needs_review', phase: 'sending' });
		expect(postedFor(server, 'c-1')).toHaveLength(0);
	});

	describe('HTTP check request', () => {
		let crm: StripeLikeServer;
		beforeAll(async () => {
			crm = await stripeLikeServer({ honoursKey: false });
		});
		afterAll(async () => {
			await crm?.close();
		});

		test('a 503 from the check request waits on In Progress; the next delivery asks again and sends once', async () => {
			await deadRuns(['h-1']);
			crm.setLookupPlan(() => ({ kind: 'status', status: 503, retryAfter: '1', body: { error: 'busy' } }));
			const send = {
				channel: 'http',
				...byKey,
				method: 'POST',
				url: `${crm.url}/v1/charges`,
				sendBody: true,
				bodyContentType: 'json',
				jsonBody: '={{ JSON.stringify({ order: $json.id, amount: $json.amount }) }}',
				honoursKey: false,
				options: { checkRequest: { request: { url: `=${crm.url}/v1/charges/by-order/{{ $json.id }}` } } },
			};
			const first = await run(send, ['h-1']);
			expect(facts(first, REVIEW)).toEqual([]);
			const [waiting] = facts(first, IN_PROGRESS);
			expect(waiting).toMatchObject({ reason: 'check_later', checks: 1 });
			expect(String(waiting.detail)).toMatch(/answered HTTP 503.*try again in 1 s/);
			crm.setLookupPlan(() => ({ kind: 'normal' }));
			await sleep(Math.max(0, Date.parse(String(waiting.checkAgainAt)) - Date.now()) + 300);
			const next = await run(send, ['h-1']);
			expect(facts(next, SENT)).toEqual([expect.objectContaining({ resent: true, check: expect.objectContaining({ outcome: 'not_found' }) })]);
			expect(crm.actions.filter((a) => (a.body as { order?: string })?.order === 'h-1')).toHaveLength(1);
		});
	});
});
