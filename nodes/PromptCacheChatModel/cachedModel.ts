import { randomUUID } from 'crypto';

import { leaseLive } from '../../lib/ledger/claims';
import { LedgerError, LedgerUnavailableError } from '../../lib/ledger/errors';
import { promptHash, type PromptHash, type PromptInput } from '../../lib/ledger/promptHash';
import type { CountIncrement, Ledger, LedgerRecord } from '../../lib/ledger/types';
import { isStoredEntry, type StoredEntry } from '../PromptCache/common';
import { answerDigest, usageSplit } from '../PromptCache/responseShapes';
import { messageType, revivalFor, revivedChunk, storedMessage, type LcCore, type LcMessage, type StoredMessage } from './langchainShape';

/**
 * The cache inside a Chat Model: the connected model's `_generate` and `_streamResponseChunks`
 * (the two places every LangChain chat model call ends in, streamed or not, as n8n's own
 * chatModelMessageWrapper patches them) are wrapped on that model object. Each call is keyed
 * like a Prompt Cache lookup (lib/ledger/promptHash.ts: model, messages with their tool calls,
 * tools, parameters), and answered from the ledger when the same request was answered before.
 * Concurrent identical calls reach the model once: the first reserves the key (a lease), the
 * others wait for its answer. Nothing here knows about n8n; the node passes a `CacheHost`.
 */

/** Ledger step of a Chat Model cache entry (kept apart from Prompt Cache's, whose answers have another shape). */
export const CHAT_CACHE_STEP = 'prompt-cache-chat';

export interface ChatCacheSettings {
	namespace: string;
	/** How long a stored answer is served. */
	ttlMs: number;
	/** How long other calls wait for this call's answer before one of them asks the model itself. */
	leaseMs: number;
	/** How long a call waits for an identical call in flight; after that it asks the model itself. */
	waitMs: number;
	/** Always ask the model; count what the cache would have answered. */
	shadow: boolean;
	skip: boolean;
	force: boolean;
	/** Cache answers whatever the temperature. Off: only calls at temperature 0. */
	anyTemperature: boolean;
	/** Stop with an error when the ledger cannot be reached, instead of asking the model uncached. */
	failClosed: boolean;
	prices: { input: number; output: number } | null;
	recordStats: boolean;
	/** Largest answer stored, in bytes of JSON. */
	maxBytes: number;
}

export type CallOutcome = 'hit' | 'stored' | 'not_stored' | 'uncached';

/** What the cache did with one model call: shown as a run of the node, for people and tests. */
export interface CallReport {
	outcome: CallOutcome;
	reason: string;
	promptHash: string | null;
	namespace: string;
	model: string | null;
	keyReceipt: string[] | null;
	tokensSaved?: number;
	moneySaved?: number | null;
	waitedMs?: number;
	shadow?: { wouldHit: boolean; sameAsCached?: boolean };
	warning?: string;
}

export interface CacheHost {
	/** The ledger; throws when it cannot be reached. */
	ledger(): Promise<Ledger>;
	/** Who holds reservations: this execution. */
	holder: string;
	/** Called once per model call, when the call settled (or failed). */
	report(call: CallReport, error?: unknown): void;
	/** A warning for the run and n8n's log. */
	warn(message: string): void;
	/**
	 * The error that stops the agent: the ledger is down and the builder asked to stop (`refused`
	 * false), or the ledger answered and refused, e.g. a Redis that can lose keys (`refused` true).
	 */
	stopError(error: unknown, refused: boolean): Error;
	/**
	 * Optional: hands counts to be written after the call answered, with other calls' counts, when
	 * the execution ends (lib/n8n/countBuffer.ts). Without it each call writes its counts itself.
	 */
	countLater?(ledger: Ledger, counts: CountIncrement[]): void;
}

/** The parts of a LangChain chat model this file calls. */
interface ChatModel {
	_generate(messages: LcMessage[], options: Record<string, unknown>, runManager?: unknown): Promise<ChatResult>;
	_streamResponseChunks(messages: LcMessage[], options: Record<string, unknown>, runManager?: unknown): AsyncGenerator<Chunk>;
	invocationParams?: (options: Record<string, unknown>) => Record<string, unknown>;
	_identifyingParams?: () => Record<string, unknown>;
	_llmType?: () => string;
	model?: string;
	modelName?: string;
	[key: string]: unknown;
}

