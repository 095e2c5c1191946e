import type { IDataObject } from 'n8n-workflow';

import { PostgresLedger } from '../../lib/ledger/postgres/PostgresLedger';
import { promptHash } from '../../lib/ledger/promptHash';
import { CACHE_STEP } from '../../nodes/PromptCache/common';
import { PromptCache } from '../../nodes/PromptCache/PromptCache.node';
import { promptCacheStats } from '../../nodes/PromptCache/stats';
import { FAKE_LLM_TYPE, FakeLlmNode, localCalls, type Shape } from '../integration/fixtures/prompt-llm-node';
import { settingsFromUrl } from '../support/db';
import { useNodeCreatedTable } from '../support/engineBackends';
import { countingParameterReads, runWorkflow, type EngineRunResult } from '../support/engine';
import { promptCacheFlow, PROMPT_CACHE_TYPE as TYPE, type FlowOptions } from './promptCacheFlow';

const { table, pool, credentials } = useNodeCreatedTable('pc_engine');
const nodeTypes = { [TYPE]: new PromptCache(), [FAKE_LLM_TYPE]: new FakeLlmNode() };
const inspect = new PostgresLedger({ pool, table });

let workflowCounter = 0;
const freshWorkflowId = () => `wf-${Date.now()}-${++workflowCounter}`;

const run = (o: FlowOptions, workflowId: string, extra: { credentials?: typeof credentials } = {}) =>
	runWorkflow(promptCacheFlow(o), { credentials: extra.credentials ?? credentials, nodeTypes, workflowId });

const hits = (r: EngineRunResult) => r.outputs('Lookup')[0] ?? [];
const misses = (r: EngineRunResult) => r.outputs('Lookup')[1] ?? [];
const facts = (json: IDataObject) => json.idempotency as IDataObject;
const withoutFacts = (json: IDataObject) => {
	const { idempotency: _f, ...rest } = json;
	void _f;
	return rest;
};

