import {
	NodeOperationError,
	type IExecuteFunctions,
	type INodeType,
} from 'n8n-workflow';
import { Expression } from 'n8n-workflow';

import { chain, evaluateParameter, evaluateParameterForItems, expressionEngine, node, runWorkflow } from '../support/engine';
import { testNodeDescription } from '../support/fixtureNodes';

const ITEMS = '[{"id":"a1","v":1},{"id":"b2","v":2},{"id":"c3","v":3}]';

/** Always throws; registered under a full community-node style type name. */
class BoomNode implements INodeType {
	description = testNodeDescription('boom', 'Boom', { description: 'Throws' });

	async execute(this: IExecuteFunctions): Promise<never> {
		throw new NodeOperationError(this.getNode(), 'Boom went the node');
	}
}

describe('engine harness (real WorkflowExecute)', () => {
	test('evaluates with the engine TEST_EXPRESSION_ENGINE asks for (legacy unless set)', async () => {
		await runWorkflow({ nodes: [node('Start', 'test.manualTrigger')], connections: {} });
		expect(Expression.getActiveImplementation()).toBe(process.env.TEST_EXPRESSION_ENGINE || 'legacy');
		expect(await expressionEngine()).toBe(Expression.getActiveImplementation());
	});

	test('trigger → items → set → replace: outputs, pairedItem and $() lineage through a replacing node', async () => {
		const result = await runWorkflow({
			nodes: [
				node('Start', 'test.manualTrigger'),
				node('Items', 'test.items', { items: ITEMS }),
				node('Set', 'test.set', { field: 'key', value: '={{ $json.id + "-x" }}' }),
				node('Replace', 'test.replace'),
				node('Back', 'test.set', { field: 'originalId', value: "={{ $('Items').item.json.id }}" }),
			],
			connections: chain('Start', 'Items', 'Set', 'Replace', 'Back'),
		});

		expect(result.error).toBeUndefined();
		expect(result.run.status).toBe('success');
		expect(result.run.finished).toBe(true);
		expect(result.executionOrder).toEqual(['Start', 'Items', 'Set', 'Replace', 'Back']);

		expect(result.outputs('Start')).toEqual([[{ json: {}, pairedItem: { item: 0 } }]]);
		expect(result.items('Items')).toEqual([
			{ json: { id: 'a1', v: 1 }, pairedItem: { item: 0 } },
			{ json: { id: 'b2', v: 2 }, pairedItem: { item: 0 } },
			{ json: { id: 'c3', v: 3 }, pairedItem: { item: 0 } },
		]);
		expect(result.items('Set')).toEqual([
			{ json: { id: 'a1', v: 1, key: 'a1-x' }, pairedItem: { item: 0 } },
			{ json: { id: 'b2', v: 2, key: 'b2-x' }, pairedItem: { item: 1 } },
			{ json: { id: 'c3', v: 3, key: 'c3-x' }, pairedItem: { item: 2 } },
		]);
		expect(result.items('Replace')).toEqual([
			{ json: { replaced: true, index: 0 }, pairedItem: { item: 0 } },
			{ json: { replaced: true, index: 1 }, pairedItem: { item: 1 } },
			{ json: { replaced: true, index: 2 }, pairedItem: { item: 2 } },
		]);
		// The original id is gone from $json but reachable through pairedItem lineage.
		expect(result.items('Back').map((item) => item.json)).toEqual([
			{ replaced: true, index: 0, originalId: 'a1' },
			{ replaced: true, index: 1, originalId: 'b2' },
			{ replaced: true, index: 2, originalId: 'c3' },
		]);
		expect(result.ran('Back')).toBe(true);
		expect(result.runs('Back')).toHaveLength(1);
		expect(result.outputs('Nowhere')).toEqual([]);
	});

	test('a node that throws ends the run; the error names the node and later nodes do not run', async () => {
		const result = await runWorkflow({
			nodes: [
				node('Start', 'test.manualTrigger'),
				node('Items', 'test.items', { items: ITEMS }),
				node('Set', 'test.set', { field: 'key', value: '={{ $json.id }}', failOn: 'b2' }),
				node('After', 'test.replace'),
			],
			connections: chain('Start', 'Items', 'Set', 'After'),
		});

		expect(result.run.status).toBe('error');
		expect(result.error).toBeDefined();
		expect(result.error?.message).toBe('Refusing value "b2"');
		expect((result.error as NodeOperationError).node?.name).toBe('Set');
		expect(result.run.data.resultData.lastNodeExecuted).toBe('Set');
		expect(result.nodeError('Set')?.message).toBe('Refusing value "b2"');
		expect(result.nodeError('Items')).toBeUndefined();
		expect(result.ran('After')).toBe(false);
		expect(result.executionOrder).toEqual(['Start', 'Items', 'Set']);
	});

	test("onError 'continueRegularOutput': the node's own continueOnFail path keeps the run going", async () => {
		const result = await runWorkflow({
			nodes: [
				node('Start', 'test.manualTrigger'),
				node('Items', 'test.items', { items: ITEMS }),
				node(
					'Set',
					'test.set',
					{ field: 'key', value: '={{ $json.id }}', failOn: 'b2' },
					{ onError: 'continueRegularOutput' },
				),
				node('After', 'test.set', { field: 'seen', value: '=yes' }),
			],
			connections: chain('Start', 'Items', 'Set', 'After'),
		});

		expect(result.error).toBeUndefined();
		expect(result.run.status).toBe('success');
		expect(result.items('Set').map((item) => item.json)).toEqual([
			{ id: 'a1', v: 1, key: 'a1' },
			{ error: 'Refusing value "b2"' },
			{ id: 'c3', v: 3, key: 'c3' },
		]);
		expect(result.items('After')).toHaveLength(3);
		expect(result.items('After')[1].json).toEqual({ error: 'Refusing value "b2"', seen: 'yes' });
	});

	test("onError 'continueRegularOutput' for a node that throws outright; full type names resolve", async () => {
		const nodeTypes = { 'n8n-nodes-idempotency.boom': new BoomNode() };
		const nodes = [
			node('Start', 'test.manualTrigger'),
			node('Items', 'test.items', { items: ITEMS }),
			node('Boom', 'n8n-nodes-idempotency.boom', {}, { onError: 'continueRegularOutput' }),
			node('After', 'test.replace'),
		];
		const result = await runWorkflow({ nodes, connections: chain('Start', 'Items', 'Boom', 'After') }, { nodeTypes });

		// n8n passes the node's input items through (paired one to one) and records the error on
		// the node.
		expect(result.error).toBeUndefined();
		expect(result.run.status).toBe('success');
		expect(result.items('Boom')).toEqual(
			result.items('Items').map((item, index) => ({ json: item.json, pairedItem: { item: index } })),
		);
		expect(result.nodeError('Boom')?.message).toBe('Boom went the node');
		expect(result.ran('After')).toBe(true);

		// Without the setting the same workflow fails at Boom.
		const strict = nodes.map((n) => (n.name === 'Boom' ? { ...n, onError: undefined } : n));
		const failed = await runWorkflow({ nodes: strict, connections: chain('Start', 'Items', 'Boom', 'After') }, { nodeTypes });
		expect((failed.error as NodeOperationError).node?.name).toBe('Boom');
		expect(failed.ran('After')).toBe(false);
	});

	test('the workflow JSON passed in is not changed', async () => {
		const nodes = [node('Start', 'test.manualTrigger'), node('Set', 'test.set', { value: '=x' })];
		const before = JSON.stringify(nodes);
		await runWorkflow({ nodes, connections: chain('Start', 'Set') });
		expect(JSON.stringify(nodes)).toBe(before);
	});

	test('a start node without a trigger, start items, execution and workflow ids', async () => {
		const result = await runWorkflow(
			{
				nodes: [
					node('Set', 'test.set', { field: 'ids', value: '={{ $execution.id + "/" + $workflow.id + "/" + $json.n }}' }),
				],
				connections: {},
			},
			{ startItems: [{ json: { n: 1 } }, { json: { n: 2 } }], executionId: 'exec-7', workflowId: 'wf-3' },
		);
		expect(result.error).toBeUndefined();
		expect(result.items('Set').map((item) => item.json.ids)).toEqual(['exec-7/wf-3/1', 'exec-7/wf-3/2']);
	});

	test('credentials are served by type, and filled into node JSON that lacks them', async () => {
		class NeedsCredentials implements INodeType {
			description = testNodeDescription('needsCredentials', 'Needs Credentials', { description: 'Reads its credentials', credentials: [{ name: 'someApi', required: true }] });

			async execute(this: IExecuteFunctions) {
				const credentials = await this.getCredentials('someApi');
				return [[{ json: { host: credentials.host } }]];
			}
		}
		const result = await runWorkflow(
			{
				nodes: [node('Start', 'test.manualTrigger'), node('Creds', 'n8n-nodes-idempotency.needsCredentials')],
				connections: chain('Start', 'Creds'),
			},
			{
				nodeTypes: { 'n8n-nodes-idempotency.needsCredentials': new NeedsCredentials() },
				credentials: { someApi: { host: 'db.internal' } },
			},
		);
		expect(result.error).toBeUndefined();
		expect(result.items('Creds')[0].json).toEqual({ host: 'db.internal' });
	});
});

