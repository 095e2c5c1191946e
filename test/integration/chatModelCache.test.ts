/**
 * Prompt Cache Chat Model's cache (nodes/PromptCacheChatModel/cachedModel.ts) around a real
 * LangChain chat model class (a BaseChatModel of @langchain/core, as n8n's Chat Model nodes
 * are), on the real PostgreSQL ledger. The model is a stand-in that counts its calls. Proves:
 * repeats are answered from the ledger, tool calls come back as they came (as the model's own
 * AIMessage class), identical concurrent calls reach the model once, temperature above 0, cut-off
 * answers, errors and streams that ended early are never cached, a ledger outage lets the call
 * through uncached with a warning by default and stops it with "Stop if the Ledger Is Down", and
 * tokens saved reach the daily counters Get Stats reads. The same on Redis.
 */
import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage, AIMessageChunk, HumanMessage, SystemMessage, ToolMessage, type BaseMessage } from '@langchain/core/messages';
import { ChatGenerationChunk, type ChatResult } from '@langchain/core/outputs';

import { LedgerUnavailableError } from '../../lib/ledger/errors';
import type { Ledger } from '../../lib/ledger/types';
import { UnsafeRedisError } from '../../lib/n8n/redisSafety';
import { CHAT_CACHE_STEP, installChatCache, type CacheHost, type CallReport, type ChatCacheSettings } from '../../nodes/PromptCacheChatModel/cachedModel';
import { promptCacheStats } from '../../nodes/PromptCache/stats';
import { bouncerUrl, describeIfPgBouncer, freshPostgresLedger } from '../support/db';
import { describeIfRedis, freshRedisLedger } from '../support/redis';

interface Reply {
	text?: string;
	toolCalls?: Array<{ name: string; args: Record<string, unknown>; id: string }>;
	finish?: string;
	fail?: Error;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A chat model that answers `reply(messages)` after `delayMs`, counting its calls. */
class StandInChat extends BaseChatModel {
	calls: string[] = [];
	temperature: number | undefined = 0;
	delayMs = 0;
	reply: (messages: BaseMessage[], n: number) => Reply = (messages, n) => ({ text: `answer #${n} to ${String(messages.at(-1)?.content)}` });

	constructor() {
		super({});
	}

	_llmType() {
		return 'stand-in';
	}

	/** Call options bound with withConfig (as ChatOpenAI keeps them). */
	defaultOptions: Record<string, unknown> = {};

	/** As ChatOpenAI does: bindTools → withConfig → a NEW model object built from this one's fields. */
	withConfig(config: Record<string, unknown>): this {
		const next = new StandInChat();
		next.calls = this.calls;
		next.reply = this.reply;
		next.temperature = this.temperature;
		next.delayMs = this.delayMs;
		next.defaultOptions = { ...this.defaultOptions, ...config };
		return next as this;
	}

	async invoke(input: Parameters<BaseChatModel['invoke']>[0], options?: Parameters<BaseChatModel['invoke']>[1]) {
		return super.invoke(input, { ...this.defaultOptions, ...options } as never);
	}

	invocationParams(options: this['ParsedCallOptions']) {
		return { model: 'stand-in-1', temperature: this.temperature, tools: (options as { tools?: unknown }).tools, stream: false };
	}

	private async answer(messages: BaseMessage[]): Promise<{ reply: Reply; n: number }> {
		this.calls.push(String(messages.at(-1)?.content));
		const n = this.calls.length;
		if (this.delayMs) await sleep(this.delayMs);
		const reply = this.reply(messages, n);
		if (reply.fail) throw reply.fail;
		return { reply, n };
	}

	async _generate(messages: BaseMessage[]): Promise<ChatResult> {
		const { reply } = await this.answer(messages);
		const message = new AIMessage({
			content: reply.text ?? '',
			tool_calls: (reply.toolCalls ?? []).map((c) => ({ ...c, type: 'tool_call' as const })),
			response_metadata: { finish_reason: reply.finish ?? (reply.toolCalls ? 'tool_calls' : 'stop') },
			usage_metadata: { input_tokens: 20, output_tokens: 8, total_tokens: 28 },
		});
		return { generations: [{ text: reply.text ?? '', message, generationInfo: { finish_reason: reply.finish ?? 'stop' } }], llmOutput: { tokenUsage: { promptTokens: 20, completionTokens: 8, totalTokens: 28 } } };
	}