interface Generation {
	text: string;
	message: LcMessage;
	generationInfo?: Record<string, unknown>;
}
interface ChatResult {
	generations: Generation[];
	llmOutput?: Record<string, unknown>;
}
interface Chunk extends Generation {
	concat(other: Chunk): Chunk;
}

/** What a Chat Model cache entry keeps as its `response`. */
interface ChatAnswer {
	kind: 'chat';
	message: StoredMessage;
	text: string;
	generationInfo: Record<string, unknown> | null;
	llmOutput: Record<string, unknown> | null;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function isChatAnswer(v: unknown): v is ChatAnswer {
	return isObject(v) && v.kind === 'chat' && isObject(v.message) && typeof v.message.type === 'string' && isObject(v.message.data) && typeof v.text === 'string';
}

const INSTALLED = Symbol.for('n8n-nodes-idempotency.promptCacheChatModel');

/**
 * On the options LangChain hands `_generate`: what the cache decided for each of the call's
 * message lists before the model's callbacks were told it started (see installChatCache). A
 * symbol, so no key, log or provider request ever sees it; object spread carries it along.
 */
const DECIDED = Symbol('n8n-nodes-idempotency.decidedCalls');
type Decided = Awaited<ReturnType<ChatCache['plan']>>;
const decidedFor = (options: Record<string | symbol, unknown>): Decided | undefined =>
	(options[DECIDED] as Decided[] | undefined)?.[typeof options.promptIndex === 'number' ? options.promptIndex : 0];

/** Wraps `model` (in place) with the cache; returns it. */
export function installChatCache(model: ChatModel, settings: ChatCacheSettings, host: CacheHost): ChatModel {
	if (model[INSTALLED as unknown as string]) {
		// A second cache node around the same model object: the first one installed decides.
		return model;
	}
	const generate = model._generate.bind(model);
	const stream = model._streamResponseChunks.bind(model);
	const cache = new ChatCache(model, settings, host);
	model._generate = async (messages, options, runManager) => await cache.generate(messages, options, () => generate(messages, options, runManager), decidedFor(options));
	model._streamResponseChunks = (messages, options, runManager) => cache.stream(messages, options, () => stream(messages, options, runManager), decidedFor(options));
	// LangChain tells the model's callbacks (n8n's tracing of the model node) that a call started
	// before it reaches `_generate`: a call the cache stops there would be shown as the model
	// node's error, though that model never ran. So each call is decided first, here, and a stop
	// is thrown before anything started; what was decided rides along to `_generate`.
	const generateUncached = model._generateUncached;
	if (typeof generateUncached === 'function') {
		model._generateUncached = async function (this: unknown, messages: LcMessage[][], options: Record<string, unknown>, ...rest: unknown[]) {
			const decided: Decided[] = [];
			try {
				for (let i = 0; i < messages.length; i++) decided.push(await cache.plan(messages[i], { ...options, promptIndex: i }));
			} catch (error) {
				await cache.abandon(decided, error);
				// The host's stop error (a NodeOperationError of this node), as plan made it.
				// eslint-disable-next-line @n8n/community-nodes/require-node-api-error
				throw error;
			}
			return await (generateUncached as (...args: unknown[]) => Promise<unknown>).call(this, messages, { ...options, [DECIDED]: decided }, ...rest);
		};
	}
	// Some models answer bindTools (and withStructuredOutput) with a new model object built from
	// their fields (ChatOpenAI's withConfig does), which has none of the patches above: that
	// model gets the cache too.
	if (typeof model.withConfig === 'function') {
		const withConfig = model.withConfig as (...args: unknown[]) => unknown;
		model.withConfig = function (this: unknown, ...args: unknown[]) {
			const derived = withConfig.apply(this, args) as ChatModel | undefined;
			if (derived && derived !== model && typeof derived._generate === 'function' && typeof derived._streamResponseChunks === 'function') {
				return installChatCache(derived, settings, host);
			}
			return derived;
		};
	}
	Object.defineProperty(model, INSTALLED, { value: true });
	return model;
}

/** Why an answer is not stored, or null when it may be. */
function uncacheable(generations: Generation[]): string | null {
	if (generations.length !== 1) return `the model gave ${generations.length} answers; only single answers are cached`;
	const [g] = generations;
	if (messageType(g.message) !== 'ai') return 'the answer is not an AI message';
	const meta = { ...(g.message.response_metadata ?? {}), ...(g.generationInfo ?? {}) };
	const finish = String(meta.finish_reason ?? meta.stop_reason ?? meta.finishReason ?? '').toLowerCase();
	if (['length', 'max_tokens', 'content_filter', 'safety', 'recitation'].includes(finish)) {
		return `the answer was cut off (finish reason "${finish}"); such answers are never cached`;
	}
	if (meta.status === 'incomplete' || meta.status === 'failed') return `the answer is ${String(meta.status)}; such answers are never cached`;
	return null;
}

/** The call as Prompt Cache's key sees it. */
function requestOf(model: ChatModel, messages: LcMessage[], options: Record<string, unknown>): PromptInput {
	let params: Record<string, unknown>;
	if (typeof model.invocationParams === 'function') {
		params = { ...model.invocationParams(options) };
	} else {
		params = { ...(typeof model._identifyingParams === 'function' ? model._identifyingParams() : {}) };
		for (const name of ['tools', 'tool_choice', 'stop', 'response_format']) if (options[name] !== undefined) params[name] = options[name];
	}
	const modelName = params.model ?? params.model_name ?? params.modelName ?? model.model ?? model.modelName;
	delete params.model;
	delete params.model_name;
	delete params.modelName;
	delete params.messages;
	// The kind of model is part of the key: two providers may both have a "default" model.
	if (typeof model._llmType === 'function') params.provider = model._llmType();
	return {
		model: typeof modelName === 'string' ? modelName : undefined,
		messages: messages.map((m) => {
			const plain: Record<string, unknown> = { role: messageType(m), content: m.content };
			if (m.tool_calls?.length) plain.tool_calls = m.tool_calls.map((c) => ({ name: c.name, args: c.args, id: c.id }));
			if (m.tool_call_id) plain.tool_call_id = m.tool_call_id;
			if (m.name) plain.name = m.name;
			return plain;
		}),
		parameters: params,
	};
}

type Plan =
	| { kind: 'hit'; entry: StoredEntry & { response: ChatAnswer }; waitedMs: number | null }
	/** Ask the model and store the answer under the reservation `fence`. */
	| { kind: 'compute'; fence: number | null; holder: string; reason: string; shadow?: { wouldHit: boolean } }
	/** Ask the model; store nothing. */
	| { kind: 'uncached'; reason: string; shadow?: { wouldHit: boolean; cached?: string }; warning?: string; bypassed?: true; ledgerDown?: true };

/**
 * A ledger that answered and refused (a Redis that can lose keys, a Built-in ledger in queue
 * mode, a setting it cannot take) is not down: the call stops whatever "Stop if the Ledger Is
 * Down" says, as every other node of the package fails closed there.
 */
const refusedByLedger = (error: unknown) => error instanceof LedgerError && !(error instanceof LedgerUnavailableError);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

class ChatCache {
	constructor(
		private readonly model: ChatModel,
		private readonly settings: ChatCacheSettings,
		private readonly host: CacheHost,
	) {}

