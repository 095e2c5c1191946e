/**
 * The fence around the lineage walk (lib/n8n/lineageCheck.ts): Mark Step Done and Guarded Send find
 * the Dedupe Gate's key through `$getPairedItem`, an n8n internal. A future n8n that drops it,
 * answers it for another item or refuses it must not give a wrong key. Each test changes it inside
 * the real n8n-workflow the engine runs (as the shortcut tests do, shortcutCheck.engine.test.ts)
 * and expects every item to get the key n8n's own `$('Gate').item` gives, one warning in n8n's log
 * for the process, and a warning hint on every node run that reads keys that way.
 */
import type { IExecuteFunctions, INode, INodeExecutionData, INodeType } from 'n8n-workflow';

import { forgetLineageCheck } from '../../lib/n8n/lineageCheck';
import { SLACK_CREDENTIAL, postgresBackend, useEngineLedger, useServer } from '../support/engineBackends';
import { slackServer } from '../support/destinations';
import { expectWarnedOnce, watched, withChangedN8n, type DataProxy } from '../support/changedN8n';
import { chain, node, runWorkflow, type EngineRunResult } from '../support/engine';
import { nodeTypes as ours } from '../integration/fixtures/guarded-workflow';

/** `proxy` with `$getPairedItem` answered by `value(the real one)` instead (undefined: gone). */
const pairedItem = (value: (real: (...args: unknown[]) => unknown) => unknown) => (proxy: DataProxy): DataProxy =>
	new Proxy(proxy, {
		get: (target, key, receiver) => {
			const real = Reflect.get(target, key, receiver);
			return key === '$getPairedItem' ? value(real as (...args: unknown[]) => unknown) : real;
		},
	});

const changes: Record<string, (proxy: DataProxy) => DataProxy> = {
	'$getPairedItem answers for the next item': pairedItem((real) => (node: string, source: unknown, paired: { item: number }) => real(node, source, { ...paired, item: paired.item + 1 })),
	'$getPairedItem is gone': pairedItem(() => undefined),
	'$getPairedItem refuses every item': pairedItem(() => () => {
		throw new Error('Paired item data is unavailable');
	}),
};

const orders = (...ids: number[]) => JSON.stringify(ids.map((n) => ({ orderId: `o-${n}`, total: n * 10 })));
const gate = () => node('Gate', 'n8n-nodes-idempotency.dedupeGate', { keySource: 'field', keyField: 'orderId', mode: 'lease', options: { lease: 10, leaseUnit: 'minutes' } });
const mark = () => node('Mark Done', 'n8n-nodes-idempotency.markStepDone', { status: 'completed', resultFrom: 'none' });
const keysOf = (items: INodeExecutionData[]) => items.map((i) => (i.json.idempotency as { key: string } | undefined)?.key);

