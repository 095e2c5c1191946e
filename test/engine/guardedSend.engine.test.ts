/**
 * The seeds' example through n8n-core's real engine: Webhook-like event → Dedupe Gate → Guarded
 * Send (HTTP, to a Stripe-like API on localhost) → Mark Step Done. The same event runs three
 * times; the destination performs one action.
 */
import type { IConnections } from 'n8n-workflow';

import { DedupeGate } from '../../nodes/DedupeGate/DedupeGate.node';
import { GuardedSend } from '../../nodes/GuardedSend/GuardedSend.node';
import { MarkStepDone } from '../../nodes/MarkStepDone/MarkStepDone.node';
import { postgresBackend, useEngineLedger, useServer } from '../support/engineBackends';
import { stripeLikeServer } from '../support/destinations';
import { connect, node, runWorkflow } from '../support/engine';

const nodeTypes = {
	'n8n-nodes-idempotency.dedupeGate': new DedupeGate(),
	'n8n-nodes-idempotency.guardedSend': new GuardedSend(),
	'n8n-nodes-idempotency.markStepDone': new MarkStepDone(),
};


const webhookEvent = (eventId: string, amount = 1200) =>
	JSON.stringify([{ headers: { 'content-type': 'application/json', 'x-delivery': `${Math.random()}` }, params: {}, query: {}, body: { eventId, type: 'order.paid', amount } }]);

describe('engine: Webhook → Dedupe Gate → Guarded Send (HTTP) → Mark Step Done', () => {
	const fx = useEngineLedger(postgresBackend);
	const api = useServer(() => stripeLikeServer());


	const workflow = (eventId: string, extra: { failAfterSend?: boolean } = {}) => {
		const nodes = [
			node('Webhook', 'test.items', { items: webhookEvent(eventId) }),
			node('Dedupe Gate', 'n8n-nodes-idempotency.dedupeGate', { keySource: 'field', keyField: 'body.eventId', mode: 'lease', options: { lease: 2, leaseUnit: 'seconds' } }),
			node('Charge Customer', 'n8n-nodes-idempotency.guardedSend', {
				channel: 'http',
				method: 'POST',
				url: `${api.url}/v1/charges`,
				sendBody: true,
				bodyContentType: 'json',
				jsonBody: '={{ JSON.stringify({ amount: $json.body.amount, event: $json.body.eventId }) }}',
			}),
			node('Mark Done', 'n8n-nodes-idempotency.markStepDone', { status: 'completed', resultFrom: 'none' }),
		];
		const connections: IConnections = {};
		connect(connections, 'Webhook', 'Dedupe Gate');
		connect(connections, 'Dedupe Gate', 'Charge Customer');
		if (extra.failAfterSend) {
			// A step after the send that fails: the run dies before Mark Step Done.
			nodes.push(node('Breaks', 'test.set', { field: 'x', value: 'boom', failOn: 'boom' }));
			connect(connections, 'Charge Customer', 'Breaks');
			connect(connections, 'Breaks', 'Mark Done');
		} else {
			// Sent and Skipped both complete the unit (a retry after a crash may find the send done).
			connect(connections, 'Charge Customer', 'Mark Done', 0);
			connect(connections, 'Charge Customer', 'Mark Done', 1);
		}
		return { nodes, connections, id: 'wf-seed' };
	};

	test('the same event three times: one charge, then Duplicate twice', async () => {
		const before = api.actions.length;
		const runs = [];
		for (let n = 0; n < 3; n++) runs.push(await runWorkflow(workflow('evt_seed_1'), { credentials: fx.credentials, nodeTypes }));
		const [first, second, third] = runs;
		expect(first.error).toBeUndefined();
		expect(first.outputs('Dedupe Gate')[0]).toHaveLength(1);
		const [sent, skipped, review] = first.outputs('Charge Customer');
		expect(sent).toHaveLength(1);
		expect(skipped ?? []).toHaveLength(0);
		expect(review ?? []).toHaveLength(0);
		expect(sent[0].json.idempotency).toMatchObject({ outcome: 'sent', key: 'evt_seed_1', step: 'Charge Customer', status: 'completed', resent: false });
		expect(String((sent[0].json.idempotency as { externalId: string }).externalId)).toMatch(/^ch_/);
		expect(first.items('Mark Done')[0].json.idempotency).toMatchObject({ outcome: 'recorded', status: 'completed', step: '' });

		for (const again of [second, third]) {
			expect(again.error).toBeUndefined();
			expect(again.outputs('Dedupe Gate')[0] ?? []).toHaveLength(0);
			expect(again.outputs('Dedupe Gate')[1]).toHaveLength(1);
			expect(again.ran('Charge Customer')).toBe(false);
		}
		expect(api.actions.length - before).toBe(1);
		const rows = await fx.ledger.get('workflow:wf-seed', 'evt_seed_1');
		expect(rows.map((r) => [r.step, r.status])).toEqual([
			['', 'completed'],
			['Charge Customer', 'completed'],
		]);
	});

	test('a run that dies after the send: the retry re-enters through the gate, the send is Skipped with the stored result, the unit completes', async () => {
		const before = api.actions.length;
		const first = await runWorkflow(workflow('evt_seed_2', { failAfterSend: true }), { credentials: fx.credentials, nodeTypes });
		expect(first.error).toBeDefined();
		expect(first.outputs('Charge Customer')[0]).toHaveLength(1);
		// The gate's claim is still live: a retry right away is In Progress and sends nothing.
		const early = await runWorkflow(workflow('evt_seed_2'), { credentials: fx.credentials, nodeTypes });
		expect(early.outputs('Dedupe Gate')[2]).toHaveLength(1);
		expect(early.ran('Charge Customer')).toBe(false);
		await new Promise((r) => setTimeout(r, 2_200));
		const retry = await runWorkflow(workflow('evt_seed_2'), { credentials: fx.credentials, nodeTypes });
		expect(retry.error).toBeUndefined();
		expect(retry.outputs('Dedupe Gate')[0]).toHaveLength(1);
		const [sent, skipped] = retry.outputs('Charge Customer');
		expect(sent ?? []).toHaveLength(0);
		expect(skipped).toHaveLength(1);
		const facts = skipped[0].json.idempotency as Record<string, unknown>;
		expect(facts).toMatchObject({ outcome: 'skipped', reason: 'already_sent', sentByExecution: first.run.data.resultData ? expect.any(String) : null });
		expect(facts.sentAt).toEqual(expect.any(String));
		expect(String(facts.externalId)).toMatch(/^ch_/);
		expect(retry.items('Mark Done')).toHaveLength(1);
		const third = await runWorkflow(workflow('evt_seed_2'), { credentials: fx.credentials, nodeTypes });
		expect(third.outputs('Dedupe Gate')[1]).toHaveLength(1);
		expect(api.actions.length - before).toBe(1);
	});
});
