/**
 * Mark Step Done and Guarded Send through n8n-core's real engine, on who owns a unit of work: a
 * run whose Dedupe Gate claim ran out and was taken over by another run records nothing for that
 * claim, not even a step the gate never claimed itself (issue 32). Real PostgreSQL, a real local
 * Stripe-like API.
 */
import type { IExecuteFunctions, INodeExecutionData, INodeParameters, INodeType } from 'n8n-workflow';

import { postgresBackend, useEngineLedger, useServer } from '../support/engineBackends';
import { stripeLikeServer } from '../support/destinations';
import { chain, node, runWorkflow } from '../support/engine';
import { nodeTypes as ours } from '../integration/fixtures/guarded-workflow';

/** `test.hold`: passes its items on once the test lets it (a slow API call between the gate and Mark Step Done). */
let holding: { entered: () => void; released: Promise<void> } | null = null;
const hold: INodeType = {
	description: {
		displayName: 'Hold',
		name: 'hold',
		group: ['transform'],
		version: 1,
		description: 'Waits until the test lets it go on',
		defaults: { name: 'Hold' },
		inputs: ['main'],
		outputs: ['main'],
		properties: [],
	},
	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		const h = holding;
		holding = null;
		if (h) {
			h.entered();
			await h.released;
		}
		return [this.getInputData()];
	},
};

