/**
 * The fence around n8n's execution-end hooks (lib/n8n/executionEnd.ts): the Dedupe Gate's "Mark
 * Keys Done: When the Execution Succeeds" and the lease keeper act when the execution ends through
 * `additionalData.hooks`, an n8n internal. A future n8n that no longer runs what was added there,
 * gives a node hooks of another execution, or renames the API must not leave keys held, or closed
 * at another execution's end: the process acts as on an n8n without hooks (the gate's documented
 * fallback), says so once in n8n's log, and puts a warning hint on every run. Each test plants the
 * change in the real n8n-core the engine runs, as the shortcut tests do (shortcutCheck.engine.test.ts).
 */
import { ExecutionLifecycleHooks } from 'n8n-core';
import type { INode, INodeExecutionData, INodeParameters } from 'n8n-workflow';

import { forgetExecutionEndCheck } from '../../lib/n8n/executionEnd';
import { DedupeGate } from '../../nodes/DedupeGate/DedupeGate.node';
import { MarkStepDone } from '../../nodes/MarkStepDone/MarkStepDone.node';
import { useNodeCreatedTable } from '../support/engineBackends';
import { expectWarnedOnce, watched, type Hooks } from '../support/changedN8n';
import { chain, node, runWorkflow } from '../support/engine';

const GATE = 'n8n-nodes-idempotency.dedupeGate';
const MARK = 'n8n-nodes-idempotency.markStepDone';
const { table, pool, credentials } = useNodeCreatedTable('endfence');

/** While in place, n8n runs no handler added for the end of an execution (as if it had renamed that hook). */
function endHookNotRun(): () => void {
	const original = Object.getOwnPropertyDescriptor(ExecutionLifecycleHooks.prototype, 'runHook')!;
	const real = original.value as (this: ExecutionLifecycleHooks, name: string, parameters: unknown[]) => Promise<void>;
	Object.defineProperty(ExecutionLifecycleHooks.prototype, 'runHook', {
		...original,
		value(this: ExecutionLifecycleHooks, name: string, parameters: unknown[]) {
			return name === 'workflowExecuteAfter' ? Promise.resolve() : real.call(this, name, parameters);
		},
	});
	return () => Object.defineProperty(ExecutionLifecycleHooks.prototype, 'runHook', original);
}

/** Changes of the hooks object a node is given (the engine's own run is left as it is). */
const givenHooks: Record<string, (hooks: Hooks) => object> = {
	'the hooks a node is given belong to another execution': (hooks) => new ExecutionLifecycleHooks(hooks.mode, 'another-execution', hooks.workflowData),
	'addHandler is renamed': (hooks) =>
		new Proxy(hooks, {
			get: (target, key) => (key === 'addHandler' ? undefined : Reflect.get(target, key)),
			has: (target, key) => key !== 'addHandler' && Reflect.has(target, key),
		}),
};

const facts = (item: INodeExecutionData) => item.json.idempotency as Record<string, unknown>;
const keysOf = (items: INodeExecutionData[]) => items.map((i) => facts(i).key);
let workflowCount = 0;

async function statuses(namespace: string): Promise<string[]> {
	const { rows } = await pool.query(`SELECT key, status FROM "${table}" WHERE namespace = $1 ORDER BY key`, [namespace]);
	return rows.map((r) => `${r.key}:${r.status}`);
}

/** Start → Events → Gate (every setting at its default) → Action [→ Mark Done], run again and again in one workflow. */
function runner(warnings: string[], change?: (hooks: Hooks) => object) {
	const workflowId = `wf-endfence-${++workflowCount}-${Date.now()}`;
	return {
		namespace: `workflow:${workflowId}`,
		run: (events: unknown[], options: { mark?: boolean; gate?: INodeParameters } = {}) => {
			const nodes: INode[] = [
				node('Start', 'test.manualTrigger'),
				node('Events', 'test.items', { items: JSON.stringify(events) }),
				node('Gate', GATE, options.gate ?? {}),
				node('Action', 'test.set', { field: 'sent', value: '={{ $json.id }}' }),
				...(options.mark ? [node('Mark Done', MARK, { resultFrom: 'none' })] : []),
			];
			return runWorkflow(
				{ nodes, connections: chain(...nodes.map((n) => n.name)) },
				{
					credentials: credentials as never,
					nodeTypes: { [GATE]: watched(new DedupeGate(), warnings, change), [MARK]: watched(new MarkStepDone(), warnings, change) },
					workflowId,
				},
			);
		},
	};
}

const fenceHint = expect.objectContaining({ type: 'warning', message: expect.stringContaining("failed the package's check of those hooks") });

describe('changed execution-end hooks: the gate works as on an n8n without them, never holding or closing keys by a hook that does not come', () => {
	beforeEach(forgetExecutionEndCheck); // a new process

	const cases: Array<[string, (() => () => void) | null, ((hooks: Hooks) => object) | undefined]> = [
		['n8n no longer runs the handlers added for the end of an execution', endHookNotRun, undefined],
		['the hooks a node is given belong to another execution', null, givenHooks['the hooks a node is given belong to another execution']],
	];

	test.each(cases)('%s: without a Mark Step Done, keys are marked done as they pass, and a repeat is a Duplicate', async (_change, plant, change) => {
		const restore = plant?.() ?? (() => undefined);
		try {
			const warnings: string[] = [];
			const { run, namespace } = runner(warnings, change);
			const first = await run([{ id: 'order-1' }, { id: 'order-2' }]);
			expect(first.error).toBeUndefined();
			expect(keysOf(first.outputs('Gate')[0])).toEqual(['order-1', 'order-2']);
			expect(await statuses(namespace)).toEqual(['order-1:completed', 'order-2:completed']);
			const second = await run([{ id: 'order-1' }, { id: 'order-2' }]);
			const [fresh, dup, busy] = second.outputs('Gate');
			expect(fresh).toEqual([]);
			expect(busy).toEqual([]);
			expect(keysOf(dup)).toEqual(['order-1', 'order-2']);
			for (const r of [first, second]) {
				expect(r.runs('Gate')[0].hints).toEqual(
					expect.arrayContaining([fenceHint, expect.objectContaining({ message: expect.stringContaining('keys are marked done as they pass') })]),
				);
			}
			expectWarnedOnce(warnings, "does not use n8n's execution-end hooks");
		} finally {
			restore();
		}
	});

	test('addHandler is renamed: with a Mark Step Done after the gate, the key is left to it, and the run says why', async () => {
		const warnings: string[] = [];
		const { run, namespace } = runner(warnings, givenHooks['addHandler is renamed']);
		const first = await run([{ id: 'order-1' }], { mark: true });
		expect(first.error).toBeUndefined();
		expect(facts(first.outputs('Gate')[0][0]).doneWhen).toBe('when a Mark Step Done (or Guarded Send) after the gate records it');
		expect(await statuses(namespace)).toEqual(['order-1:completed']);
		expect(first.runs('Gate')[0].hints).toEqual([fenceHint]);
		expect(warnings).toHaveLength(1);
		expect(warnings[0]).toContain('lack the addHandler and runHook');
	});

	test('an unchanged n8n passes the check and says nothing: keys are done when the execution succeeds', async () => {
		const warnings: string[] = [];
		const { run, namespace } = runner(warnings);
		const first = await run([{ id: 'order-1' }]);
		expect(facts(first.outputs('Gate')[0][0]).doneWhen).toBe('when this execution succeeds');
		expect(await statuses(namespace)).toEqual(['order-1:completed']);
		expect(first.runs('Gate')[0].hints ?? []).toEqual([]);
		expect(warnings).toEqual([]);
	});
});