describe('a changed $getPairedItem: keys come from n8n’s own $(\'Gate\').item, never from the walk', () => {
	const fx = useEngineLedger(postgresBackend, () => SLACK_CREDENTIAL);
	const slack = useServer(() => slackServer());
	let warnings: string[];
	let types: Record<string, INodeType>;
	let n = 0;
	let wf: string;

	beforeEach(() => {
		forgetLineageCheck(); // a new process
		wf = `wf-lineage-fence-${++n}-${Date.now()}`;
		warnings = [];
		types = Object.fromEntries(Object.entries(ours).map(([name, type]) => [name, watched(type, warnings)]));
	});

	const run = (nodes: INode[], names: string[]): Promise<EngineRunResult> =>
		runWorkflow({ id: wf, nodes, connections: chain(...names) }, { credentials: fx.credentials, nodeTypes: types });
	const markFlow = (...ids: number[]) =>
		run([node('Orders', 'test.items', { items: orders(...ids) }), gate(), node('Call API', 'test.replace'), mark()], ['Orders', 'Gate', 'Call API', 'Mark Done']);
	const statuses = async (...ids: number[]) =>
		Promise.all(ids.map(async (id) => (await fx.ledger.get(`workflow:${wf}`, `o-${id}`)).map((r) => `${r.step || 'unit'}:${r.status}`)));

	test.each(Object.keys(changes))('%s: Mark Step Done records the right keys, says so once in the log and on every run', async (change) => {
		const restore = withChangedN8n(changes[change]);
		try {
			const first = await markFlow(1, 2, 3);
			const second = await markFlow(4, 5);
			for (const [r, ids] of [[first, [1, 2, 3]], [second, [4, 5]]] as const) {
				expect(r.error).toBeUndefined();
				expect(keysOf(r.items('Mark Done'))).toEqual(ids.map((id) => `o-${id}`));
				expect(await statuses(...ids)).toEqual(ids.map(() => ['unit:completed']));
				expect(r.runs('Mark Done')[0].hints).toEqual([
					expect.objectContaining({ type: 'warning', message: expect.stringContaining("through n8n's own $('Gate').item here") }),
				]);
			}
			// Said once in n8n's log for the process, naming the check.
			expectWarnedOnce(warnings, 'stopped tracing items to their Dedupe Gate through $getPairedItem');
		} finally {
			restore();
		}
	});

	test('Guarded Send takes the right keys too, and sends each order once', async () => {
		const restore = withChangedN8n(changes['$getPairedItem answers for the next item']);
		try {
			const send = node('Notify', 'n8n-nodes-idempotency.guardedSend', {
				channel: 'slack',
				slackChannel: '#orders',
				slackText: '=Order done ({{ $json.index }})',
				slackOptions: { apiUrl: slack.apiUrl },
			});
			const before = slack.messages.length;
			const r = await run([node('Orders', 'test.items', { items: orders(1, 2, 3) }), gate(), node('Call API', 'test.replace'), send], ['Orders', 'Gate', 'Call API', 'Notify']);
			expect(r.error).toBeUndefined();
			expect(keysOf(r.outputs('Notify')[0])).toEqual(['o-1', 'o-2', 'o-3']);
			expect(slack.messages.slice(before).map((m) => m.text)).toEqual(['Order done (0)', 'Order done (1)', 'Order done (2)']);
			expect(await statuses(1, 2, 3)).toEqual([1, 2, 3].map(() => ['unit:in_progress', 'Notify:completed']));
			expect(r.runs('Notify')[0].hints).toEqual([expect.objectContaining({ type: 'warning' })]);
			expect(warnings).toHaveLength(1);
		} finally {
			restore();
		}
	});

	test('an item n8n cannot trace either gets a per-item error that says what to set, never another item’s key', async () => {
		const restore = withChangedN8n(changes['$getPairedItem answers for the next item']);
		try {
			// Says the second item came from an input item that is not there: no way traces it.
			types['test.misPaired'] = {
				description: { ...ours['n8n-nodes-idempotency.markStepDone'].description, displayName: 'Mis-paired', name: 'test.misPaired', credentials: [], properties: [] },
				async execute(this: IExecuteFunctions) {
					return [[{ json: { n: 0 }, pairedItem: { item: 0 } }, { json: { n: 1 }, pairedItem: { item: 7 } }]];
				},
			};
			const r = await run(
				[node('Orders', 'test.items', { items: orders(1, 2) }), gate(), node('Mis-paired', 'test.misPaired'), { ...mark(), onError: 'continueRegularOutput' }],
				['Orders', 'Gate', 'Mis-paired', 'Mark Done'],
			);
			expect(r.error).toBeUndefined();
			const [traced, lost] = r.items('Mark Done');
			expect(keysOf([traced])).toEqual(['o-1']);
			expect(lost.json.idempotency).toBeUndefined();
			expect(lost.json.error).toContain('Item 1 cannot be traced back to "Gate"');
			expect(lost.json.details).toContain('Set "Key From" to "Expression"');
			expect(await statuses(1, 2)).toEqual([['unit:completed'], ['unit:in_progress']]);
		} finally {
			restore();
		}
	});

	test('n8n’s own $(\'Gate\').item finding no item (n8n 1.123’s vm engine does so for re-paired items) decides nothing: the walk’s keys stand, nothing is said', async () => {
		const restore = withChangedN8n((proxy) =>
			new Proxy(proxy, {
				get: (target, key, receiver) => {
					const real = Reflect.get(target, key, receiver);
					if (key !== '$') return real;
					return (name: string) => {
						const data = (real as (name: string) => DataProxy)(name);
						return name === 'Gate' ? new Proxy(data, { get: (t, k, r) => (k === 'item' ? undefined : Reflect.get(t, k, r)) }) : data;
					};
				},
			}),
		);
		try {
			const r = await markFlow(1, 2, 3);
			expect(r.error).toBeUndefined();
			expect(keysOf(r.items('Mark Done'))).toEqual(['o-1', 'o-2', 'o-3']);
			expect(r.runs('Mark Done')[0].hints ?? []).toEqual([]);
			expect(warnings).toEqual([]);
		} finally {
			restore();
		}
	});

	test('an unchanged n8n passes the check and says nothing', async () => {
		const r = await markFlow(1, 2, 3);
		expect(r.error).toBeUndefined();
		expect(keysOf(r.items('Mark Done'))).toEqual(['o-1', 'o-2', 'o-3']);
		expect(r.runs('Mark Done')[0].hints ?? []).toEqual([]);
		expect(warnings).toEqual([]);
	});
});
