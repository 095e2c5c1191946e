/**
 * Mark Step Done and key lineage, through n8n-core's real engine: the key is found by following
 * pairedItem back to the Dedupe Gate, even through nodes that replaced the item's JSON.
 */
import type { IConnections, IExecuteFunctions, INode, INodeExecutionData, INodeParameters, INodeType } from 'n8n-workflow';

import { settingsFromUrl } from '../support/db';
import { SLACK_CREDENTIAL, postgresBackend, useEngineLedger, useServer } from '../support/engineBackends';
import { slackServer } from '../support/destinations';
import { chain, countingParameterReads, node, runWorkflow, type EngineRunResult } from '../support/engine';
import { testNodeDescription } from '../support/fixtureNodes';
import { PromptCache } from '../../nodes/PromptCache/PromptCache.node';
import { nodeTypes as ours } from '../integration/fixtures/guarded-workflow';

/**
 * Emits one more item than it received, without saying which input each came from (no
 * pairedItem). With equal counts n8n would pair them by position itself; with a different count
 * it cannot, and the lineage breaks here.
 */
class DropPairedNode implements INodeType {
	description = testNodeDescription('dropPaired', 'Drop Paired', { description: 'Forgets pairedItem' });

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		return [[...this.getInputData(), { json: {} }].map((_item, index) => ({ json: { fresh: index } }))];
	}
}

/**
 * Replaces each item's JSON with ledger facts of its own making (as an HTTP response that happens
 * to carry an `idempotency` field would), naming another workflow's namespace; keeps pairedItem.
 */
class ForgeFactsNode implements INodeType {
	description = testNodeDescription('forgeFacts', 'Forge Facts', { description: 'Makes up an idempotency field' });

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		return [
			this.getInputData().map((_item, index) => ({
				json: { idempotency: { namespace: 'workflow:victim', key: `victim-${index}`, step: '', fence: 1 } },
				pairedItem: { item: index },
			})),
		];
	}
}

const nodeTypes = {
	...ours,
	'test.dropPaired': new DropPairedNode(),
	'test.forgeFacts': new ForgeFactsNode(),
	'n8n-nodes-idempotency.promptCache': new PromptCache(),
};

const ORDERS = JSON.stringify([
	{ orderId: 'o-1', invoice: 'in_1', total: 10 },
	{ orderId: 'o-2', invoice: 'in_2', total: 20 },
	{ orderId: 'o-3', invoice: 'in_3', total: 30 },
]);

const gate = (extra: INodeParameters = {}) =>
	node('Gate', 'n8n-nodes-idempotency.dedupeGate', { keySource: 'field', keyField: 'orderId', mode: 'lease', options: { lease: 10, leaseUnit: 'minutes' }, ...extra });
const mark = (parameters: INodeParameters = {}, extra: Partial<INode> = {}) =>
	node('Mark Done', 'n8n-nodes-idempotency.markStepDone', { status: 'completed', resultFrom: 'none', ...parameters }, extra);

