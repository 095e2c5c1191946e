/**
 * "Mark Keys Done: When the Execution Succeeds", the gate's default, in n8n-core's real engine
 * against the real PostgreSQL: Trigger → Dedupe Gate → action, every setting at its default, lets
 * each key through once (run 2 is Duplicate, not In Progress; a later run too), while a run that
 * failed lets the key through again at once. A Mark Step Done after the gate records the key
 * itself, with its result, and the gate leaves that record as it is (what follows the gate in
 * each combination the docs draw: dedupeGate.downstream.engine.test.ts).
 */
import type { INode, INodeExecutionData, INodeParameters } from 'n8n-workflow';

import { DedupeGate } from '../../nodes/DedupeGate/DedupeGate.node';
import { MarkStepDone } from '../../nodes/MarkStepDone/MarkStepDone.node';
import { useNodeCreatedTable } from '../support/engineBackends';
import { runWorkflow } from '../support/engine';

const GATE = 'n8n-nodes-idempotency.dedupeGate';
const MARK = 'n8n-nodes-idempotency.markStepDone';
const { table, pool, credentials } = useNodeCreatedTable('donewhen');
let workflowCount = 0;

const main = (node: string) => [{ node, type: 'main' as const, index: 0 }];

/** Trigger → Events → Gate → (New) Action [→ Mark Done]. */
function flow(events: unknown[], options: { gate?: INodeParameters; failOn?: string; mark?: 'enabled' | 'disabled' } = {}) {
	const nodes: INode[] = [
		{ id: '1', name: 'Start', type: 'test.manualTrigger', typeVersion: 1, position: [0, 0], parameters: {} },
		{ id: '2', name: 'Events', type: 'test.items', typeVersion: 1, position: [200, 0], parameters: { items: JSON.stringify(events) } },
		{ id: '3', name: 'Gate', type: GATE, typeVersion: 1, position: [400, 0], parameters: options.gate ?? {} },
		{
			id: '4',
			name: 'Action',
			type: 'test.set',
			typeVersion: 1,
			position: [600, 0],
			parameters: { field: 'sent', value: '={{ $json.id }}', failOn: options.failOn ?? '' },
		},
	];
	const connections: Record<string, { main: Array<ReturnType<typeof main>> }> = {
		Start: { main: [main('Events')] },
		Events: { main: [main('Gate')] },
		Gate: { main: [main('Action')] },
	};
	if (options.mark) {
		nodes.push({
			id: '5',
			name: 'Mark Done',
			type: MARK,
			typeVersion: 1,
			position: [800, 0],
			parameters: { resultFrom: 'json', resultJson: '{"receipt": "r-1"}' },
			disabled: options.mark === 'disabled',
		});
		connections.Action = { main: [main('Mark Done')] };
	}
	return { nodes, connections };
}

function runner(workflowId = `wf-done-${++workflowCount}`) {
	return (events: unknown[], options: Parameters<typeof flow>[1] = {}) =>
		runWorkflow(flow(events, options), {
			credentials: credentials as never,
			nodeTypes: { [GATE]: new DedupeGate(), [MARK]: new MarkStepDone() },
			workflowId,
		});
}

const facts = (item: INodeExecutionData) => item.json.idempotency as Record<string, unknown>;
/** The gate's ledger details, kept under `idempotency._ledger` for our own nodes. */
const details = (item: INodeExecutionData) => facts(item)._ledger as Record<string, unknown>;
const keysOf = (items: INodeExecutionData[]) => items.map((i) => facts(i).key);

async function rows(namespace: string): Promise<Array<{ key: string; status: string; result: unknown }>> {
	const { rows } = await pool.query(`SELECT key, status, result FROM "${table}" WHERE namespace = $1 ORDER BY key`, [namespace]);
	return rows;
}