const nodeTypes = { ...ours, 'test.hold': hold };
const ORDER = JSON.stringify([{ orderId: 'o-1' }]);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('engine: Mark Step Done, Guarded Send and a unit claim another run took over', () => {
	const fx = useEngineLedger(postgresBackend);
	const api = useServer(() => stripeLikeServer());
	let wf: string;
	let n = 0;

	beforeEach(() => {
		wf = `wf-msd-own-${++n}-${Date.now()}`;
	});

	const gate = (leaseSeconds: number) =>
		node('Gate', 'n8n-nodes-idempotency.dedupeGate', { keySource: 'field', keyField: 'orderId', mode: 'lease', options: { lease: leaseSeconds, leaseUnit: 'seconds' } });
	const mark = (parameters: INodeParameters) =>
		node('Mark CRM', 'n8n-nodes-idempotency.markStepDone', { step: 'crm', resultFrom: 'none', ...parameters }, { onError: 'continueRegularOutput' });
	const run = (leaseSeconds: number, parameters: INodeParameters, executionId: string, withHold = false) =>
		runWorkflow(
			withHold
				? { id: wf, nodes: [node('Orders', 'test.items', { items: ORDER }), gate(leaseSeconds), node('Call CRM', 'test.hold'), mark(parameters)], connections: chain('Orders', 'Gate', 'Call CRM', 'Mark CRM') }
				: { id: wf, nodes: [node('Orders', 'test.items', { items: ORDER }), gate(leaseSeconds), mark(parameters)], connections: chain('Orders', 'Gate', 'Mark CRM') },
			{ credentials: fx.credentials, nodeTypes, executionId },
		);

	test('run A\'s late "failed, retry later" for the step is refused in words a person can act on; run B\'s recorded step stands', async () => {
		let release = () => undefined as void;
		const entered = new Promise<void>((resolve) => {
			holding = { entered: resolve, released: new Promise<void>((r) => (release = r)) };
		});
		// Run A: its gate claims the order for 1 s, then its CRM call hangs past that.
		const runA = run(1, { status: 'failed_retryable' }, `${wf}-a`, true);
		await entered;
		await sleep(1_500);
		// Run B: the next delivery takes the order over and records the CRM step with its ID.
		const b = await run(600, { status: 'completed', externalId: 'crm-42' }, `${wf}-b`);
		expect(b.error).toBeUndefined();
		expect(b.outputs('Gate')[0]).toHaveLength(1);
		expect(b.items('Mark CRM').map((i) => i.json.error)).toEqual([undefined]);
		// Run A's CRM call returns (it failed), and A records the step as "failed, retry later".
		release();
		const a = await runA;
		expect(a.error).toBeUndefined();
		const rows = await fx.ledger.get(`workflow:${wf}`, 'o-1');
		expect(rows.map((r) => [r.step, r.status, r.leaseHolder, r.externalId])).toEqual([
			['', 'in_progress', `execution:${wf}-b`, null],
			['crm', 'completed', null, 'crm-42'],
		]);
		const [item] = a.items('Mark CRM');
		expect(item.json.error).toBe('Another run has the key "o-1" now (it holds it, or took it over after this run\'s claim ran out), so the step "crm" was not recorded');
		// What to do, with no driver text and no option that could not help: the gate's claim is over.
		expect(item.json.details).toBe(
			'Nothing was overwritten. This run\'s claim from the Dedupe Gate ran out (its Lease) or was released, and another run took the key over: that run records it. Check the key with the Idempotency Ledger node (Get) to see what it recorded; if this happens often, make the Dedupe Gate\'s Lease longer. Only the Idempotency Ledger node (Release) can change what another run recorded.',
		);
	});

	test('"Record Even if Another Run Holds the Key" does not let a run whose claim was taken over write: neither the step nor the unit', async () => {
		let release = () => undefined as void;
		const entered = new Promise<void>((resolve) => {
			holding = { entered: resolve, released: new Promise<void>((r) => (release = r)) };
		});
		const runA = run(1, { status: 'failed_retryable', options: { overrideClaim: true, completeUnit: true } }, `${wf}-a`, true);
		await entered;
		await sleep(1_500);
		const b = await run(600, { status: 'completed', externalId: 'crm-42', options: { completeUnit: true } }, `${wf}-b`);
		expect(b.items('Mark CRM').map((i) => [i.json.error, (i.json.idempotency as { unitStatus?: string }).unitStatus])).toEqual([[undefined, 'completed']]);
		release();
		const a = await runA;
		expect(a.error).toBeUndefined();
		expect(a.items('Mark CRM').map((i) => i.json.error)).toEqual([
			'Another run has the key "o-1" now (it holds it, or took it over after this run\'s claim ran out), so the step "crm" and the unit of work were not recorded',
		]);
		const rows = await fx.ledger.get(`workflow:${wf}`, 'o-1');
		expect(rows.map((r) => [r.step, r.status, r.externalId])).toEqual([
			['', 'completed', 'crm-42'],
			['crm', 'completed', 'crm-42'],
		]);
	});

	test('Guarded Send records what it sent, but not the unit of a gate claim another run took over (a gate that claims a named step)', async () => {
		const orderGate = (leaseSeconds: number) =>
			node('Gate', 'n8n-nodes-idempotency.dedupeGate', { keySource: 'field', keyField: 'orderId', mode: 'lease', options: { step: 'order', lease: leaseSeconds, leaseUnit: 'seconds' } });
		const send = node('Send', 'n8n-nodes-idempotency.guardedSend', {
			channel: 'http',
			method: 'POST',
			url: `${api.url}/v1/charges`,
			sendBody: true,
			bodyContentType: 'json',
			jsonBody: '={{ JSON.stringify({ order: $json.orderId }) }}',
			options: { completeUnit: true },
		});
		let release = () => undefined as void;
		const entered = new Promise<void>((resolve) => {
			holding = { entered: resolve, released: new Promise<void>((r) => (release = r)) };
		});
		// Run A: its gate claims the order for 1 s; the run stalls before Guarded Send.
		const runA = runWorkflow(
			{ id: wf, nodes: [node('Orders', 'test.items', { items: ORDER }), orderGate(1), node('Stall', 'test.hold'), send], connections: chain('Orders', 'Gate', 'Stall', 'Send') },
			{ credentials: fx.credentials, nodeTypes, executionId: `${wf}-a` },
		);
		await entered;
		await sleep(1_500);
		// Run B takes the order over and records the unit of work with its invoice.
		const b = await runWorkflow(
			{
				id: wf,
				nodes: [node('Orders', 'test.items', { items: ORDER }), orderGate(600), node('Mark Unit', 'n8n-nodes-idempotency.markStepDone', { status: 'completed', externalId: 'inv-7', resultFrom: 'none' })],
				connections: chain('Orders', 'Gate', 'Mark Unit'),
			},
			{ credentials: fx.credentials, nodeTypes, executionId: `${wf}-b` },
		);
		expect(b.items('Mark Unit').map((i) => i.json.error)).toEqual([undefined]);
		release();
		const a = await runA;
		expect(a.error).toBeUndefined();
		// The charge went out under A's own claim of the step: recorded, and said on the item.
		const [sent] = a.outputs('Send')[0];
		expect(sent.json.idempotency).toMatchObject({ outcome: 'sent', step: 'Send', unitRecorded: false, warning: expect.stringMatching(/^Another run took over the unit of work/) });
		const rows = await fx.ledger.get(`workflow:${wf}`, 'o-1');
		expect(rows.map((r) => [r.step, r.status, r.externalId])).toEqual([
			['', 'completed', 'inv-7'],
			['Send', 'completed', (sent.json.idempotency as { externalId: string }).externalId],
			['order', 'in_progress', null],
		]);
	});
});