	async generate(messages: LcMessage[], options: Record<string, unknown>, call: () => Promise<ChatResult>, decided?: Decided): Promise<ChatResult> {
		const { key, plan, core } = decided ?? (await this.plan(messages, options));
		if (plan.kind === 'hit' && core) {
			const answer = plan.entry.response;
			const message = core.mapStoredMessageToChatMessage(answer.message);
			await this.settleHit(key as PromptHash, plan);
			return { generations: [{ text: answer.text, message, ...(answer.generationInfo ? { generationInfo: answer.generationInfo } : {}) }], ...(answer.llmOutput ? { llmOutput: answer.llmOutput } : {}) };
		}
		let result: ChatResult;
		try {
			result = await call();
		} catch (error) {
			await this.settleFailure(key, plan as Exclude<Plan, { kind: 'hit' }>, 'the model returned an error; errors are never cached', error);
			// The model's own error, unchanged: the AI node and its retry and error handling know it.
			// eslint-disable-next-line @n8n/community-nodes/require-node-api-error
			throw error;
		}
		await this.settleAnswer(key, plan as Exclude<Plan, { kind: 'hit' }>, result.generations, result.llmOutput ?? null);
		return result;
	}

	async *stream(messages: LcMessage[], options: Record<string, unknown>, call: () => AsyncGenerator<Chunk>, decided?: Decided): AsyncGenerator<Chunk> {
		const { key, plan, core } = decided ?? (await this.plan(messages, options));
		if (plan.kind === 'hit' && core) {
			const answer = plan.entry.response;
			const message = revivedChunk(core, answer.message);
			await this.settleHit(key as PromptHash, plan);
			yield new core.ChatGenerationChunk({ text: answer.text, message, ...(answer.generationInfo ? { generationInfo: answer.generationInfo } : {}) }) as Chunk;
			return;
		}
		const open = plan as Exclude<Plan, { kind: 'hit' }>;
		let whole: Chunk | undefined;
		let ended = false;
		let failure: unknown;
		try {
			for await (const chunk of call()) {
				whole = whole ? whole.concat(chunk) : chunk;
				yield chunk;
			}
			ended = true;
		} catch (error) {
			failure = error;
			// The model's own error, unchanged, as above.
			// eslint-disable-next-line @n8n/community-nodes/require-node-api-error
			throw error;
		} finally {
			if (!ended) {
				// An error, or the stream was left before its end (the consumer stopped reading).
				await this.settleFailure(key, open, failure !== undefined ? 'the model returned an error; errors are never cached' : 'the stream ended early; a partial answer is never cached', failure);
			}
		}
		if (!whole) await this.settleFailure(key, open, 'the model sent nothing', undefined);
		else await this.settleAnswer(key, open, [whole], null);
	}