describe('engine: Mark Step Done and lineage', () => {
	const fx = useEngineLedger(postgresBackend, () => SLACK_CREDENTIAL);
	const slack = useServer(() => slackServer());
	let n = 0;
	let wf: string;

	beforeEach(() => {
		wf = `wf-lineage-${++n}-${Date.now()}`;
	});

	const run = (nodes: INode[], connections: IConnections, executionId?: string, types: Record<string, INodeType> = nodeTypes): Promise<EngineRunResult> =>
		runWorkflow({ id: wf, nodes, connections }, { credentials: fx.credentials, nodeTypes: types, executionId });
	const rows = async (key: string, namespace = `workflow:${wf}`) => (await fx.ledger.get(namespace, key)).map((r) => ({ step: r.step, status: r.status, externalId: r.externalId, result: r.result }));

	test('through two nodes that replaced the JSON, Mark Step Done finds the gate\'s key and completes the unit', async () => {
		const r = await run(
			[node('Orders', 'test.items', { items: ORDERS }), gate(), node('Call API', 'test.replace'), node('Tidy', 'test.replace'), mark()],
			chain('Orders', 'Gate', 'Call API', 'Tidy', 'Mark Done'),
		);
		expect(r.error).toBeUndefined();
		const out = r.items('Mark Done');
		expect(out.map((i) => i.json.replaced)).toEqual([true, true, true]);
		expect(out.map((i) => (i.json.idempotency as { key: string }).key)).toEqual(['o-1', 'o-2', 'o-3']);
		expect(out.map((i) => i.pairedItem)).toEqual([{ item: 0 }, { item: 1 }, { item: 2 }]);
		for (const key of ['o-1', 'o-2', 'o-3']) expect(await rows(key)).toEqual([{ step: '', status: 'completed', externalId: null, result: null }]);
		// The unit is done: the same orders are duplicates now.
		const again = await run([node('Orders', 'test.items', { items: ORDERS }), gate()], chain('Orders', 'Gate'));
		expect(again.outputs('Gate')[1]).toHaveLength(3);
	});

	test('a Prompt Cache in between does not lend its prompt hash as the key: two orders with the same prompt stay two units', async () => {
		const lookup = node('Classify', 'n8n-nodes-idempotency.promptCache', {
			operation: 'lookup',
			promptSource: 'text',
			model: 'gpt-4o-mini',
			prompt: '=Is this order risky?',
			namespace: `lineage-cache-${wf}`,
		});
		const r = await run(
			[node('Orders', 'test.items', { items: ORDERS }), gate(), lookup, mark()],
			{ ...chain('Orders', 'Gate', 'Classify'), Classify: { main: [[{ node: 'Mark Done', type: 'main', index: 0 }], [{ node: 'Mark Done', type: 'main', index: 0 }]] } },
		);
		expect(r.error).toBeUndefined();
		expect(r.items('Mark Done').map((i) => (i.json.idempotency as { key: string }).key)).toEqual(['o-1', 'o-2', 'o-3']);
		for (const key of ['o-1', 'o-2', 'o-3']) expect(await rows(key)).toEqual([{ step: '', status: 'completed', externalId: null, result: null }]);
	});

	test('Guarded Send finds the key by lineage too, through a replacing node', async () => {
		const send = node('Notify', 'n8n-nodes-idempotency.guardedSend', {
			channel: 'slack',
			slackChannel: '#orders',
			slackText: '=Order done ({{ $json.index }})',
			slackOptions: { apiUrl: slack.apiUrl },
		});
		const r = await run([node('Orders', 'test.items', { items: ORDERS }), gate(), node('Call API', 'test.replace'), send], chain('Orders', 'Gate', 'Call API', 'Notify'));
		expect(r.error).toBeUndefined();
		const [sent] = r.outputs('Notify');
		expect(sent.map((i) => (i.json.idempotency as { key: string }).key)).toEqual(['o-1', 'o-2', 'o-3']);
		expect((await rows('o-2')).map((x) => [x.step, x.status])).toEqual([
			['', 'in_progress'],
			['Notify', 'completed'],
		]);
	});

	test('a named step with "Also Record the Unit of Work": both rows, with the external ID and the item (without the ledger facts) as result', async () => {
		const r = await run(
			[
				node('Orders', 'test.items', { items: ORDERS }),
				gate(),
				mark({ step: 'invoiceCreate', externalId: '={{ $json.invoice }}', resultFrom: 'item', options: { completeUnit: true } }),
			],
			chain('Orders', 'Gate', 'Mark Done'),
		);
		expect(r.error).toBeUndefined();
		expect(r.items('Mark Done')[0].json.idempotency).toMatchObject({ outcome: 'recorded', step: 'invoiceCreate', status: 'completed', externalId: 'in_1', unitStatus: 'completed' });
		const stored = await rows('o-1');
		expect(stored.map((x) => [x.step, x.status, x.externalId])).toEqual([
			['', 'completed', 'in_1'],
			['invoiceCreate', 'completed', 'in_1'],
		]);
		expect(stored[1].result).toEqual({ orderId: 'o-1', invoice: 'in_1', total: 10 });
	});

	test.each([
		['Mark Step Done, key by lineage', 'markStepDone', () => mark({ step: 'invoiceCreate', externalId: '={{ $json.invoice }}', resultFrom: 'item', options: { completeUnit: true } }, { name: 'Under Test' }), true],
		['Mark Step Done, key from an expression', 'markStepDone', (wfId: string) => mark({ keyFrom: 'expression', keyExpression: '={{ $json.orderId }}', step: 'ship', externalId: '={{ $json.invoice }}', options: { namespace: `once-${wfId}` } }, { name: 'Under Test' }), false],
		['Guarded Send, Slack', 'guardedSend', () => node('Under Test', 'n8n-nodes-idempotency.guardedSend', { channel: 'slack', slackChannel: '#orders', slackText: '=Order {{ $json.orderId }} done', slackOptions: { apiUrl: slack.apiUrl } }), true],
	] as const)('%s: settings are read once per execution (300 items cost no more parameter reads than 3)', async (_label, type, make, throughGate) => {
		const { node: counting, reads } = countingParameterReads(nodeTypes[`n8n-nodes-idempotency.${type}`]);
		const readsFor = async (count: number) => {
			reads.clear();
			wf = `wf-once-${++n}-${Date.now()}`;
			const orders = JSON.stringify(Array.from({ length: count }, (_, i) => ({ orderId: `once-${i}`, invoice: `in_${i}`, total: i })));
			const nodes = [node('Orders', 'test.items', { items: orders }), ...(throughGate ? [gate()] : []), make(wf)];
			const r = await run(nodes, chain(...nodes.map((x) => x.name)), undefined, { ...nodeTypes, [`n8n-nodes-idempotency.${type}`]: counting });
			expect(r.error).toBeUndefined();
			expect(r.items('Under Test')).toHaveLength(count);
			return Object.fromEntries(reads);
		};
		const small = await readsFor(3);
		expect(Object.keys(small).length).toBeGreaterThan(3);
		expect(await readsFor(300)).toEqual(small);
	});

	test('"Failed, Retry Later" on the unit lets the gate through again on the next run', async () => {
		const flow = () => [node('Orders', 'test.items', { items: ORDERS }), gate(), mark({ status: 'failed_retryable' })];
		await run(flow(), chain('Orders', 'Gate', 'Mark Done'));
		expect((await rows('o-1'))[0].status).toBe('failed_retryable');
		const again = await run([node('Orders', 'test.items', { items: ORDERS }), gate()], chain('Orders', 'Gate'));
		const fresh = again.outputs('Gate')[0];
		expect(fresh).toHaveLength(3);
		expect(fresh[0].json.idempotency).toMatchObject({ outcome: 'new', _ledger: { previousStatus: 'failed_retryable' } });
	});

	test('an item\'s own data cannot choose a key in another workflow\'s namespace: the gate\'s real output decides', async () => {
		const forged = await run(
			[node('Orders', 'test.items', { items: ORDERS }), gate(), node('Forge', 'test.forgeFacts'), mark()],
			chain('Orders', 'Gate', 'Forge', 'Mark Done'),
		);
		expect(forged.error).toBeUndefined();
		expect(forged.items('Mark Done').map((i) => (i.json.idempotency as { namespace: string; key: string }).key)).toEqual(['o-1', 'o-2', 'o-3']);
		for (const key of ['o-1', 'o-2', 'o-3']) expect((await rows(key))[0]).toMatchObject({ step: '', status: 'completed' });
		expect(await rows('victim-0', 'workflow:victim')).toEqual([]);

		// Without a gate upstream, made-up facts of another namespace are refused outright.
		const items = JSON.stringify([{ idempotency: { namespace: 'workflow:victim', key: 'victim-9', step: '' } }]);
		const refused = await run([node('Orders', 'test.items', { items }), mark()], chain('Orders', 'Mark Done'));
		expect(refused.error?.message).toMatch(/carries an idempotency key of the namespace "workflow:victim", but no Dedupe Gate upstream/);
		expect(await rows('victim-9', 'workflow:victim')).toEqual([]);
	});

	test('a result larger than 64 KB is stored truncated, with a note', async () => {
		const items = JSON.stringify([{ orderId: 'big-1', text: 'x'.repeat(70_000) }]);
		const r = await run(
			[node('Orders', 'test.items', { items }), mark({ keyFrom: 'expression', keyExpression: '={{ $json.orderId }}', resultFrom: 'item' })],
			chain('Orders', 'Mark Done'),
		);
		expect(r.error).toBeUndefined();
		const [row] = await rows('big-1');
		expect(row.result).toMatchObject({ truncated: true, originalLength: JSON.stringify({ orderId: 'big-1', text: 'x'.repeat(70_000) }).length });
		expect((row.result as { text: string }).text).toHaveLength(64 * 1024);
	});

	test('an explicit key overrides lineage; a shared namespace is used as given', async () => {
		const r = await run(
			[node('Orders', 'test.items', { items: ORDERS }), mark({ keyFrom: 'expression', keyExpression: '={{ $json.orderId }}', step: 'ship', options: { namespace: `orders-${wf}` } })],
			chain('Orders', 'Mark Done'),
		);
		expect(r.error).toBeUndefined();
		expect((await rows('o-3', `orders-${wf}`)).map((x) => [x.step, x.status])).toEqual([['ship', 'completed']]);
	});

	test('no Dedupe Gate upstream: the error says so and names the node to point the key at; nothing is written', async () => {
		const r = await run([node('Orders', 'test.items', { items: ORDERS }), node('Call API', 'test.replace'), mark()], chain('Orders', 'Call API', 'Mark Done'));
		expect(r.error?.message).toMatch(/no Dedupe Gate is upstream of "Mark Done"/);
		expect(String((r.error as { description?: string }).description)).toMatch(/"Call API"/);
		expect(await fx.ledger.list({ namespace: `workflow:${wf}`, limit: 10 })).toMatchObject({ records: [] });
	});

	test('a node that drops pairedItem breaks the trail: the error names it', async () => {
		const r = await run(
			[node('Orders', 'test.items', { items: ORDERS }), gate(), node('Drop Paired', 'test.dropPaired'), mark()],
			chain('Orders', 'Gate', 'Drop Paired', 'Mark Done'),
		);
		expect(r.error?.message).toMatch(/cannot be traced back to "Gate".*"Drop Paired"/);
		expect(String((r.error as { description?: string }).description)).toMatch(/Key From/);
		expect((await rows('o-1')).map((x) => x.status)).toEqual(['in_progress']);
	});

	test('bad input on one item: a clear per-item error, that item is not written, the others are (continue on fail)', async () => {
		const items = JSON.stringify([
			{ orderId: 'o-1', invoice: 'in_1' },
			{ orderId: 'o-2', invoice: { nested: true } },
			{ orderId: 'o-3', invoice: 'in_3' },
		]);
		const r = await run(
			[node('Orders', 'test.items', { items }), gate(), mark({ step: 'invoice', externalId: '={{ $json.invoice }}' }, { onError: 'continueRegularOutput' })],
			chain('Orders', 'Gate', 'Mark Done'),
		);
		expect(r.error).toBeUndefined();
		const out = r.items('Mark Done');
		expect(out).toHaveLength(3);
		expect(out[1].json.error).toMatch(/external ID must be text or a number, but on this item it is a object|external ID must be text or a number/);
		expect(out[1].pairedItem).toEqual({ item: 1 });
		expect((await rows('o-2')).map((x) => x.step)).toEqual(['']);
		expect((await rows('o-3')).map((x) => x.step)).toEqual(['', 'invoice']);
	});

	test('without continue on fail, one bad item stops the node before anything is written', async () => {
		const items = JSON.stringify([{ orderId: 'o-1', invoice: 'in_1' }, { orderId: 'o-2', invoice: ['x'] }]);
		const r = await run([node('Orders', 'test.items', { items }), gate(), mark({ step: 'invoice', externalId: '={{ $json.invoice }}' })], chain('Orders', 'Gate', 'Mark Done'));
		expect(r.error?.message).toMatch(/external ID must be text or a number, but on this item it is a list/);
		expect((await rows('o-1')).map((x) => x.step)).toEqual(['']);
	});

	test('another run holds the key: refused with a clear error, unless told to record anyway', async () => {
		await run([node('Orders', 'test.items', { items: ORDERS }), gate()], chain('Orders', 'Gate'), `holder-${wf}`);
		const explicit = { keyFrom: 'expression', keyExpression: '={{ $json.orderId }}' };
		const refused = await run([node('Orders', 'test.items', { items: ORDERS }), mark(explicit)], chain('Orders', 'Mark Done'));
		expect(refused.error?.message).toMatch(/Another run has the key "o-1" now \(it holds it, or took it over/);
		expect((await rows('o-1'))[0].status).toBe('in_progress');
		const forced = await run([node('Orders', 'test.items', { items: ORDERS }), mark({ ...explicit, options: { overrideClaim: true } })], chain('Orders', 'Mark Done'));
		expect(forced.error).toBeUndefined();
		expect((await rows('o-1'))[0].status).toBe('completed');
	});

	test('the ledger cannot be reached: the node fails closed and says what to check', async () => {
		const down = { ...settingsFromUrl(fx.table), port: 1 };
		const r = await runWorkflow(
			{ id: wf, nodes: [node('Orders', 'test.items', { items: ORDERS }), mark({ keyFrom: 'expression', keyExpression: '={{ $json.orderId }}' })], connections: chain('Orders', 'Mark Done') },
			{ credentials: { idempotencyPostgresApi: down }, nodeTypes },
		);
		expect(r.error?.message).toMatch(/ledger is unavailable/i);
	});
});