describe('evaluateParameter (getNodeParameter through the real engine)', () => {
	test('simple expressions', async () => {
		const item = { json: { id: 'x1', 'order id': 'o-9', a: { b: 'deep' }, v: 7 } };
		const evaluate = (expression: string) => evaluateParameter({ value: expression }, item, 'value');
		await expect(evaluate('={{ $json.id }}')).resolves.toBe('x1');
		await expect(evaluate('={{ $json["order id"] }}')).resolves.toBe('o-9');
		await expect(evaluate('={{ $json.a.b }}')).resolves.toBe('deep');
		await expect(evaluate('={{ $json.id + "-" + $json.v }}')).resolves.toBe('x1-7');
		await expect(evaluate("={{ $('Source').item.json.id }}")).resolves.toBe('x1');
		await expect(evaluate('plain text')).resolves.toBe('plain text');
	});

	test('per item, with pairedItem lineage to the source', async () => {
		const outcomes = await evaluateParameterForItems(
			{ value: "={{ $('Source').item.json.id + ':' + $itemIndex }}" },
			[{ json: { id: 'p' } }, { json: { id: 'q' } }],
			'value',
		);
		expect(outcomes).toEqual([
			{ ok: true, value: 'p:0' },
			{ ok: true, value: 'q:1' },
		]);
	});

	// What `getNodeParameter` returns for a parameter of type 'string' holding `={{ $json.v }}`:
	// the evaluated value with its own type. Nothing is converted to a string.
	test.each([
		['a number', { v: 42 }, 42],
		['a missing field', {}, undefined],
		['null', { v: null }, null],
		['a boolean', { v: true }, true],
		['false', { v: false }, false],
		['zero', { v: 0 }, 0],
		['an empty string', { v: '' }, ''],
		['a nested object', { v: { a: { b: [1, 'two'] } } }, { a: { b: [1, 'two'] } }],
		['an array', { v: [1, 2] }, [1, 2]],
		['a string with spaces', { v: '  two  words ' }, '  two  words '],
	])('={{ $json.v }} for %s', async (_label, json, expected) => {
		const value = await evaluateParameter({ value: '={{ $json.v }}' }, { json }, 'value');
		expect(value).toEqual(expected);
		expect(typeof value).toBe(typeof expected);
	});

	test('a missing intermediate object gives undefined; bad syntax is an error', async () => {
		// The legacy evaluator swallows the TypeError of `undefined.b` and yields undefined.
		await expect(evaluateParameter({ p: '={{ $json.missing.b }}' }, { json: {} }, 'p')).resolves.toBeUndefined();
		const [outcome] = await evaluateParameterForItems({ p: '={{ $json. }}' }, [{ json: {} }], 'p');
		expect(outcome.ok).toBe(false);
		expect(!outcome.ok && outcome.error.message).toBe('invalid syntax');
		await expect(evaluateParameter({ p: '={{ $json. }}' }, { json: {} }, 'p')).rejects.toThrow('invalid syntax');
	});

	// Anything besides one `{{ }}` (text, even a single space, around it) makes the result a
	// string built with String(): objects become "[object Object]", arrays "1,x", null and
	// undefined "".
	test.each([
		['=id-{{ $json.v }}', { v: 42 }, 'id-42'],
		['=id-{{ $json.v }}', { v: { x: 1 } }, 'id-[object Object]'],
		['=id-{{ $json.v }}', { v: [1, 'x'] }, 'id-1,x'],
		['=id-{{ $json.v }}', { v: null }, 'id-'],
		['=id-{{ $json.v }}', {}, 'id-'],
		['={{ $json.v }} ', { v: 42 }, '42 '],
		['= {{ $json.v }}', { v: true }, ' true'],
	])('%s with %j gives %j', async (expression, json, expected) => {
		await expect(evaluateParameter({ p: expression }, { json }, 'p')).resolves.toBe(expected);
	});
});