	/** Calls decided before another call of the same batch stopped: none of them is made. */
	async abandon(decided: Decided[], error: unknown): Promise<void> {
		for (const { key, plan } of decided) {
			if (plan.kind !== 'hit') await this.settleFailure(key, plan, 'another call of the same batch was stopped', error);
		}
	}

	/** The key and what to do with this call. */
	async plan(messages: LcMessage[], options: Record<string, unknown>): Promise<{ key: PromptHash | null; plan: Plan; core: LcCore | null }> {
		const s = this.settings;
		let key: PromptHash;
		try {
			key = promptHash(requestOf(this.model, messages, options));
		} catch (error) {
			return { key: null, plan: { kind: 'uncached', reason: `this call could not be keyed (${(error as Error).message}); it was sent to the model uncached`, warning: 'A model call could not be keyed, so it was not cached.' }, core: null };
		}
		const verdict = revivalFor(this.model);
		if (!verdict.ok) {
			return {
				key,
				plan: {
					kind: 'uncached',
					reason: `answers of this model cannot be cached here: ${verdict.why}`,
					warning: `Prompt Cache Chat Model passed every call to the model uncached: ${verdict.why}. Please report your n8n version at https://github.com/n8n-nodes-idempotency/n8n-nodes-idempotency/issues.`,
				},
				core: null,
			};
		}
		if (s.skip) return { key, plan: { kind: 'uncached', reason: 'Skip the Cache is on', bypassed: true }, core: verdict.core };
		const temperature = key.envelope.params.temperature;
		if (!s.anyTemperature && temperature !== 0) {
			return {
				key,
				plan: {
					kind: 'uncached',
					bypassed: true,
					reason:
						temperature === undefined
							? 'the model\'s temperature is not set (the provider\'s default is usually above 0); only answers at temperature 0 are cached unless "Cache at Any Temperature" is on'
							: `the model's temperature is ${String(temperature)}; only answers at temperature 0 are cached unless "Cache at Any Temperature" is on`,
				},
				core: verdict.core,
			};
		}
		try {
			return { key, plan: await this.reserve(key), core: verdict.core };
		} catch (error) {
			const refused = refusedByLedger(error);
			if (refused || s.failClosed) {
				// Shown on this node's run, where the reason is, not only on the agent.
				const stop = this.host.stopError(error, refused);
				this.host.report({ outcome: 'uncached', reason: stop.message, promptHash: key.hash, namespace: s.namespace, model: key.envelope.model, keyReceipt: key.receipt }, stop);
				throw stop;
			}
			return {
				key,
				plan: {
					kind: 'uncached',
					ledgerDown: true,
					reason: 'the ledger could not be reached; the model was asked uncached',
					warning: `The ledger could not be reached, so a model call went uncached (the agent was not stopped; turn on "Stop if the Ledger Is Down" to stop instead): ${(error as Error).message}`,
				},
				core: verdict.core,
			};
		}
	}

