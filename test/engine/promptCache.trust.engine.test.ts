/**
 * Prompt Cache features that let people trust and justify the cache, through the real n8n engine,
 * on the real PostgreSQL and the real Redis ledger each:
 * - the key receipt on every Lookup item, and a miss for a change of only tools, tool choice,
 *   response format or system prompt;
 * - shadow mode: every item goes to Miss (the model is always asked), the would-have-hit rate and
 *   how often the fresh answer differed are counted;
 * - savings: tokens and money the hits did not spend again, per namespace and per day;
 * - Skip the Cache and Force Refresh per item, by expression.
 */
import type { IDataObject } from 'n8n-workflow';

import { closeAllPostgresLedgers } from '../../lib/ledger/postgres/connect';
import { PostgresLedger } from '../../lib/ledger/postgres/PostgresLedger';
import { closeAllRedisLedgers } from '../../lib/ledger/redis/connect';
import type { Ledger } from '../../lib/ledger/types';
import { PromptCache } from '../../nodes/PromptCache/PromptCache.node';
import { promptCacheStats } from '../../nodes/PromptCache/stats';
import { FAKE_LLM_TYPE, FakeLlmNode, localCalls } from '../integration/fixtures/prompt-llm-node';
import { dropLedgerTables, newPool, settingsFromUrl, uniqueTable } from '../support/db';
import { runWorkflow, type EngineRunResult } from '../support/engine';
import { promptCacheFlow, PROMPT_CACHE_TYPE as TYPE, type FlowOptions } from './promptCacheFlow';
import { deletePrefix, describeIfRedis, freshRedisLedger, newRedisClient, suiteRedisCredential, uniquePrefix } from '../support/redis';

const nodeTypes = { [TYPE]: new PromptCache(), [FAKE_LLM_TYPE]: new FakeLlmNode() };

const hits = (r: EngineRunResult) => r.outputs('Lookup')[0] ?? [];
const misses = (r: EngineRunResult) => r.outputs('Lookup')[1] ?? [];
const facts = (json: IDataObject) => json.idempotency as IDataObject;
let counter = 0;
const unique = (what: string) => `${what}-${Date.now()}-${++counter}`;

interface Backend {
	name: 'postgres' | 'redis';
	credentials: Record<string, unknown>;
	/** A ledger on the same storage, to read what the nodes wrote. */
	inspect: () => Ledger;
}