describe('Prompt Cache through the real n8n engine', () => {
	test('settings are read once per execution: 300 prompts cost Lookup and Store no more parameter reads than 3', async () => {
		const { node: counting, reads } = countingParameterReads(new PromptCache());
		const readsFor = async (count: number) => {
			reads.clear();
			const prompts = Array.from({ length: count }, (_, i) => ({ prompt: `Read once, prompt ${i} of ${count}.` }));
			const r = await runWorkflow(promptCacheFlow({ prompts, store: { storeOptions: { ttl: 2, ttlUnit: 'hours' } } }), {
				credentials: credentials as never,
				nodeTypes: { ...nodeTypes, [TYPE]: counting },
				workflowId: freshWorkflowId(),
			});
			expect(r.error).toBeUndefined();
			expect(misses(r)).toHaveLength(count);
			expect(r.items('Store')).toHaveLength(count);
			return Object.fromEntries(reads);
		};
		const small = await readsFor(3);
		expect(Object.keys(small)).toEqual(expect.arrayContaining(['operation', 'model', 'prompt', 'systemPrompt', 'modelParameters']));
		expect(await readsFor(300)).toEqual(small);
	});

	test('the same prompt three times: one Miss, then two Hits with identical text; another temperature misses', async () => {
		const wf = freshWorkflowId();
		const o: FlowOptions = { prompts: [{ prompt: 'Name three primes.' }] };
		const calls = localCalls.length;

		const first = await run(o, wf);
		expect(first.error).toBeUndefined();
		expect(hits(first)).toHaveLength(0);
		expect(misses(first)).toHaveLength(1);
		const miss = facts(misses(first)[0].json);
		expect(miss).toMatchObject({ outcome: 'miss', computing: true, step: CACHE_STEP, namespace: `workflow:${wf}`, status: 'in_progress' });
		expect(miss.promptHash).toMatch(/^[0-9a-f]{64}$/);
		const answer = first.items('LLM')[0].json;
		const stored = first.items('Store')[0].json;
		expect(facts(stored)).toMatchObject({ outcome: 'stored', promptHash: miss.promptHash, status: 'completed' });
		expect(localCalls.length).toBe(calls + 1);

		const texts: string[] = [];
		for (const attempt of [2, 3]) {
			const again = await run(o, wf);
			expect(again.error).toBeUndefined();
			expect(misses(again)).toHaveLength(0);
			expect(hits(again)).toHaveLength(1);
			expect(again.ran('LLM')).toBe(false);
			const hit = hits(again)[0];
			// The Hit looks exactly like the AI node's output.
			expect(withoutFacts(hit.json)).toEqual(answer);
			expect(facts(hit.json)).toMatchObject({ outcome: 'hit', promptHash: miss.promptHash, text: (answer.message as IDataObject).content });
			expect(typeof facts(hit.json).ageSeconds).toBe('number');
			expect(hit.pairedItem).toEqual({ item: 0 });
			texts.push(facts(hit.json).text as string);
			void attempt;
		}
		expect(texts[0]).toBe(texts[1]);
		expect(texts[0]).toBe((answer.message as IDataObject).content);
		expect(localCalls.length).toBe(calls + 1);

		const warmer = await run({ ...o, lookup: { modelParameters: { temperature: 0.9 } } }, wf);
		expect(hits(warmer)).toHaveLength(0);
		expect(misses(warmer)).toHaveLength(1);
		expect(facts(misses(warmer)[0].json).promptHash).not.toBe(miss.promptHash);
		expect(localCalls.length).toBe(calls + 2);
	});

	test('a parameter that does not change the answer (user id via Other Parameters) still hits', async () => {
		const wf = freshWorkflowId();
		await run({ prompts: [{ prompt: 'Capital of Norway?' }] }, wf);
		const again = await run(
			{ prompts: [{ prompt: '  Capital of Norway?\r\n' }], lookup: { modelParameters: { temperature: 0.2, otherParameters: '{"user":"u-77","stream":false}' } } },
			wf,
		);
		expect(hits(again)).toHaveLength(1);
	});

	const shapes: Array<[Shape, (json: IDataObject) => string, number]> = [
		['openai-simple', (j) => (j.message as IDataObject).content as string, 0],
		['openai-full', (j) => ((j.choices as IDataObject[])[0].message as IDataObject).content as string, 30],
		['openai-responses', (j) => (((j.output as IDataObject[])[0].content as IDataObject[])[0].text as string), 0],
		['anthropic', (j) => (j.content as IDataObject[])[0].text as string, 0],
		['anthropic-full', (j) => (j.content as IDataObject[])[0].text as string, 52],
		['http', (j) => ((j.choices as IDataObject[])[0].message as IDataObject).content as string, 12],
	];
	test.each(shapes)('response shape %s: stored, replayed as is, text and tokens saved read from it', async (shape, textOf, tokens) => {
		const wf = freshWorkflowId();
		const o: FlowOptions = { prompts: [{ prompt: `Shape ${shape}` }], llm: { shape } };
		const first = await run(o, wf);
		const answer = first.items('LLM')[0].json;
		expect(facts(first.items('Store')[0].json)).toMatchObject({ outcome: 'stored', text: textOf(answer), tokens: tokens || null });
		const again = await run(o, wf);
		const hit = hits(again)[0].json;
		expect(withoutFacts(hit)).toEqual(answer);
		expect(facts(hit)).toMatchObject({ outcome: 'hit', text: textOf(answer), tokensSaved: tokens });
	});

	test('text fields, chat messages and an HTTP request body for the same request share one entry', async () => {
		const wf = freshWorkflowId();
		await run({ prompts: [{ prompt: 'Same request, three forms' }] }, wf);
		const asMessages = await run(
			{
				prompts: [{ messages: [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Same request, three forms' }] }],
				lookup: { promptSource: 'messages', messages: '={{ $json.messages }}', systemPrompt: '' },
			},
			wf,
		);
		expect(hits(asMessages)).toHaveLength(1);
		const asBody = await run(
			{
				prompts: [{ body: { model: 'gpt-4o-mini', temperature: 0.2, stream: false, user: 'u1', messages: [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Same request, three forms' }] } }],
				lookup: { promptSource: 'body', requestBody: '={{ $json.body }}' },
			},
			wf,
		);
		expect(hits(asBody)).toHaveLength(1);
		const messagesWithSystemField = await run(
			{
				prompts: [{ messages: [{ role: 'user', content: 'Same request, three forms' }] }],
				lookup: { promptSource: 'messages', messages: '={{ $json.messages }}', systemPrompt: 'You are terse.' },
			},
			wf,
		);
		expect(hits(messagesWithSystemField)).toHaveLength(1);
	});

	test('the request itself cannot hide in "Other Parameters (JSON)"', async () => {
		const r = await run({ prompts: [{ prompt: 'x' }], lookup: { modelParameters: { otherParameters: '{"system": "Be brief"}' } } }, freshWorkflowId());
		expect(r.nodeError('Lookup')?.message).toMatch(/cannot set "system"/);
		const broken = await run({ prompts: [{ prompt: 'x' }], lookup: { modelParameters: { otherParameters: '{"stop": [' } } }, freshWorkflowId());
		expect(broken.nodeError('Lookup')?.message).toMatch(/not valid JSON/);
	});

	test('the stored entry keeps the normalized prompt, unless Hash Only is on', async () => {
		const wf = freshWorkflowId();
		const plain = await run({ prompts: [{ prompt: 'Keep my text' }] }, wf);
		const hash = facts(misses(plain)[0].json).promptHash as string;
		expect(facts(misses(plain)[0].json).prompt).toMatchObject({ v: 1, model: 'gpt-4o-mini' });
		const [row] = (await inspect.get(`workflow:${wf}`, hash)).filter((r) => r.step === CACHE_STEP);
		expect(row.status).toBe('completed');
		expect(JSON.stringify(row.result)).toContain('Keep my text');
		expect((row.result as IDataObject).prompt).toMatchObject({ messages: [{ role: 'system' }, { role: 'user', content: 'Keep my text' }] });

		const secret = await run({ prompts: [{ prompt: 'My secret diagnosis' }], lookup: { options: { hashOnly: true } } }, wf);
		const missFacts = facts(misses(secret)[0].json);
		expect(missFacts.prompt).toBeUndefined();
		expect(missFacts.hashOnly).toBe(true);
		const [secretRow] = (await inspect.get(`workflow:${wf}`, missFacts.promptHash as string)).filter((r) => r.step === CACHE_STEP);
		expect(secretRow.status).toBe('completed');
		expect((secretRow.result as IDataObject).prompt).toBeUndefined();
		// The answer is kept (that is the cache); the prompt text is not.
		const { rows } = await pool.query(`SELECT result::text AS t FROM "${table}" WHERE key = $1`, [missFacts.promptHash]);
		expect(rows[0].t).not.toMatch(/"prompt":/);
	});

	test('force refresh asks the model again and replaces the stored answer', async () => {
		const wf = freshWorkflowId();
		const o: FlowOptions = { prompts: [{ prompt: 'Refresh me' }] };
		const first = await run(o, wf);
		const oldText = facts(first.items('Store')[0].json).text;
		const forced = await run({ ...o, lookup: { options: { forceRefresh: '={{ $json.refresh }}' } }, prompts: [{ prompt: 'Refresh me', refresh: true }] }, wf);
		expect(hits(forced)).toHaveLength(0);
		expect(facts(misses(forced)[0].json)).toMatchObject({ outcome: 'miss', computing: true, reason: 'Force refresh' });
		const newText = facts(forced.items('Store')[0].json).text;
		expect(newText).not.toBe(oldText);
		const after = await run(o, wf);
		expect(facts(hits(after)[0].json).text).toBe(newText);
	});

	test('an answer above the size limit fails the item with a clear error and is not stored', async () => {
		const wf = freshWorkflowId();
		const o: FlowOptions = { prompts: [{ prompt: 'x'.repeat(3000) }], store: { storeOptions: { maxResponseKb: 1 } } };
		const failed = await run(o, wf);
		expect(failed.nodeError('Store')?.message).toMatch(/The answer is 3\.\d KB, more than the 1 KB a cached answer may have/);
		expect(failed.nodeError('Store')?.description).toMatch(/Max Answer Size/);
		const hash = facts(misses(failed)[0].json).promptHash as string;
		const rows = (await inspect.get(`workflow:${wf}`, hash)).filter((r) => r.step === CACHE_STEP);
		expect(rows.map((r) => r.status)).toEqual(['in_progress']);

		const tolerant = await run({ ...o, prompts: [{ prompt: 'y'.repeat(3000) }], storeNode: { onError: 'continueRegularOutput' } }, wf);
		const out = tolerant.items('Store')[0];
		expect(out.json.error).toMatch(/more than the 1 KB/);
		expect(out.pairedItem).toEqual({ item: 0 });
	});

	test('an error from the AI node is never cached, and the reservation is freed at once', async () => {
		const wf = freshWorkflowId();
		const broken = await run({ prompts: [{ prompt: 'Rate limited' }], llm: { shape: 'error' } }, wf);
		expect(facts(broken.items('Store')[0].json)).toMatchObject({ outcome: 'not_stored' });
		expect(facts(broken.items('Store')[0].json).reason).toMatch(/error/);
		const retry = await run({ prompts: [{ prompt: 'Rate limited' }] }, wf);
		// Freed at once: the retry asks the model itself, neither after waiting out the 60 s "Wait Up
		// To" nor by taking over a reservation that lapsed (an outcome, not a stopwatch on a busy machine).
		expect(facts(misses(retry)[0].json)).toMatchObject({ computing: true });
		expect(String(facts(misses(retry)[0].json).reason ?? '')).not.toMatch(/Waited|gave up/);
		expect(facts(retry.items('Store')[0].json).outcome).toBe('stored');
	});

	test('Store with an explicit hash (a field or an expression)', async () => {
		const wf = freshWorkflowId();
		const first = await run(
			{
				prompts: [{ prompt: 'Explicit' }],
				store: { hashSource: 'field', promptHash: "={{ $('Lookup').item.json.idempotency.promptHash }}" },
			},
			wf,
		);
		expect(facts(first.items('Store')[0].json)).toMatchObject({ outcome: 'stored', namespace: `workflow:${wf}` });
		expect(hits(await run({ prompts: [{ prompt: 'Explicit' }] }, wf))).toHaveLength(1);

		const bad = await run({ prompts: [{ prompt: 'Explicit 2' }], store: { hashSource: 'field', promptHash: 'not-a-hash' } }, wf);
		expect(bad.nodeError('Store')?.message).toMatch(/"not-a-hash" is not a prompt hash/);
	});

	test('repeats of a prompt inside one batch share the first one\'s fate', async () => {
		const wf = freshWorkflowId();
		const batch = [{ prompt: 'dup' }, { prompt: 'other' }, { prompt: ' dup ' }];
		const first = await run({ prompts: batch }, wf);
		expect(misses(first).map((i) => facts(i.json).computing)).toEqual([true, true, true]);
		expect(first.items('Store').map((i) => facts(i.json).outcome)).toEqual(['stored', 'stored', 'stored']);
		const again = await run({ prompts: batch }, wf);
		expect(hits(again).map((i) => i.pairedItem)).toEqual([{ item: 0 }, { item: 1 }, { item: 2 }]);
		expect(facts(hits(again)[0].json).text).toBe(facts(hits(again)[2].json).text);
	});

	test('bad items get a clear per-item error; with "continue" they leave on Hit, never reaching the model', async () => {
		const wf = freshWorkflowId();
		const o: FlowOptions = { prompts: [{ prompt: 'fine' }, { prompt: '   ' }, { nothing: true }] };
		const strict = await run(o, wf);
		expect(strict.nodeError('Lookup')?.message).toMatch(/The prompt is empty/);
		expect(strict.ran('LLM')).toBe(false);

		const lenient = await run({ ...o, lookupNode: { onError: 'continueRegularOutput' } }, wf);
		expect(misses(lenient)).toHaveLength(1);
		expect(hits(lenient).map((i) => [i.pairedItem, i.json.error])).toEqual([
			[{ item: 1 }, 'The prompt is empty'],
			[{ item: 2 }, 'The prompt is empty'],
		]);
	});

	test('fails closed when the ledger is down; "Go to Miss if the Ledger Is Down" lets answers through', async () => {
		const wf = freshWorkflowId();
		const down = { idempotencyPostgresApi: { ...settingsFromUrl(table), port: 1 } };
		const closed = await run({ prompts: [{ prompt: 'down' }] }, wf, { credentials: down });
		expect(closed.nodeError('Lookup')?.message).toMatch(/ledger is unavailable/i);
		expect(closed.ran('LLM')).toBe(false);

		const open = await run(
			{ prompts: [{ prompt: 'down' }], lookup: { options: { failOpen: true } }, storeNode: { onError: 'continueRegularOutput' } },
			wf,
			{ credentials: down },
		);
		expect(facts(misses(open)[0].json)).toMatchObject({ outcome: 'unverified' });
		expect(open.ran('LLM')).toBe(true);
		expect(open.items('Store')[0].json.error).toMatch(/unavailable/i);
	});
});

describe('single flight inside the engine', () => {
	const hashOf = (prompt: string) =>
		promptHash({ model: 'gpt-4o-mini', system: 'You are terse.', prompt, parameters: { temperature: 0.2 } }).hash;

	test('while another run holds the prompt: "Go to Miss" does not wait; "Wait" times out to Miss', async () => {
		const wf = freshWorkflowId();
		const ns = `workflow:${wf}`;
		await inspect.claim([{ namespace: ns, key: hashOf('busy'), step: CACHE_STEP, fingerprint: null }], { mode: 'lease', holder: 'other-run', leaseMs: 60_000, ttlMs: 60_000 });
		const noWait = await run({ prompts: [{ prompt: 'busy' }], lookup: { options: { whileComputing: 'miss' } } }, wf);
		expect(facts(misses(noWait)[0].json)).toMatchObject({ computing: false, leaseHolder: 'other-run' });
		// Its answer is not written over the reservation of the run that is asking the model.
		expect(facts(noWait.items('Store')[0].json)).toMatchObject({ outcome: 'not_stored' });

		const started = Date.now();
		const waited = await run({ prompts: [{ prompt: 'busy' }], lookup: { options: { waitTimeout: 1, waitTimeoutUnit: 'seconds' } } }, wf);
		expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
		expect(facts(misses(waited)[0].json)).toMatchObject({ computing: false });
		expect(facts(misses(waited)[0].json).reason).toMatch(/Waited 1 s/);
	});

	test('a waiting run gets the answer the other run stores', async () => {
		const wf = freshWorkflowId();
		const ns = `workflow:${wf}`;
		const key = hashOf('slow');
		await inspect.claim([{ namespace: ns, key, step: CACHE_STEP, fingerprint: null }], { mode: 'lease', holder: 'other-run', leaseMs: 60_000, ttlMs: 60_000 });
		setTimeout(() => {
			void inspect.record(
				[{ namespace: ns, key, step: CACHE_STEP, status: 'completed', result: { v: 1, response: { content: [{ type: 'text', text: 'from the other run' }] }, usage: null, tokens: null, model: null, storedAt: new Date().toISOString() } }],
				{ ttlMs: 60_000, holder: 'other-run' },
			);
		}, 1500);
		const waited = await run({ prompts: [{ prompt: 'slow' }] }, wf);
		expect(hits(waited)).toHaveLength(1);
		expect(facts(hits(waited)[0].json)).toMatchObject({ outcome: 'hit', text: 'from the other run' });
		expect(facts(hits(waited)[0].json).waitedMs).toBeGreaterThan(0);
		expect(waited.ran('LLM')).toBe(false);
	});

	test('when the other run gives up (its reservation lapses), one waiter takes the prompt over', async () => {
		const wf = freshWorkflowId();
		const ns = `workflow:${wf}`;
		await inspect.claim([{ namespace: ns, key: hashOf('abandoned'), step: CACHE_STEP, fingerprint: null }], { mode: 'lease', holder: 'dead-run', leaseMs: 500, ttlMs: 60_000 });
		const took = await run({ prompts: [{ prompt: 'abandoned' }] }, wf);
		expect(facts(misses(took)[0].json)).toMatchObject({ computing: true });
		expect(facts(misses(took)[0].json).reason).toMatch(/gave up/);
		expect(facts(took.items('Store')[0].json).outcome).toBe('stored');
	});
});

describe('single flight never leaves two runs waiting on each other', () => {
	const hashOf = (prompt: string) =>
		promptHash({ model: 'gpt-4o-mini', system: 'You are terse.', prompt, parameters: { temperature: 0.2 } }).hash;

	test('two runs each holding the prompt the other wants: the later reservation does not wait, so neither stalls', async () => {
		const wf = freshWorkflowId();
		const ns = `workflow:${wf}`;
		const reserve = (prompt: string, execution: string) =>
			inspect.claim([{ namespace: ns, key: hashOf(prompt), step: CACHE_STEP, fingerprint: null }], {
				mode: 'lease',
				holder: `execution:${execution}`,
				leaseMs: 60_000,
				ttlMs: 60_000,
			});
		// X reserved "mine-x" first (earlier, e.g. an earlier Lookup in the same execution), then Y "mine-y".
		await reserve('mine-x', `x-${wf}`);
		await new Promise((r) => setTimeout(r, 20));
		await reserve('mine-y', `y-${wf}`);
		const lookup = { options: { waitTimeout: 20, waitTimeoutUnit: 'seconds' } };
		const [x, y] = await Promise.all([
			runWorkflow(promptCacheFlow({ prompts: [{ prompt: 'mine-x' }, { prompt: 'mine-y' }], lookup }), { credentials, nodeTypes, workflowId: wf, executionId: `x-${wf}` }),
			runWorkflow(promptCacheFlow({ prompts: [{ prompt: 'mine-y' }, { prompt: 'mine-x' }], lookup }), { credentials, nodeTypes, workflowId: wf, executionId: `y-${wf}` }),
		]);
		// Neither stalled: no item waited out the 20 s (what a stall would end in), whatever the machine's speed.
		for (const item of [...misses(x), ...misses(y)]) expect(String(facts(item.json).reason ?? '')).not.toMatch(/Waited/);
		// X holds the older reservation, so it does not wait for Y's newer one: it asks the model.
		const xMisses = misses(x).map((i) => [i.json.prompt, facts(i.json).computing]);
		expect(xMisses).toEqual([
			['mine-x', true],
			['mine-y', false],
		]);
		expect(facts(misses(x)[1].json).reason).toMatch(/did not wait/);
		// Y may wait for X's older reservation (if X has not stored yet), and gets X's answer.
		expect(misses(y).map((i) => [i.json.prompt, facts(i.json).computing])).toEqual([['mine-y', true]]);
		expect(hits(y).map((i) => facts(i.json).text)).toEqual([facts(x.items('Store')[0].json).text]);
	});
});

describe('stats', () => {
	test('Get Stats counts hits, misses and the tokens the hits saved, per namespace', async () => {
		const shared = { scope: 'shared', namespace: `stats-${Date.now()}` };
		const wf = freshWorkflowId();
		const o: FlowOptions = { prompts: [{ prompt: 's1' }, { prompt: 's2' }], lookup: { options: { namespace: shared.namespace } }, llm: { shape: 'openai-full' } };
		await run(o, wf); // 2 misses
		await run(o, wf); // 2 hits, 30 tokens each
		await run({ ...o, prompts: [{ prompt: 's1' }, { prompt: 's3' }] }, wf); // 1 hit, 1 miss
		const stats = await runWorkflow(
			{
				nodes: [
					{ id: 't', name: 'Trigger', type: 'test.manualTrigger', typeVersion: 1, position: [0, 0], parameters: {} },
					{ id: 's', name: 'Stats', type: TYPE, typeVersion: 1, position: [200, 0], parameters: { operation: 'stats', ...shared } },
				],
				connections: { Trigger: { main: [[{ node: 'Stats', type: 'main', index: 0 }]] } },
			},
			{ credentials, nodeTypes },
		);
		expect(stats.error).toBeUndefined();
		expect(stats.items('Stats')[0].json).toMatchObject({ namespace: shared.namespace, hits: 3, misses: 3, lookups: 6, hitRate: 0.5, tokensSaved: 90, windowDays: 30 });
		// Three runs, one counter row: each run added to today's counts, no row per event.
		const daily = await pool.query(`SELECT counts FROM "public"."${table}_daily" WHERE namespace = $1`, [shared.namespace]);
		expect(daily.rows).toHaveLength(1);
		expect(daily.rows[0].counts).toMatchObject({ lookups: 6, hits: 3, misses: 3, tokensSaved: 90 });
	});

	test('concurrent runs never lose each other\'s counts', async () => {
		const shared = { scope: 'shared', namespace: `stats-concurrent-${Date.now()}` };
		const runs = Array.from({ length: 12 }, (_, r) =>
			run({ prompts: [0, 1, 2, 3, 4].map((p) => ({ prompt: `c${(r + p) % 7}` })), lookup: { options: { namespace: shared.namespace } }, llm: { shape: 'http' } }, freshWorkflowId()),
		);
		const done = await Promise.all(runs);
		const seenHits = done.reduce((n, r) => n + hits(r).length, 0);
		const seenMisses = done.reduce((n, r) => n + misses(r).length, 0);
		expect(seenHits + seenMisses).toBe(60);
		const stats = await promptCacheStats(inspect, shared.namespace);
		expect(stats).toMatchObject({ hits: seenHits, misses: seenMisses, tokensSaved: seenHits * 12 });
		// Seven distinct prompts: each was reserved (and stored) by exactly one run.
		const all = done.flatMap((r) => misses(r));
		const computing = all.filter((i) => facts(i.json).computing === true).length;
		const others = all.filter((i) => facts(i.json).computing !== true).map((i) => facts(i.json).reason as string);
		console.log(`12 concurrent runs x 5 prompts (7 distinct): ${seenHits} hits, ${seenMisses} misses, ${computing} of them reserved the prompt`);
		expect(computing).toBe(7);
		// A run that already holds prompts does not wait for a reservation made after its own (two
		// such runs could wait on each other). Under load a concurrent claim can land just after,
		// and that item goes to Miss unreserved. Nothing else may make an extra Miss.
		for (const reason of others) expect(reason).toMatch(/did not wait/);
	});
});