	/** Claims the key, or finds its answer, or waits for the call that is asking the model for it. */
	private async reserve(key: PromptHash): Promise<Plan> {
		const s = this.settings;
		const ledger = await this.host.ledger();
		const holder = `${this.host.holder}:call:${randomUUID()}`;
		const row = { namespace: s.namespace, key: key.hash, step: CHAT_CACHE_STEP };
		const options = { mode: 'lease' as const, holder, leaseMs: s.leaseMs, ttlMs: s.leaseMs };
		if (s.force && !s.shadow) {
			// Mark the stored answer failed, which makes it claimable again; a live reservation of another call is left alone.
			await ledger.record([{ ...row, status: 'failed_retryable', result: null }], { ttlMs: s.leaseMs, holder });
		}
		// A settled entry with an answer is a hit whatever a claim would add: read it (one probe, no
		// write) and claim only when it is not there.
		if (!s.force && ledger.peek) {
			const [found] = await ledger.peek([row]);
			const entry = found && (found.status === 'completed' || found.status === 'needs_review') ? found.result : null;
			if (isStoredEntry(entry) && isChatAnswer(entry.response)) {
				if (s.shadow) return { kind: 'uncached', reason: 'Shadow mode: the cache has an answer (this would have been a hit); the model was asked anyway', shadow: { wouldHit: true, cached: answerDigest(entry.response.text) } };
				return { kind: 'hit', entry: entry as StoredEntry & { response: ChatAnswer }, waitedMs: null };
			}
		}
		const started = Date.now();
		let delay = 25;
		let firstBusy = true;
		for (;;) {
			const [outcome] = await ledger.claim([{ ...row, fingerprint: null }], options);
			const waited = firstBusy ? null : Date.now() - started;
			if (outcome.kind === 'claimed') {
				return { kind: 'compute', fence: outcome.record.fence, holder, reason: s.force ? 'Force Refresh' : 'not cached yet', ...(s.shadow ? { shadow: { wouldHit: false } } : {}) };
			}
			if (outcome.kind === 'duplicate') {
				const entry = outcome.record.result;
				if (isStoredEntry(entry) && isChatAnswer(entry.response)) {
					if (s.shadow) return { kind: 'uncached', reason: 'Shadow mode: the cache has an answer (this would have been a hit); the model was asked anyway', shadow: { wouldHit: true, cached: answerDigest(entry.response.text) } };
					return { kind: 'hit', entry: entry as StoredEntry & { response: ChatAnswer }, waitedMs: waited };
				}
				return { kind: 'uncached', reason: 'the stored entry has no answer this node can give back' };
			}
			if (outcome.kind !== 'in_progress') return { kind: 'uncached', reason: 'the stored entry does not match' };
			// Another call is asking the model for this request right now.
			if (s.shadow) return { kind: 'uncached', reason: 'Shadow mode: an identical call is asking the model right now (this would have waited for its answer)', shadow: { wouldHit: true } };
			firstBusy = false;
			const left = started + s.waitMs - Date.now();
			if (left <= 0) return { kind: 'uncached', reason: `waited ${Math.round(s.waitMs / 100) / 10} s for an identical call's answer; it has not come, so this call asked the model itself` };
			await this.waitForAnswer(ledger, row, Math.min(left, s.waitMs), delay);
			delay = Math.min(Math.round(delay * 1.5), 250);
		}
	}