function featureSuite(backend: () => Backend) {
	let b: Backend;
	beforeAll(() => {
		b = backend();
	});
	const run = async (o: FlowOptions, namespace: string) => {
		const lookup = {
			systemPrompt: '={{ $json.system ?? "You are terse." }}',
			modelParameters: { temperature: 0 },
			...o.lookup,
			options: { namespace, ...(o.lookup?.options as IDataObject) },
		};
		const r = await runWorkflow(promptCacheFlow({ ...o, backend: b.name, lookup, llm: { shape: 'openai-full', ...o.llm } }), {
			credentials: b.credentials as never,
			nodeTypes,
			workflowId: 'wf-trust',
		});
		expect(r.error).toBeUndefined();
		return r;
	};
	const stats = (namespace: string) => promptCacheStats(b.inspect(), namespace);

	test('key receipt: every Hit and Miss carries what went into its key; a change of only tools (a tool description too), tool choice, response format or system prompt is a Miss, and its receipt line shows it', async () => {
		const ns = unique('receipt');
		const parameters = {
			temperature: 0,
			tools: '[{"type":"function","function":{"name":"lookup_order","parameters":{"type":"object"}}}]',
			responseFormat: 'json_object',
			otherParameters: '{"tool_choice":"auto","user":"u-1"}',
		};
		const base: FlowOptions = { prompts: [{ prompt: 'Where is order 7?' }], lookup: { modelParameters: parameters, options: { ignoreParameters: 'seed' } } };
		const first = await run(base, ns);
		expect(misses(first)).toHaveLength(1);
		expect(facts(misses(first)[0].json).keyReceipt).toEqual([
			'key version 1: SHA-256 of the normalized request',
			'model: gpt-4o-mini',
			expect.stringMatching(/^system prompt: included #[0-9a-f]{8}$/),
			expect.stringMatching(/^messages: 1 \(user\) #[0-9a-f]{8}$/),
			'temperature: 0',
			expect.stringMatching(/^tools: included \(1: lookup_order\) #[0-9a-f]{8}$/),
			expect.stringMatching(/^tool choice: included \("auto"\) #[0-9a-f]{8}$/),
			expect.stringMatching(/^response format: included \(json_object\) #[0-9a-f]{8}$/),
			'ignored, your choice: seed',
			'left out, never changes the answer: user',
			'normalized: text trimmed, line endings as \\n, a text-only content list as its text',
		]);
		// What Store wrote shows the receipt too.
		expect(facts(first.items('Store')[0].json).keyReceipt).toEqual(facts(misses(first)[0].json).keyReceipt);
		const again = await run(base, ns);
		expect(hits(again)).toHaveLength(1);
		expect(facts(hits(again)[0].json).keyReceipt).toEqual(facts(misses(first)[0].json).keyReceipt);

		const changes: Array<[string, FlowOptions]> = [
			['tools', { ...base, lookup: { ...base.lookup, modelParameters: { ...parameters, tools: '[{"type":"function","function":{"name":"cancel_order"}}]' } } }],
			['tool description', { ...base, lookup: { ...base.lookup, modelParameters: { ...parameters, tools: '[{"type":"function","function":{"name":"lookup_order","description":"Finds an order","parameters":{"type":"object"}}}]' } } }],
			['tool choice', { ...base, lookup: { ...base.lookup, modelParameters: { ...parameters, otherParameters: '{"tool_choice":"required","user":"u-1"}' } } }],
			['response format', { ...base, lookup: { ...base.lookup, modelParameters: { ...parameters, responseFormat: 'text' } } }],
			['system prompt', { ...base, prompts: [{ prompt: 'Where is order 7?', system: 'You are verbose.' }] }],
		];
		const receipt = facts(misses(first)[0].json).keyReceipt as string[];
		for (const [what, changed] of changes) {
			const r = await run(changed, ns);
			expect([what, misses(r).length, hits(r).length]).toEqual([what, 1, 0]);
			// The receipt shows which part changed, even where its summary reads the same (a tool's
			// description, the wording of the system prompt): that part's line is new.
			const newLines = (facts(misses(r)[0].json).keyReceipt as string[]).filter((line) => !receipt.includes(line));
			const label = what === 'tool description' ? 'tools' : what;
			expect([what, newLines.some((line) => line.startsWith(`${label}: `))]).toEqual([what, true]);
		}
		// Only a field that never changes the answer (user) or that the user chose to ignore (seed): a Hit.
		const same = await run({ ...base, lookup: { ...base.lookup, modelParameters: { ...parameters, seed: 9, otherParameters: '{"tool_choice":"auto","user":"u-2"}' } } }, ns);
		expect(hits(same)).toHaveLength(1);
	});

	test('shadow mode: nothing is answered from the cache, the model is asked for every item, the would-have-hit rate and differing answers are counted', async () => {
		const ns = unique('shadow');
		const calls = localCalls.length;
		const shadow = { options: { shadowMode: true } };
		// 6 distinct prompts, then 4 of them again: 10 lookups, 4 would have hit.
		const first = await run({ prompts: [0, 1, 2, 3, 4, 5].map((p) => ({ prompt: `s${p}` })), lookup: shadow }, ns);
		const second = await run({ prompts: [0, 1, 2, 3].map((p) => ({ prompt: `s${p}` })), lookup: shadow }, ns);
		expect(hits(first).length + hits(second).length).toBe(0);
		expect(localCalls.length - calls).toBe(10);

		expect(misses(first).map((i) => facts(i.json).shadow)).toEqual(Array(6).fill({ wouldHit: false }));
		expect(misses(second).map((i) => (facts(i.json).shadow as IDataObject).wouldHit)).toEqual([true, true, true, true]);
		// The fake model numbers its answers, so every fresh answer differs; the cached one is kept.
		expect(second.items('Store').map((i) => facts(i.json).shadow)).toEqual(Array(4).fill({ sameAsCached: false }));
		expect(second.items('Store').map((i) => facts(i.json).outcome)).toEqual(Array(4).fill('not_stored'));
		// A deterministic model: a fresh answer that says the same as the cached one.
		await run({ prompts: [{ prompt: 's6' }], lookup: shadow, llm: { numbered: false } }, ns);
		const same = await run({ prompts: [{ prompt: 's6' }], lookup: shadow, llm: { numbered: false } }, ns);
		expect(facts(same.items('Store')[0].json).shadow).toEqual({ sameAsCached: true });

		const s = await stats(ns);
		expect(s).toMatchObject({ lookups: 12, hits: 0, misses: 12 });
		expect(s.shadow).toEqual({ lookups: 12, wouldHit: 5, wouldHitRate: 0.4167, compared: 5, differed: 4, differedRate: 0.8 });
		// Switching shadow mode off: the cache has the answers shadow mode stored.
		const normal = await run({ prompts: [{ prompt: 's0' }, { prompt: 's6' }] }, ns);
		expect(hits(normal)).toHaveLength(2);
	});

	test('savings: each Hit adds the tokens its stored answer used and, with prices set, the money; stats per namespace and per day', async () => {
		const ns = unique('savings');
		const prices = { options: { priceInputPer1k: 0.5, priceOutputPer1k: 1.5 } };
		await run({ prompts: [{ prompt: 'v1' }], lookup: prices, llm: { shape: 'openai-full' } }, ns); // 21 in, 9 out
		await run({ prompts: [{ prompt: 'v2' }], lookup: prices, llm: { shape: 'anthropic-full' } }, ns); // 40 in, 12 out
		await run({ prompts: [{ prompt: 'v3' }], lookup: prices, llm: { shape: 'openai-simple' } }, ns); // no usage
		const again = await run({ prompts: [{ prompt: 'v1' }, { prompt: 'v2' }, { prompt: 'v3' }], lookup: prices }, ns);
		expect(hits(again).map((i) => {
			const f = facts(i.json);
			return [f.tokensSaved, f.inputTokensSaved, f.outputTokensSaved, f.moneySaved];
		})).toEqual([
			[30, 21, 9, (21 * 0.5 + 9 * 1.5) / 1000],
			[52, 40, 12, (40 * 0.5 + 12 * 1.5) / 1000],
			[0, null, null, null],
		]);
		// Without prices: tokens only.
		const noPrices = await run({ prompts: [{ prompt: 'v1' }] }, ns);
		expect(facts(hits(noPrices)[0].json)).toMatchObject({ tokensSaved: 30, moneySaved: null });

		const s = await stats(ns);
		expect(s).toMatchObject({ lookups: 7, hits: 4, misses: 3, tokensSaved: 112, inputTokensSaved: 82, outputTokensSaved: 30, moneySaved: 0.062 });
		expect(s.days).toHaveLength(1);
		expect(s.days[0]).toMatchObject({ lookups: 7, hits: 4, tokensSaved: 112, moneySaved: 0.062 });
		expect(s.days[0].day).toMatch(/^\d{4}-\d{2}-\d{2}$/);
		expect(s.since).toBe(s.days[0].day);
	});

	test('Skip the Cache and Force Refresh per item, by expression', async () => {
		const ns = unique('bypass');
		const lookup = { options: { skipCache: '={{ $json.noCache === true }}', forceRefresh: '={{ $json.refresh === true }}' } };
		const calls = localCalls.length;
		const first = await run({ prompts: [{ prompt: 'b1', noCache: true }, { prompt: 'b2' }], lookup }, ns);
		expect(misses(first).map((i) => [i.json.prompt, facts(i.json).bypassed ?? false])).toEqual([['b1', true], ['b2', false]]);
		expect(first.items('Store').map((i) => facts(i.json).outcome)).toEqual(['not_stored', 'stored']);
		expect(facts(first.items('Store')[0].json).reason).toMatch(/Skip the Cache/);
		// Nothing was written for b1: no cache entry, no reservation.
		const b1Hash = facts(misses(first)[0].json).promptHash as string;
		expect(await b.inspect().get(ns, b1Hash)).toEqual([]);
		// So a later lookup without the flag misses (and stores).
		const second = await run({ prompts: [{ prompt: 'b1' }, { prompt: 'b2' }], lookup }, ns);
		expect(misses(second).map((i) => i.json.prompt)).toEqual(['b1']);
		expect(hits(second)).toHaveLength(1);
		const oldText = facts(hits(second)[0].json).text;
		// Refresh b2: the model answers again and its answer replaces the stored one.
		const refreshed = await run({ prompts: [{ prompt: 'b2', refresh: true }], lookup }, ns);
		expect(misses(refreshed).map((i) => facts(i.json).reason)).toEqual(['Force refresh']);
		expect(facts(refreshed.items('Store')[0].json).outcome).toBe('stored');
		const after = await run({ prompts: [{ prompt: 'b2' }], lookup }, ns);
		expect(facts(hits(after)[0].json).text).not.toBe(oldText);
		expect(facts(hits(after)[0].json).text).toBe(facts(refreshed.items('Store')[0].json).text);
		expect(localCalls.length - calls).toBe(4);
		const s = await stats(ns);
		expect(s).toMatchObject({ lookups: 6, bypassed: 1, refreshed: 1, hits: 2, misses: 4 });
	});
}

describe('Prompt Cache trust features on PostgreSQL (engine)', () => {
	const table = uniqueTable('pc_trust');
	const pool = newPool(2);
	const ledger = new PostgresLedger({ pool, table });
	afterAll(async () => {
		await closeAllPostgresLedgers();
		await dropLedgerTables(pool, table);
		await pool.end();
	});
	featureSuite(() => ({ name: 'postgres', credentials: { idempotencyPostgresApi: settingsFromUrl(table) }, inspect: () => ledger }));
});

describeIfRedis('Prompt Cache trust features on Redis (engine)')('Prompt Cache trust features on Redis (engine)', () => {
	const prefix = uniquePrefix('pctrust');
	let fx: Awaited<ReturnType<typeof freshRedisLedger>> | undefined;
	beforeAll(async () => {
		fx = await freshRedisLedger(prefix);
	});
	afterAll(async () => {
		await fx?.dispose();
		await closeAllRedisLedgers();
		const client = newRedisClient();
		await deletePrefix(client, prefix);
		client.disconnect();
	});
	featureSuite(() => ({
		name: 'redis',
		credentials: {
			idempotencyRedisApi: suiteRedisCredential(prefix),
		},
		inspect: () => fx!.ledger,
	}));
});