	async *_streamResponseChunks(messages: BaseMessage[]): AsyncGenerator<ChatGenerationChunk> {
		const { reply } = await this.answer(messages);
		for (const word of (reply.text ?? '').split(' ')) {
			yield new ChatGenerationChunk({ text: `${word} `, message: new AIMessageChunk({ content: `${word} ` }) });
		}
		yield new ChatGenerationChunk({ text: '', message: new AIMessageChunk({ content: '', response_metadata: { finish_reason: reply.finish ?? 'stop' }, usage_metadata: { input_tokens: 20, output_tokens: 8, total_tokens: 28 } }) });
	}
}

/** The ledger of the suite running now (PostgreSQL, then Redis). */
let fx: { ledger: Ledger; dispose(): Promise<void> };

let nsCount = 0;
function settings(overrides: Partial<ChatCacheSettings> = {}): ChatCacheSettings {
	return {
		namespace: `chat-${Date.now().toString(36)}-${nsCount++}`,
		ttlMs: 3_600_000,
		leaseMs: 60_000,
		waitMs: 30_000,
		shadow: false,
		skip: false,
		force: false,
		anyTemperature: false,
		failClosed: false,
		prices: { input: 0.15, output: 0.6 },
		recordStats: true,
		maxBytes: 256 * 1024,
		...overrides,
	};
}

interface TestHost extends CacheHost {
	reports: CallReport[];
	errors: unknown[];
	warnings: string[];
}

function host(ledger: () => Promise<Ledger> = async () => fx.ledger): TestHost {
	const reports: CallReport[] = [];
	const errors: unknown[] = [];
	const warnings: string[] = [];
	return {
		reports,
		errors,
		warnings,
		holder: 'execution:test',
		ledger,
		report: (call, error) => {
			reports.push(call);
			if (error !== undefined) errors.push(error);
		},
		warn: (message) => warnings.push(message),
		stopError: (error, refused) => new Error(`${refused ? 'refused' : 'ledger down'}: ${(error as Error).message}`),
	};
}

/** A fresh model with the cache installed, as the node gives it to the agent. */
function cached(s: ChatCacheSettings, h: CacheHost = host()) {
	const model = new StandInChat();
	installChatCache(model as never, s, h);
	return model;
}

const outcomes = (h: TestHost) => h.reports.map((r) => r.outcome);

function chatCacheSuite(open: () => Promise<{ ledger: Ledger; dispose(): Promise<void> }>) {
	beforeAll(async () => {
		fx = await open();
	});
	afterAll(async () => fx && (await fx.dispose()));

	test('repeats are answered from the ledger: 5 distinct questions asked 3 times each cost 5 model calls, with the same answers', async () => {
		const s = settings();
		const h = host();
		const model = cached(s, h);
		const answers = new Map<string, Set<string>>();
		for (let round = 0; round < 3; round++) {
			for (let q = 0; q < 5; q++) {
				const out = await model.invoke([new SystemMessage('Be short.'), new HumanMessage(`question ${q}`)]);
				const seen = answers.get(`q${q}`) ?? new Set<string>();
				seen.add(String(out.content));
				answers.set(`q${q}`, seen);
			}
		}
		expect(model.calls).toHaveLength(5);
		for (const seen of answers.values()) expect(seen.size).toBe(1);
		expect(outcomes(h).filter((o) => o === 'stored')).toHaveLength(5);
		expect(outcomes(h).filter((o) => o === 'hit')).toHaveLength(10);
		const stats = await promptCacheStats(fx.ledger, s.namespace);
		expect(stats).toMatchObject({ lookups: 15, hits: 10, misses: 5, tokensSaved: 280, inputTokensSaved: 200, outputTokensSaved: 80 });
		expect(stats.moneySaved).toBeCloseTo(10 * (20 * 0.15 + 8 * 0.6) / 1000, 9);
		// A fresh model object (the next execution) reads the same entries.
		const next = cached(s);
		await next.invoke([new SystemMessage('Be short.'), new HumanMessage('question 3')]);
		expect(next.calls).toHaveLength(0);
	});

	test('a tool call comes back as it came, as the model\'s own AIMessage, and the follow-up call is cached too (through a withConfig that builds a new model, as ChatOpenAI\'s does)', async () => {
		const s = settings();
		const first = cached(s);
		first.reply = (messages, n) =>
			messages.at(-1) instanceof ToolMessage
				? { text: `the sum is ${String(messages.at(-1)?.content)} (#${n})` }
				: { text: '', toolCalls: [{ name: 'calculator', args: { input: '2+2' }, id: `call_${n}` }] };
		const ask = async (model: StandInChat) => {
			const bound = model.withConfig({ tools: [{ type: 'function', function: { name: 'calculator', description: 'adds', parameters: { type: 'object', properties: { input: { type: 'string' } } } } }] } as never);
			const history: BaseMessage[] = [new HumanMessage('what is 2+2?')];
			const call = (await bound.invoke(history)) as AIMessage;
			history.push(call, new ToolMessage({ content: '4', tool_call_id: call.tool_calls![0].id! }));
			const final = (await bound.invoke(history)) as AIMessage;
			return { call, final };
		};
		const fresh = await ask(first);
		expect(first.calls).toHaveLength(2);
		const again = cached(s);
		again.reply = first.reply;
		const replayed = await ask(again);
		expect(again.calls).toHaveLength(0);
		expect(replayed.call).toBeInstanceOf(AIMessage);
		expect(replayed.call.tool_calls).toEqual(fresh.call.tool_calls);
		expect(replayed.call.tool_calls?.[0]).toMatchObject({ name: 'calculator', args: { input: '2+2' }, id: 'call_1' });
		expect(replayed.final.content).toBe(fresh.final.content);
	});

	test('10 identical calls at the same moment reach the model once; the other 9 wait for its answer', async () => {
		const s = settings();
		const h = host();
		const models = Array.from({ length: 10 }, () => cached(s, h));
		// Long enough for all ten to reach the ledger while the first is still at the model, even on
		// a loaded machine (at 400 ms, six of them once came after its answer was stored: hits
		// that never waited).
		for (const m of models) m.delayMs = 1_500;
		const shared = { n: 0 };
		for (const m of models) m.reply = () => ({ text: `the one answer ${++shared.n}` });
		const out = await Promise.all(models.map((m) => m.invoke([new HumanMessage('same question')])));
		expect(models.reduce((n, m) => n + m.calls.length, 0)).toBe(1);
		expect(new Set(out.map((o) => o.content)).size).toBe(1);
		expect(outcomes(h).sort()).toEqual([...Array(9).fill('hit'), 'stored']);
		expect(h.reports.filter((r) => r.waitedMs !== undefined)).toHaveLength(9);
	});

	test('a temperature above 0 (or not set) is never cached unless the builder allows it', async () => {
		const s = settings();
		const h = host();
		const warm = cached(s, h);
		warm.temperature = 0.7;
		await warm.invoke([new HumanMessage('hot')]);
		await warm.invoke([new HumanMessage('hot')]);
		warm.temperature = undefined;
		await warm.invoke([new HumanMessage('hot')]);
		expect(warm.calls).toHaveLength(3);
		expect(h.reports.map((r) => r.reason)).toEqual([
			expect.stringContaining('temperature is 0.7'),
			expect.stringContaining('temperature is 0.7'),
			expect.stringContaining('temperature is not set'),
		]);
		expect(await promptCacheStats(fx.ledger, s.namespace)).toMatchObject({ lookups: 3, misses: 3, bypassed: 3, hits: 0 });
		const allowed = cached(settings({ anyTemperature: true, namespace: s.namespace }));
		allowed.temperature = 0.7;
		await allowed.invoke([new HumanMessage('hot')]);
		await allowed.invoke([new HumanMessage('hot')]);
		expect(allowed.calls).toHaveLength(1);
	});

	test('a cut-off answer (finish reason length or content_filter) is passed on but never cached', async () => {
		for (const finish of ['length', 'content_filter']) {
			const s = settings();
			const h = host();
			const model = cached(s, h);
			model.reply = (_m, n) => ({ text: `partial #${n}`, finish });
			expect((await model.invoke([new HumanMessage('long')])).content).toBe('partial #1');
			expect((await model.invoke([new HumanMessage('long')])).content).toBe('partial #2');
			expect(h.reports[0]).toMatchObject({ outcome: 'not_stored', reason: expect.stringContaining(`finish reason "${finish}"`) });
			const rows = (await fx.ledger.get(s.namespace, h.reports[0].promptHash!)).filter((r) => r.step === CHAT_CACHE_STEP);
			expect(rows.map((r) => r.status)).toEqual(['failed_retryable']);
		}
	});

	test('a model that throws: the same error reaches the agent, nothing is cached, a waiting identical call asks the model itself', async () => {
		const s = settings();
		const h = host();
		const failing = cached(s, h);
		const boom = new Error('429 Rate limit reached');
		failing.delayMs = 300;
		failing.reply = () => ({ fail: boom });
		const waiter = cached(s, h);
		const pending = failing.invoke([new HumanMessage('flaky')]).catch((e: unknown) => e);
		await sleep(100);
		const waited = waiter.invoke([new HumanMessage('flaky')]);
		expect(await pending).toBe(boom);
		expect((await waited).content).toBe('answer #1 to flaky');
		expect(waiter.calls).toHaveLength(1);
		expect(h.reports[0]).toMatchObject({ outcome: 'not_stored', reason: expect.stringContaining('errors are never cached') });
		expect(h.errors).toEqual([boom]);
	});

	test('streaming: a whole stream is stored and a repeat streams the stored answer; a stream left early is never cached', async () => {
		const s = settings();
		const h = host();
		const model = cached(s, h);
		let text = '';
		for await (const chunk of await model.stream([new HumanMessage('stream me')])) text += String(chunk.content);
		expect(text.trim()).toBe('answer #1 to stream me');
		let again = '';
		const chunks: unknown[] = [];
		for await (const chunk of await model.stream([new HumanMessage('stream me')])) {
			again += String(chunk.content);
			chunks.push(chunk);
		}
		expect(again).toBe(text);
		expect(chunks[0]).toBeInstanceOf(AIMessageChunk);
		expect(model.calls).toHaveLength(1);
		// Left after the first chunk: not stored, so the next call asks the model.
		for await (const chunk of await model.stream([new HumanMessage('stop early')])) {
			void chunk;
			break;
		}
		await model.invoke([new HumanMessage('stop early')]);
		expect(model.calls).toHaveLength(3);
		expect(h.reports.find((r) => r.reason.includes('stream ended early'))).toBeDefined();
	});

	test('ledger outage: by default the model is asked uncached and the run gets a warning; "Stop if the Ledger Is Down" stops it instead', async () => {
		const down = async (): Promise<Ledger> => {
			throw new LedgerUnavailableError('connect ECONNREFUSED 127.0.0.1:1', 'Check the host.');
		};
		const h = host(down);
		const open = cached(settings(), h);
		expect((await open.invoke([new HumanMessage('outage')])).content).toBe('answer #1 to outage');
		expect(h.reports[0]).toMatchObject({ outcome: 'uncached', warning: expect.stringContaining('The ledger could not be reached') });
		expect(h.warnings.join(' ')).toContain('The ledger could not be reached');

		const closed = cached(settings({ failClosed: true }), host(down));
		await expect(closed.invoke([new HumanMessage('outage')])).rejects.toThrow('ledger down: connect ECONNREFUSED');
		expect(closed.calls).toHaveLength(0);
	});

	test('ledger outage: one warning per call, not a second one about its stats; "Stop if the Ledger Is Down" shows the error on this node\'s run', async () => {
		const down = async (): Promise<Ledger> => {
			throw new LedgerUnavailableError('connect ECONNREFUSED 127.0.0.1:1', 'Check the host.');
		};
		const h = host(down);
		await cached(settings(), h).invoke([new HumanMessage('outage, counted')]);
		expect(h.warnings).toHaveLength(1);
		expect(h.warnings[0]).toContain('The ledger could not be reached');

		const stopped = host(down);
		// What n8n's tracing of the model node hears: nothing, for a call that never reached the model.
		const heard: string[] = [];
		const tracing = { handleChatModelStart: () => void heard.push('start'), handleLLMError: () => void heard.push('error'), handleLLMEnd: () => void heard.push('end') };
		await expect(cached(settings({ failClosed: true }), stopped).invoke([new HumanMessage('outage, stopped')], { callbacks: [tracing] })).rejects.toThrow('ledger down');
		expect(stopped.errors.map((e) => (e as Error).message)).toEqual([expect.stringContaining('ledger down: connect ECONNREFUSED')]);
		expect(heard).toEqual([]);
		// A call that reaches the model is heard as before.
		await cached(settings(), host()).invoke([new HumanMessage('ledger up, traced')], { callbacks: [tracing] });
		expect(heard).toEqual(['start', 'end']);
	});

	test('a ledger that answers and refuses (a Redis that can lose keys) stops the call, whatever "Stop if the Ledger Is Down" says: the model is not asked', async () => {
		const refusing = async (): Promise<Ledger> => {
			throw new UnsafeRedisError('The ledger Redis can lose keys (maxmemory-policy).', 'Nothing was read from the cache or stored in it.');
		};
		const h = host(refusing);
		const model = cached(settings({ failClosed: false }), h);
		await expect(model.invoke([new HumanMessage('unsafe')])).rejects.toThrow('refused: The ledger Redis can lose keys');
		expect(model.calls).toHaveLength(0);
		expect(h.warnings).toEqual([]);
		expect(h.errors).toHaveLength(1);
	});

	test('shadow mode: every call asks the model; Get Stats counts what would have been answered and whether it differed', async () => {
		const s = settings({ shadow: true });
		const model = cached(s);
		model.reply = (m) => ({ text: `fixed answer to ${String(m.at(-1)?.content)}` });
		for (let i = 0; i < 4; i++) await model.invoke([new HumanMessage(`q${i % 2}`)]);
		expect(model.calls).toHaveLength(4);
		const stats = await promptCacheStats(fx.ledger, s.namespace);
		expect(stats).toMatchObject({ hits: 0, lookups: 4, shadow: { lookups: 4, wouldHit: 2, wouldHitRate: 0.5, compared: 2, differed: 0 } });
	});

	test('Skip the Cache and Force Refresh', async () => {
		const s = settings();
		const model = cached(s);
		await model.invoke([new HumanMessage('x')]);
		const skipping = cached({ ...s, skip: true });
		await skipping.invoke([new HumanMessage('x')]);
		expect(skipping.calls).toHaveLength(1);
		const forcing = cached({ ...s, force: true });
		forcing.reply = () => ({ text: 'fresh answer' });
		expect((await forcing.invoke([new HumanMessage('x')])).content).toBe('fresh answer');
		const after = cached(s);
		expect((await after.invoke([new HumanMessage('x')])).content).toBe('fresh answer');
		expect(after.calls).toHaveLength(0);
		expect(await promptCacheStats(fx.ledger, s.namespace)).toMatchObject({ bypassed: 1, refreshed: 1 });
	});

	test('a model whose messages are not the LangChain n8n loads is used uncached, with a warning: never a wrong answer', async () => {
		const h = host();
		const calls: string[] = [];
		// Not a BaseChatModel of n8n's @langchain/core: its messages could not be given back as its own.
		const foreign = {
			_generate: async () => {
				calls.push('x');
				return { generations: [{ text: 'fresh', message: { content: 'fresh', _getType: () => 'ai' } }] };
			},
			// eslint-disable-next-line require-yield
			_streamResponseChunks: async function* () {
				throw new Error('not used');
			},
			invocationParams: () => ({ model: 'foreign-1', temperature: 0 }),
		};
		installChatCache(foreign as never, settings(), h);
		for (let i = 0; i < 2; i++) await (foreign._generate as (...args: unknown[]) => Promise<unknown>)([new HumanMessage("q")], {}, undefined);
		expect(calls).toHaveLength(2);
		expect(h.reports.map((r) => r.outcome)).toEqual(['uncached', 'uncached']);
		expect(h.warnings[0]).toContain('passed every call to the model uncached');
	});
}

describe('Prompt Cache Chat Model on PostgreSQL', () => chatCacheSuite(() => freshPostgresLedger()));
describeIfPgBouncer('Prompt Cache Chat Model through PgBouncer')('Prompt Cache Chat Model on PostgreSQL through PgBouncer in transaction mode', () =>
	chatCacheSuite(() => freshPostgresLedger(undefined, bouncerUrl())),
);
describeIfRedis('Prompt Cache Chat Model on Redis')('Prompt Cache Chat Model on Redis', () => chatCacheSuite(() => freshRedisLedger()));