	/** Polls until the entry is answered or its reservation lapsed (then the loop claims again). */
	private async waitForAnswer(ledger: Ledger, row: { namespace: string; key: string; step: string }, maxMs: number, firstDelay: number): Promise<void> {
		const deadline = Date.now() + maxMs;
		let delay = firstDelay;
		while (Date.now() < deadline) {
			await sleep(Math.min(delay, Math.max(0, deadline - Date.now())));
			delay = Math.min(Math.round(delay * 1.5), 250);
			const record: LedgerRecord | undefined = (await ledger.get(row.namespace, row.key)).find((r) => r.step === row.step);
			if (!record || record.status !== 'in_progress' || !leaseLive(record)) return;
		}
	}

	private savingOf(entry: StoredEntry): { tokens: number; input: number; output: number; money: number | null } {
		const split = usageSplit(entry.usage);
		const tokens = entry.tokens ?? (split.input ?? 0) + (split.output ?? 0);
		const p = this.settings.prices;
		const money = p && (split.input !== null || split.output !== null) ? ((split.input ?? 0) * p.input + (split.output ?? 0) * p.output) / 1000 : null;
		return { tokens, input: split.input ?? 0, output: split.output ?? 0, money };
	}

	private async settleHit(key: PromptHash, plan: Extract<Plan, { kind: 'hit' }>): Promise<void> {
		const saving = this.savingOf(plan.entry);
		await this.count({ lookups: 1, hits: 1, tokensSaved: saving.tokens, inputTokensSaved: saving.input, outputTokensSaved: saving.output, moneySaved: saving.money ?? 0, refreshed: 0 });
		this.host.report({
			outcome: 'hit',
			reason: plan.waitedMs !== null ? 'answered from the cache, after waiting for an identical call' : 'answered from the cache',
			promptHash: key.hash,
			namespace: this.settings.namespace,
			model: key.envelope.model,
			keyReceipt: key.receipt,
			tokensSaved: saving.tokens,
			moneySaved: saving.money,
			...(plan.waitedMs !== null ? { waitedMs: plan.waitedMs } : {}),
		});
	}

	private async settleFailure(key: PromptHash | null, plan: Exclude<Plan, { kind: 'hit' }>, reason: string, error: unknown): Promise<void> {
		const warnings: string[] = [];
		if (plan.kind === 'compute' && key) {
			// Free the reservation, so that a waiting call asks the model itself.
			try {
				const ledger = await this.host.ledger();
				await ledger.record([{ namespace: this.settings.namespace, key: key.hash, step: CHAT_CACHE_STEP, status: 'failed_retryable', result: null, fence: plan.fence }], { ttlMs: 60_000, holder: plan.holder });
			} catch (e) {
				warnings.push(`The reservation of a failed call could not be freed (the ledger did not answer: ${(e as Error).message}); identical calls wait for it to lapse.`);
			}
		}
		await this.countMiss(plan, null);
		this.host.report(this.missReport(key, plan, 'not_stored', reason, warnings, null), error ?? new Error(reason));
	}

