/**
 * Guarded Send through n8n-core's real engine, on what the ledger decides alone: whose clock says
 * a lease is live, who owns a step (fencing), and what a release by an operator means for the
 * next send. Real PostgreSQL, real local destinations.
 */
import type { INodeParameters } from 'n8n-workflow';

import { idempotencyKeyFor } from '../../nodes/GuardedSend/channels/http';
import { SLACK_CREDENTIAL, postgresBackend, useEngineLedger, useServer } from '../support/engineBackends';
import { slackServer, stripeLikeServer } from '../support/destinations';
import { chain, node, runWorkflow, type EngineRunResult } from '../support/engine';
import { httpPost, nodeTypes } from '../integration/fixtures/guarded-workflow';
import { withHostClockSkew } from '../support/clock';

const orders = (...ids: string[]) => JSON.stringify(ids.map((id) => ({ id, amount: 100 })));
const byKey = { keyFrom: 'expression', keyExpression: '={{ $json.id }}' };
const facts = (r: EngineRunResult, output: number) => (r.outputs('Send')[output] ?? []).map((i) => i.json.idempotency as Record<string, unknown>);
const DAY = 86_400_000;


describe('engine: Guarded Send and the ledger as the only clock and owner', () => {
	const fx = useEngineLedger(postgresBackend, () => SLACK_CREDENTIAL);
	const api = useServer(() => stripeLikeServer());
	const slowApi = useServer(() => stripeLikeServer({ delayMs: 1_500 }));
	const slack = useServer(() => slackServer());
	let wf: string;
	let n = 0;

	beforeEach(() => {
		wf = `wf-own-${++n}-${Date.now()}`;
	});

	const ns = () => `workflow:${wf}`;
	const slackSend = (extra: INodeParameters = {}) => ({ channel: 'slack', ...byKey, slackChannel: '#orders', slackText: '=Order {{ $json.id }} paid', slackOptions: { apiUrl: slack.apiUrl }, ...extra });
	const httpSend = (url: string, extra: INodeParameters = {}) => ({
		...httpPost(`${url}/v1/charges`),
		...byKey,
		jsonBody: '={{ JSON.stringify({ order: $json.id }) }}',
		...extra,
	});
	const run = (parameters: INodeParameters, items: string, executionId?: string, onError?: 'continueRegularOutput') =>
		runWorkflow(
			{
				id: wf,
				nodes: [node('Orders', 'test.items', { items }), node('Send', 'n8n-nodes-idempotency.guardedSend', parameters, onError ? { onError } : {})],
				connections: chain('Orders', 'Send'),
			},
			{ credentials: fx.credentials, nodeTypes, executionId },
		);
	const rows = async (key: string) => fx.ledger.get(ns(), key);

	test.each([10_000, -10_000])('n8n host clock %i ms off: a step another run is sending leaves on In Progress, never Skipped as "already sent", and the unit stays open', async (skewMs) => {
		await fx.ledger.claim([{ namespace: ns(), key: 'sk-1', step: 'Send', fingerprint: null }], { mode: 'lease', holder: 'execution:other', leaseMs: 5_000, ttlMs: DAY });
		const r = await withHostClockSkew(skewMs, () => run(slackSend({ options: { completeUnit: true } }), orders('sk-1')));
		expect(r.error).toBeUndefined();
		expect(facts(r, 3)).toEqual([expect.objectContaining({ outcome: 'in_progress', reason: 'in_progress', status: 'in_progress' })]);
		expect(facts(r, 0)).toEqual([]);
		expect(facts(r, 1)).toEqual([]);
		expect(facts(r, 2)).toEqual([]);
		expect((await rows('sk-1')).map((row) => [row.step, row.status])).toEqual([['Send', 'in_progress']]);
		expect(slack.messages.filter((m) => m.text === 'Order sk-1 paid')).toHaveLength(0);
	});

	test('an operator releases a step while it is being sent: the late result changes nothing, and the item says the key was released (not that another run took it over)', async () => {
		const releasing = (async () => {
			for (let i = 0; i < 200; i++) {
				const [row] = await rows('op-1');
				if (row?.phase === 'sending') {
					return fx.ledger.release({ namespace: ns(), key: 'op-1', step: 'Send', releasedBy: 'on-call', evenIfHeld: true, resolution: 'not_sent', ttlMs: DAY });
				}
				await new Promise((res) => setTimeout(res, 20));
			}
			throw new Error('the step never reached sending');
		})();
		const r = await run(httpSend(slowApi.url, { options: { timeout: 5 } }), orders('op-1', 'op-2'), undefined, 'continueRegularOutput');
		expect((await releasing).map((s) => s.action)).toEqual(['released']);
		// op-2 was still owned: sent and recorded. op-1 was sent, but its result was not written over the release.
		expect(facts(r, 0).map((f) => f.key)).toEqual(['op-2']);
		const failed = (r.outputs('Send')[2] ?? []).map((i) => i.json);
		expect(failed).toHaveLength(1);
		expect(String(failed[0].error)).toMatch(/^The step "Send" of the key "op-1": the ledger no longer has this key \(someone released it with the Idempotency Ledger node, or it was deleted from the ledger table\), after the message was sent/);
		expect(await rows('op-1')).toEqual([]);
		expect((await rows('op-2'))[0]).toMatchObject({ status: 'completed' });
	});

	test('a step released as "not sent" is sent again with a new Idempotency-Key; a takeover after a crash keeps the key', async () => {
		const first = await run(httpSend(api.url), orders('rk-1'));
		const firstKey = facts(first, 0)[0].idempotencyKey as string;
		expect(firstKey).toMatch(/^[0-9a-f]{64}$/);
		// A crash after "sending": the next run takes the step over and asks again with the same key.
		const crashed = await fx.ledger.claim([{ namespace: ns(), key: 'rk-2', step: 'Send', fingerprint: null }], { mode: 'lease', holder: 'execution:dead', leaseMs: 300, ttlMs: DAY });
		const dead = crashed[0].kind === 'claimed' ? crashed[0].record : null;
		await fx.ledger.markPhase([{ namespace: ns(), key: 'rk-2', step: 'Send', fence: dead!.fence! }], 'sending');
		await new Promise((res) => setTimeout(res, 500));
		const takeover = await run(httpSend(api.url), orders('rk-2'));
		expect(facts(takeover, 0)[0]).toMatchObject({ resent: true });
		const takeoverKey = facts(takeover, 0)[0].idempotencyKey;
		expect(takeoverKey).toBe(idempotencyKeyFor(ns(), 'rk-2', 'Send', dead!.firstSeenAt));
		expect(takeoverKey).not.toBe(firstKey);

		// The operator says rk-1 did not arrive and frees it: the replay is a new request to the API.
		const released = await fx.ledger.release({ namespace: ns(), key: 'rk-1', step: 'Send', releasedBy: 'on-call', resolution: 'not_sent', ttlMs: DAY });
		expect(released.map((s) => s.action)).toEqual(['released']);
		const replay = await run(httpSend(api.url), orders('rk-1'));
		const replayKey = facts(replay, 0)[0].idempotencyKey as string;
		expect(replayKey).not.toBe(firstKey);
		expect(api.keysSeen.get(firstKey)).toBe(1);
		expect(api.keysSeen.get(replayKey)).toBe(1);
		expect(api.actions.filter((a) => (a.body as { order?: string })?.order === 'rk-1')).toHaveLength(2);
	});
});