describe('Dedupe Gate, "Mark Keys Done: When the Execution Succeeds" (the default)', () => {
	test('with every setting at its default: New, then Duplicate, then Duplicate again; the item says when the key counts as done', async () => {
		const run = runner('wf-defaults');
		const events = [{ id: 'order-1' }, { id: 'order-2' }];
		const first = await run(events);
		expect(first.error).toBeUndefined();
		const [fresh, dup, busy] = first.outputs('Gate');
		expect(keysOf(fresh)).toEqual(['order-1', 'order-2']);
		expect(dup).toEqual([]);
		expect(busy).toEqual([]);
		expect(facts(fresh[0])).toMatchObject({ outcome: 'new', status: 'in_progress', doneWhen: 'when this execution succeeds' });
		// The execution has ended: the keys are done, not held.
		expect(await rows('workflow:wf-defaults')).toEqual([
			{ key: 'order-1', status: 'completed', result: null },
			{ key: 'order-2', status: 'completed', result: null },
		]);
		for (const again of [await run(events), await run(events)]) {
			const [fresh2, dup2, busy2] = again.outputs('Gate');
			expect(fresh2).toEqual([]);
			expect(busy2).toEqual([]);
			expect(keysOf(dup2)).toEqual(['order-1', 'order-2']);
			expect(again.items('Action')).toEqual([]);
		}
	});

	test('an execution that fails after the gate frees its keys at once: the next run lets them through', async () => {
		const run = runner();
		const events = [{ id: 'ok-1' }, { id: 'boom' }];
		const failed = await run(events, { failOn: 'boom' });
		expect(failed.error?.message).toMatch(/Refusing value "boom"/);
		const namespace = details(failed.outputs('Gate')[0][0]).namespace as string;
		expect((await rows(namespace)).map((r) => r.status)).toEqual(['failed_retryable', 'failed_retryable']);
		const retry = await run(events);
		expect(retry.error).toBeUndefined();
		expect(keysOf(retry.outputs('Gate')[0])).toEqual(['ok-1', 'boom']);
		expect((await rows(namespace)).map((r) => r.status)).toEqual(['completed', 'completed']);
	});

	test('a Mark Step Done after the gate records the key with its result, which a repeat gets back', async () => {
		const run = runner();
		const first = await run([{ id: 'with-mark' }], { mark: 'enabled' });
		expect(first.error).toBeUndefined();
		const [item] = first.outputs('Gate')[0];
		// Done when the execution succeeds, as without it; what Mark Step Done recorded first stands.
		expect(facts(item).doneWhen).toBe('when this execution succeeds');
		const namespace = details(item).namespace as string;
		expect(await rows(namespace)).toEqual([{ key: 'with-mark', status: 'completed', result: { receipt: 'r-1' } }]);
		const again = await run([{ id: 'with-mark' }], { mark: 'enabled' });
		expect(facts(again.outputs('Gate')[1][0])).toMatchObject({ outcome: 'duplicate', result: { receipt: 'r-1' } });
	});

	test('a disabled Mark Step Done does not count: the gate marks the key done itself', async () => {
		const run = runner();
		const first = await run([{ id: 'mark-off' }], { mark: 'disabled' });
		expect(facts(first.outputs('Gate')[0][0]).doneWhen).toBe('when this execution succeeds');
		expect((await run([{ id: 'mark-off' }], { mark: 'disabled' })).outputs('Gate')[1]).toHaveLength(1);
	});

	test('"When Mark Step Done Records It" without one: the next run is In Progress, and the item says who holds the key and how soon it is free if that run stops', async () => {
		const run = runner('wf-held');
		const first = await run([{ id: 'held' }], { gate: { mode: 'lease' } });
		expect(facts(first.outputs('Gate')[0][0]).doneWhen).toBe('when a Mark Step Done (or Guarded Send) after the gate records it');
		const holder = details(first.outputs('Gate')[0][0]).leaseHolder as string;
		const second = await run([{ id: 'held' }], { gate: { mode: 'lease' } });
		const [busy] = second.outputs('Gate')[2];
		const executionId = holder.replace('execution:', '');
		expect(facts(busy).reason).toMatch(
			new RegExp(
				`^Let through to execution ${executionId} at \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d and not marked done yet\\. If that run stops, the key is free again within (30|29|28) seconds \\(by \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d, .+\\)\\.$`,
			),
		);
	});
});