	private async settleAnswer(key: PromptHash | null, plan: Exclude<Plan, { kind: 'hit' }>, generations: Generation[], llmOutput: Record<string, unknown> | null): Promise<void> {
		const warnings: string[] = [];
		let outcome: CallOutcome = plan.kind === 'compute' ? 'not_stored' : 'uncached';
		let reason = plan.reason;
		const why = uncacheable(generations);
		const cached = plan.kind === 'uncached' ? plan.shadow?.cached : undefined;
		const sameAsCached = cached !== undefined && !why ? answerDigest(generations[0].text) === cached : null;
		if (plan.kind === 'compute' && key) {
			let entry: StoredEntry | null = null;
			let problem = why;
			if (!problem) {
				const g = generations[0];
				const message = storedMessage(g.message);
				const usage = (g.message.usage_metadata as Record<string, unknown> | undefined) ?? (isObject(llmOutput?.tokenUsage) ? llmOutput.tokenUsage : null);
				const split = usageSplit(usage);
				const response: ChatAnswer = { kind: 'chat', message, text: g.text ?? '', generationInfo: g.generationInfo ?? null, llmOutput };
				entry = {
					v: 1,
					response,
					usage: usage as StoredEntry['usage'],
					tokens: typeof usage?.total_tokens === 'number' ? usage.total_tokens : typeof usage?.totalTokens === 'number' ? usage.totalTokens : (split.input ?? 0) + (split.output ?? 0),
					model: key.envelope.model,
					storedAt: new Date().toISOString(),
				};
				const bytes = Buffer.byteLength(JSON.stringify(entry), 'utf8');
				if (bytes > this.settings.maxBytes) problem = `the answer is ${Math.ceil(bytes / 1024)} KB, more than the ${Math.round(this.settings.maxBytes / 1024)} KB "Max Answer Size (KB)" allows`;
			}
			try {
				const ledger = await this.host.ledger();
				const row = { namespace: this.settings.namespace, key: key.hash, step: CHAT_CACHE_STEP, fence: plan.fence };
				const [written] = problem
					? await ledger.record([{ ...row, status: 'failed_retryable', result: null }], { ttlMs: 60_000, holder: plan.holder })
					: await ledger.record([{ ...row, status: 'completed', result: entry }], { ttlMs: this.settings.ttlMs, holder: plan.holder });
				if (problem) reason = problem;
				else if (written.kind === 'written') {
					outcome = 'stored';
					reason = plan.shadow ? 'Shadow mode: not cached yet; the answer was stored' : 'not cached yet; the answer was stored';
				} else reason = 'the reservation lapsed before the model answered (raise "Answer Expected Within"); another call\'s answer is kept';
			} catch (e) {
				const refused = refusedByLedger(e);
				if (refused || this.settings.failClosed) throw this.host.stopError(e, refused);
				warnings.push(`The answer could not be stored (the ledger did not answer: ${(e as Error).message}); the agent got it anyway.`);
				reason = 'the ledger did not answer; the answer was not stored';
			}
		} else if (why) {
			reason = `${plan.reason}; ${why}`;
		}
		await this.countMiss(plan, sameAsCached);
		this.host.report(this.missReport(key, plan, outcome, reason, warnings, sameAsCached));
	}

	private missReport(key: PromptHash | null, plan: Exclude<Plan, { kind: 'hit' }>, outcome: CallOutcome, reason: string, warnings: string[], sameAsCached: boolean | null): CallReport {
		const warning = [plan.kind === 'uncached' ? plan.warning : undefined, ...warnings].filter((w): w is string => !!w);
		for (const w of warning) this.host.warn(w);
		const shadow = plan.shadow ? { wouldHit: plan.shadow.wouldHit, ...(sameAsCached !== null ? { sameAsCached } : {}) } : undefined;
		return {
			outcome,
			reason,
			promptHash: key?.hash ?? null,
			namespace: this.settings.namespace,
			model: key?.envelope.model ?? null,
			keyReceipt: key?.receipt ?? null,
			...(shadow ? { shadow } : {}),
			...(warning.length ? { warning: warning.join(' ') } : {}),
		};
	}

	private async countMiss(plan: Exclude<Plan, { kind: 'hit' }>, sameAsCached: boolean | null): Promise<void> {
		// The call already warned that the ledger is down: a second warning about its counts says nothing new.
		if (plan.kind === 'uncached' && plan.ledgerDown) return;
		const bypassed = plan.kind === 'uncached' && plan.bypassed === true;
		await this.count({
			shadowCompared: sameAsCached === null ? 0 : 1,
			shadowDiffered: sameAsCached === false ? 1 : 0,
			lookups: 1,
			misses: 1,
			bypassed: bypassed ? 1 : 0,
			refreshed: this.settings.force && plan.kind === 'compute' && plan.reason === 'Force Refresh' ? 1 : 0,
			shadowLookups: plan.shadow ? 1 : 0,
			shadowWouldHit: plan.shadow?.wouldHit ? 1 : 0,
		});
	}

	/** Adds to the daily counters Get Stats reads; a failure is a warning, never the call's failure. */
	private async count(counts: Record<string, number>): Promise<void> {
		if (!this.settings.recordStats) return;
		const nonZero = Object.fromEntries(Object.entries(counts).filter(([, n]) => n !== 0));
		if (Object.keys(nonZero).length === 0) return;
		try {
			const ledger = await this.host.ledger();
			const counts = [{ namespace: this.settings.namespace, counts: nonZero }];
			if (this.host.countLater) this.host.countLater(ledger, counts);
			else await ledger.addCounts(counts);
		} catch {
			this.host.warn('The cache stats of a model call could not be counted (the ledger did not answer). The call itself is fine.');
		}
	}
}
