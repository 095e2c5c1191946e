/**
 * Issue 32: a NUL character in what a node stores (Mark Step Done's result, Guarded Send's
 * response, Prompt Cache's answer and prompt) failed the whole write on PostgreSQL with the
 * driver's "unsupported Unicode escape sequence", for every item of the batch. It is stored, and
 * a later read gives back exactly what was stored; the items next to it are not touched. Through
 * n8n-core's real engine, on the real PostgreSQL (the ledger contract checks every backend).
 */
import type { IDataObject, INode } from 'n8n-workflow';

import { PromptCache } from '../../nodes/PromptCache/PromptCache.node';
import { FAKE_LLM_TYPE, FakeLlmNode } from '../integration/fixtures/prompt-llm-node';
import { httpPost, nodeTypes as ours } from '../integration/fixtures/guarded-workflow';
import { postgresBackend, useEngineLedger, useServer } from '../support/engineBackends';
import { stripeLikeServer } from '../support/destinations';
import { chain, node, runWorkflow, type EngineRunResult } from '../support/engine';
import { promptCacheFlow, PROMPT_CACHE_TYPE } from './promptCacheFlow';

const MARK = 'n8n-nodes-idempotency.markStepDone';
const SEND = 'n8n-nodes-idempotency.guardedSend';
const nodeTypes = { ...ours, [PROMPT_CACHE_TYPE]: new PromptCache(), [FAKE_LLM_TYPE]: new FakeLlmNode() };
const DRIVER_TEXT = /unsupported Unicode escape|invalid byte sequence|\\u0000 cannot be converted/;

const fx = useEngineLedger(postgresBackend);
const api = useServer(() => stripeLikeServer());
let n = 0;
let ns: string;

beforeEach(() => {
	ns = `nul-${++n}-${Date.now()}`;
});

const run = (nodes: INode[], connections = chain(...nodes.map((x) => x.name))): Promise<EngineRunResult> =>
	runWorkflow({ nodes, connections }, { credentials: fx.credentials as never, nodeTypes, workflowId: 'wf-nul', mode: 'webhook' });

const noDriverText = (r: EngineRunResult) => expect(JSON.stringify(r.error ?? null)).not.toMatch(DRIVER_TEXT);
const facts = (json: IDataObject) => json.idempotency as IDataObject;
const storedResult = async (key: string, step: string) => (await fx.ledger.get(ns, key)).find((r) => r.step === step)?.result;

test('Mark Step Done: a result with NUL characters is recorded and read back exactly, next to a plain one', async () => {
	const events = [
		{ id: 'm1', note: 'before\u0000after', ['nul\u0000key']: ['\u0000'] },
		{ id: 'm2', note: 'plain' },
	];
	const flow = [
		node('Start', 'test.manualTrigger'),
		node('Events', 'test.items', { items: JSON.stringify(events) }),
		node('Mark Done', MARK, { keyFrom: 'expression', keyExpression: '={{ $json.id }}', step: 'invoice', status: 'completed', resultFrom: 'item', options: { namespace: ns } }),
	];
	const result = await run(flow);
	noDriverText(result);
	expect(result.error).toBeUndefined();
	expect(result.items('Mark Done').map((i) => [i.json.id, facts(i.json).status])).toEqual([
		['m1', 'completed'],
		['m2', 'completed'],
	]);
	expect(await storedResult('m1', 'invoice')).toEqual(events[0]);
	expect(await storedResult('m2', 'invoice')).toEqual(events[1]);
});

test('Guarded Send: a response with NUL characters is recorded; the repeat is Skipped and replays it exactly', async () => {
	const events = [
		{ id: 'g1', note: 'line one\u0000line two' },
		{ id: 'g2', note: 'plain' },
	];
	const flow = [
		node('Start', 'test.manualTrigger'),
		node('Events', 'test.items', { items: JSON.stringify(events) }),
		node('Send', SEND, {
			...httpPost(`${api.url}/v1/charges`),
			jsonBody: '={{ JSON.stringify({ note: $json.note }) }}',
			keyFrom: 'expression',
			keyExpression: '={{ $json.id }}',
			options: { namespace: ns },
		}),
	];
	const before = api.actions.length;
	const first = await run(flow);
	noDriverText(first);
	expect(first.error).toBeUndefined();
	const [sent, skipped] = first.outputs('Send');
	expect([sent.length, skipped.length]).toEqual([2, 0]);
	const stored = (await storedResult('g1', 'Send')) as IDataObject;
	expect(((stored.response as IDataObject).body as IDataObject).request).toEqual({ note: 'line one\u0000line two' });

	const again = await run(flow);
	expect(again.error).toBeUndefined();
	const [sentAgain, skippedAgain] = again.outputs('Send');
	expect([sentAgain.length, skippedAgain.length]).toEqual([0, 2]);
	expect(api.actions.length - before).toBe(2);
	expect(await storedResult('g1', 'Send')).toEqual(stored);
	expect(JSON.stringify(skippedAgain[0].json)).toContain('line one\\u0000line two');
});

test('Prompt Cache: an answer and a prompt with NUL characters are stored; the repeat is a Hit with the same answer', async () => {
	const prompts = [{ prompt: 'a prompt\u0000with a NUL' }, { prompt: 'a plain prompt' }];
	const flow = promptCacheFlow({ prompts, lookup: { options: { namespace: ns } }, llm: { shape: 'openai-full' } });
	const first = await runWorkflow(flow, { credentials: fx.credentials as never, nodeTypes, workflowId: 'wf-nul', mode: 'webhook' });
	noDriverText(first);
	expect(first.error).toBeUndefined();
	expect(first.items('Store').map((i) => facts(i.json).outcome)).toEqual(['stored', 'stored']);
	const answers = first.items('LLM').map((i) => i.json);
	expect(JSON.stringify(answers[0])).toContain('\\u0000');

	const again = await runWorkflow(flow, { credentials: fx.credentials as never, nodeTypes, workflowId: 'wf-nul', mode: 'webhook' });
	expect(again.error).toBeUndefined();
	const [hits, misses] = again.outputs('Lookup');
	expect([hits.length, misses.length]).toEqual([2, 0]);
	expect(hits.map((i) => facts(i.json).text)).toEqual(first.items('Store').map((i) => facts(i.json).text));
	const { idempotency: _facts, ...answer } = hits[0].json;
	void _facts;
	expect(answer).toEqual(answers[0]);
});
