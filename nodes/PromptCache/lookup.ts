import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

import { leaseLive } from '../../lib/ledger/claims';
import { LedgerInputError, LedgerSettingError } from '../../lib/ledger/errors';
import { inputFromRequestBody, promptHash, type PromptEnvelope, type PromptInput } from '../../lib/ledger/promptHash';
import type { ClaimOptions, ClaimOutcome, ClaimRequest, Ledger, LedgerRecord } from '../../lib/ledger/types';
import { failedItem, toNodeError } from '../../lib/n8n/errors';
import { itemWithFacts, withFactsField } from '../../lib/n8n/facts';
import { parameterSource, type ValueSource } from '../../lib/n8n/keySource';
import { deferCounts } from '../../lib/n8n/countBuffer';
import { openLedger } from '../../lib/n8n/ledgerAccess';
import { namespaceReader, readDurationOption } from '../../lib/n8n/scope';
import { ANSWER_WITHIN, readPrices, WAIT_UP_TO, type Prices } from './options';
import {
	CACHE_STEP,
	cacheFacts,
	holderOf,
	isObject,
	isStoredEntry,
	seconds,
	skippedLookup,
	type StoredEntry,
} from './common';
import { answerDigest, responseText, usageSplit, usageTokens } from './responseShapes';

const HIT = 0;
const MISS = 1;

interface LookupConfig {
	namespace: (itemIndex: number, item: INodeExecutionData) => string;
	input: (itemIndex: number, item: INodeExecutionData) => PromptInput;
	forceRefresh: (itemIndex: number, item: INodeExecutionData) => boolean;
	skipCache: (itemIndex: number, item: INodeExecutionData) => boolean;
	/** Never answer from the cache; record what would have been a Hit. */
	shadow: boolean;
	prices: Prices | null;
	engineEvaluated: boolean;
	hashOnly: boolean;
	whileComputing: 'wait' | 'miss';
	waitMs: number;
	leaseMs: number;
	recordStats: boolean;
	failOpen: boolean;
}

/** One item that could be hashed. */
interface Row {
	index: number;
	namespace: string;
	hash: string;
	envelope: PromptEnvelope;
	receipt: string[];
	force: boolean;
	/** "Skip the Cache" is on for this item: no read, no write, no reservation. */
	skip: boolean;
}

/** What shadow mode found for an item that it sent to Miss. */
interface ShadowFinding {
	/** A normal Lookup would have answered this item from the cache (or waited for another run's answer). */
	wouldHit: boolean;
	/** Digest of the cached answer, for Store to compare the fresh one with. */
	cachedAnswer?: string;
}

type Fate =
	| { kind: 'hit'; record: LedgerRecord; waitedMs: number | null }
	| { kind: 'miss'; record: LedgerRecord | null; computing: boolean; reason: string; shadow?: ShadowFinding; bypassed?: boolean };

/** Model, system prompt and prompt are text; a number from an expression is read as text. */
const asText = (value: unknown) => (typeof value === 'number' || typeof value === 'boolean' ? String(value) : value);

const toFlag = (value: unknown) => value === true || value === 'true' || value === 1;

/** What a hit did not spend again: tokens by the stored usage, and money where prices are set. */
interface Saving {
	tokens: number;
	inputTokens: number | null;
	outputTokens: number | null;
	money: number | null;
}

function savingOf(entry: StoredEntry, prices: Prices | null): Saving {
	const split = usageSplit(entry.usage);
	const tokens = entry.tokens ?? usageTokens(entry.usage) ?? (split.input ?? 0) + (split.output ?? 0);
	const money = prices && (split.input !== null || split.output !== null) ? ((split.input ?? 0) * prices.input + (split.output ?? 0) * prices.output) / 1000 : null;
	return { tokens, inputTokens: split.input, outputTokens: split.output, money };
}

/** The request itself, which has its own fields. */
const PROMPT_PARTS = new Set(['model', 'messages', 'system', 'prompt', 'input', 'instructions', 'contents', 'systemInstruction']);

/** Parsed JSON text, or undefined when it does not parse. */
function parseJson(text: string): unknown {
	try {
		return JSON.parse(text);
	} catch {
		return undefined;
	}
}

/** The "Model Parameters" collection under the API's own names. */
function apiParameters(collection: IDataObject): Record<string, unknown> {
	const names: Record<string, string> = {
		temperature: 'temperature',
		topP: 'top_p',
		topK: 'top_k',
		maxTokens: 'max_tokens',
		seed: 'seed',
		frequencyPenalty: 'frequency_penalty',
		presencePenalty: 'presence_penalty',
		responseFormat: 'response_format',
		reasoningEffort: 'reasoning_effort',
		tools: 'tools',
	};
	const out: Record<string, unknown> = {};
	for (const [name, value] of Object.entries(collection)) {
		if (name === 'otherParameters') continue;
		out[names[name] ?? name] = value;
	}
	let other: unknown = collection.otherParameters;
	if (typeof other === 'string') {
		other = other.trim() === '' ? {} : parseJson(other);
		if (other === undefined) throw new LedgerInputError('"Other Parameters (JSON)" is not valid JSON', 'Write an object such as {"stop": ["END"]}.');
	}
	if (other !== undefined && other !== null) {
		if (!isObject(other)) throw new LedgerInputError('"Other Parameters (JSON)" must be an object', 'Write an object such as {"stop": ["END"]}.');
		for (const [name, value] of Object.entries(other)) {
			if (PROMPT_PARTS.has(name)) {
				throw new LedgerInputError(
					`"Other Parameters (JSON)" cannot set "${name}"`,
					'Use the Model, System Prompt, Prompt or Messages fields for the request itself; "Other Parameters (JSON)" is for settings such as {"stop": ["END"]}.',
				);
			}
			if (name in out && JSON.stringify(out[name]) !== JSON.stringify(value)) {
				throw new LedgerInputError(`The parameter "${name}" is set twice with different values`, `Set ${name} either in its own field or in "Other Parameters (JSON)", not both.`);
			}
			out[name] = value;
		}
	}
	return out;
}

/** Model parameters: read once when they are constants, per item only when one holds an expression. */
function parametersReader(ctx: IExecuteFunctions): { read: (itemIndex: number) => Record<string, unknown>; engine: boolean } {
	const raw = ctx.getNodeParameter('modelParameters', 0, {}, { rawExpressions: true }) as IDataObject;
	const dynamic = Object.values(raw ?? {}).some((v) => typeof v === 'string' && v.startsWith('='));
	if (!dynamic) {
		const constant = apiParameters(ctx.getNodeParameter('modelParameters', 0, {}) as IDataObject);
		return { read: () => constant, engine: false };
	}
	return { read: (i) => apiParameters(ctx.getNodeParameter('modelParameters', i, {}) as IDataObject), engine: true };
}

function readConfig(ctx: IExecuteFunctions): LookupConfig {
	const options = ctx.getNodeParameter('options', 0, {}) as IDataObject;
	const ignore = String(options.ignoreParameters ?? '')
		.split(',')
		.map((s) => s.trim())
		.filter(Boolean);
	const source = ctx.getNodeParameter('promptSource', 0) as string;
	const sources: ValueSource[] = [];
	const from = (name: string) => {
		const s = parameterSource(ctx, name);
		sources.push(s);
		return s;
	};
	let input: LookupConfig['input'];
	let engine = false;
	if (source === 'body') {
		const body = from('requestBody');
		input = (i, item) => inputFromRequestBody(body.read(i, item), ignore);
	} else if (source === 'text' || source === 'messages') {
		const model = from('model');
		const parameters = parametersReader(ctx);
		engine = parameters.engine;
		if (source === 'text') {
			const system = from('systemPrompt');
			const prompt = from('prompt');
			input = (i, item) => ({
				model: asText(model.read(i, item)),
				system: asText(system.read(i, item)),
				prompt: asText(prompt.read(i, item)) ?? '',
				parameters: parameters.read(i),
				ignore,
			});
		} else {
			const system = from('systemPrompt');
			const messages = from('messages');
			input = (i, item) => ({
				model: asText(model.read(i, item)),
				system: asText(system.read(i, item)),
				messages: messages.read(i, item) ?? [],
				parameters: parameters.read(i),
				ignore,
			});
		}
	} else {
		throw new LedgerInputError(`Unknown prompt source "${source}"`);
	}
	const force = parameterSource(ctx, 'options.forceRefresh', false);
	const skip = parameterSource(ctx, 'options.skipCache', false);
	const whileComputing = (options.whileComputing ?? 'wait') as LookupConfig['whileComputing'];
	return {
		namespace: namespaceReader(ctx, 'options'),
		input,
		forceRefresh: (i, item) => toFlag(force.read(i, item)),
		skipCache: (i, item) => toFlag(skip.read(i, item)),
		shadow: options.shadowMode === true,
		prices: readPrices(options),
		engineEvaluated: engine || sources.some((s) => s.kind === 'engine'),
		hashOnly: options.hashOnly === true,
		whileComputing,
		waitMs: whileComputing === 'wait' ? readDurationOption(ctx, WAIT_UP_TO) : 0,
		leaseMs: readDurationOption(ctx, ANSWER_WITHIN),
		recordStats: options.recordStats !== false,
		failOpen: options.failOpen === true,
	};
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs `fn` over `list` with at most `limit` calls in flight, results in order. */
async function mapLimit<T, R>(list: T[], limit: number, fn: (value: T) => Promise<R>): Promise<R[]> {
	const results = new Array<R>(list.length);
	let next = 0;
	const worker = async () => {
		while (next < list.length) {
			const k = next++;
			results[k] = await fn(list[k]);
		}
	};
	await Promise.all(Array.from({ length: Math.min(limit, list.length) }, worker));
	return results;
}

const rowId = (namespace: string, hash: string) => `${namespace}\u0000${hash}`;

/** Whether a run holding reservations since `held.since` may wait for this one. */
const mayWait = (record: LedgerRecord, held: { since: number | null }) =>
	held.since === null || record.updatedAt.getTime() < held.since;

const NO_WAIT_WHILE_HOLDING =
	'Another run reserved this prompt after this run reserved others of its batch; waiting could leave two runs waiting on each other, so this run did not wait';

/**
 * Single flight: items whose prompt another run is asking the model about right now wait for
 * that run's Store, polling the entry. When the other run gives up (its reservation lapses, or its
 * AI node failed), one waiter takes the prompt over through an ordinary atomic claim, so at most
 * one run asks the model at a time. Whatever is still waiting at the deadline goes to Miss.
 *
 * A run that holds reservations itself (its Misses, answered only after this node returns) and
 * waits for another run's could wait on a run that waits on it. So a run waits only for a
 * reservation made strictly before every reservation it holds (times from the ledger's server
 * clock, as stored on the rows). Along a chain of runs waiting on each other, the earliest
 * reservation of each run is then strictly earlier than the previous run's, so the chain can
 * never close into a circle. Runs that claimed in one batch wait for every reservation that was
 * there before them, so single flight is kept in the usual cases; a run holding nothing (the
 * one-item run) waits for anything.
 */
async function waitForOthers(
	ledger: Ledger,
	waiting: Map<string, { namespace: string; hash: string; rows: number[] }>,
	settle: (rows: number[], fate: Fate) => void,
	claimOptions: ClaimOptions,
	waitMs: number,
	held: { since: number | null },
): Promise<void> {
	const started = Date.now();
	const deadline = started + waitMs;
	// Short first polls (a model answers in about a second), then at most four per second per prompt.
	let delay = 25;
	while (waiting.size > 0) {
		const left = deadline - Date.now();
		if (left <= 0) break;
		await sleep(Math.min(delay, left));
		delay = Math.min(Math.round(delay * 1.5), 250);
		const entries = [...waiting.entries()];
		const found = await mapLimit(entries, 8, ([, w]) => ledger.get(w.namespace, w.hash));
		const retake: Array<[string, { namespace: string; hash: string; rows: number[] }]> = [];
		entries.forEach((entry, k) => {
			const record = found[k].find((r) => r.step === CACHE_STEP);
			if (record && record.status === 'completed' && isStoredEntry(record.result)) {
				waiting.delete(entry[0]);
				settle(entry[1].rows, { kind: 'hit', record, waitedMs: Date.now() - started });
			} else if (!record || !leaseLive(record)) {
				retake.push(entry);
			} else if (!mayWait(record, held)) {
				// Taken over by a run that reserved after this one: waiting could close a circle.
				waiting.delete(entry[0]);
				settle(entry[1].rows, { kind: 'miss', record, computing: false, reason: NO_WAIT_WHILE_HOLDING });
			}
		});
		if (retake.length === 0) continue;
		const outcomes = await ledger.claim(
			retake.map(([, w]) => ({ namespace: w.namespace, key: w.hash, step: CACHE_STEP, fingerprint: null })),
			claimOptions,
		);
		outcomes.forEach((outcome, k) => {
			const [id, w] = retake[k];
			if (outcome.kind === 'in_progress' && outcome.record.leaseHolder !== claimOptions.holder) return;
			waiting.delete(id);
			if (outcome.kind === 'claimed' || outcome.kind === 'in_progress') {
				held.since = Math.min(held.since ?? Infinity, outcome.record.updatedAt.getTime());
				settle(w.rows, { kind: 'miss', record: outcome.record, computing: true, reason: 'The run that was asking the model gave up; this run asks it now' });
			} else if (outcome.kind === 'duplicate' && isStoredEntry(outcome.record.result)) {
				settle(w.rows, { kind: 'hit', record: outcome.record, waitedMs: Date.now() - started });
			} else {
				settle(w.rows, { kind: 'miss', record: outcome.kind === 'batch_duplicate' ? null : outcome.record, computing: false, reason: 'The stored entry has no answer' });
			}
		});
	}
}

function hitItem(index: number, row: Row, record: LedgerRecord, waitedMs: number | null, prices: Prices | null): { item: INodeExecutionData; saving: Saving } {
	const entry = record.result as StoredEntry;
	const storedAt = typeof entry.storedAt === 'string' ? new Date(entry.storedAt) : record.updatedAt;
	const saving = savingOf(entry, prices);
	const facts = cacheFacts('hit', row.namespace, row.hash, record, {
		storedAt: storedAt.toISOString(),
		ageSeconds: seconds(Date.now() - storedAt.getTime()),
		model: entry.model ?? row.envelope.model,
		usage: entry.usage ?? null,
		tokensSaved: saving.tokens,
		inputTokensSaved: saving.inputTokens,
		outputTokensSaved: saving.outputTokens,
		moneySaved: saving.money,
		text: responseText(entry.response),
		keyReceipt: row.receipt,
		...(waitedMs !== null ? { waitedMs } : {}),
	});
	// The answer looks exactly like the AI node's output, so both branches can meet downstream.
	const body = isObject(entry.response) ? (entry.response as IDataObject) : { response: entry.response as IDataObject };
	return { item: { json: withFactsField(body, facts), pairedItem: { item: index } }, saving };
}

function missItem(item: INodeExecutionData, index: number, row: Row, fate: Extract<Fate, { kind: 'miss' }>, hashOnly: boolean): INodeExecutionData {
	const facts = cacheFacts('miss', row.namespace, row.hash, fate.record, {
		computing: fate.computing,
		reason: fate.reason,
		model: row.envelope.model,
		hashOnly,
		keyReceipt: row.receipt,
		...(fate.bypassed ? { bypassed: true } : {}),
		...(fate.shadow ? { shadow: { ...fate.shadow } } : {}),
		...(hashOnly ? {} : { prompt: row.envelope as unknown as IDataObject }),
	});
	return itemWithFacts(item, index, facts);
}

export async function executeLookup(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	const items = this.getInputData();
	const node = this.getNode();
	const continueOnFail = this.continueOnFail();
	let config: LookupConfig;
	try {
		config = readConfig(this);
	} catch (error) {
		throw toNodeError(node, error);
	}
	const outputs: INodeExecutionData[][] = [[], []];
	// Items that cannot be hashed never reach Miss (and the paid model call): with "continue",
	// they leave on Hit carrying their error.
	const failItem = (index: number, error: unknown) => {
		const nodeError = toNodeError(node, error, index);
		if (!continueOnFail) throw nodeError;
		outputs[HIT].push(failedItem(node, items[index], index, nodeError));
	};

	const rows: Row[] = [];
	for (let i = 0; i < items.length; i++) {
		try {
			const item = items[i];
			const namespace = config.namespace(i, item);
			const { hash, envelope, receipt } = promptHash(config.input(i, item));
			rows.push({ index: i, namespace, hash, envelope, receipt, force: config.forceRefresh(i, item), skip: config.skipCache(i, item) });
		} catch (error) {
			failItem(i, error);
		}
	}
	if (config.engineEvaluated && items.length >= 1000) {
		this.addExecutionHints({
			message: `The prompt fields are evaluated by n8n for each of ${items.length} items, which is slow. An expression that reads only $json, $('Node').item and $itemIndex is read directly or evaluated for many items at once; one that uses $input, arrow functions, template literals or the like, and any expression in Model Parameters, is evaluated per item.`,
			location: 'outputPane',
		});
	}
	if (rows.length === 0) return outputs;
	const skipped = skippedLookup(this, items, rows, config.hashOnly, outputs);
	if (skipped) return skipped;

	const holder = holderOf(this);
	const claimOptions: ClaimOptions = { mode: 'lease', holder, leaseMs: config.leaseMs, ttlMs: config.leaseMs };
	const fates = new Array<Fate | undefined>(rows.length);
	// Items with "Skip the Cache" go to Miss untouched: no read, no reservation, nothing stored.
	const cached: number[] = [];
	rows.forEach((row, r) => {
		if (row.skip) fates[r] = { kind: 'miss', record: null, computing: false, reason: 'Skip the Cache is on for this item', bypassed: true };
		else cached.push(r);
	});
	let ledger: Ledger | null = null;
	try {
		if (cached.length > 0) {
			ledger = await openLedger(this);
			await lookUp(ledger, rows, cached, fates, config, claimOptions);
		}
	} catch (error) {
		// A ledger refused by a setting (a Redis that can lose keys, Built-in in queue mode) is not down: it fails closed.
		if (config.failOpen && !(error instanceof LedgerSettingError)) {
			this.addExecutionHints({
				message: 'The ledger could not be reached, and "Go to Miss if the Ledger Is Down" is on: every item went to Miss without a cache check.',
				type: 'warning',
				location: 'outputPane',
			});
			for (const row of rows) {
				const facts = cacheFacts('unverified', row.namespace, row.hash, null, { computing: false, model: row.envelope.model, hashOnly: config.hashOnly, keyReceipt: row.receipt });
				outputs[MISS].push({ json: withFactsField(items[row.index].json, facts), pairedItem: { item: row.index } });
			}
			return outputs;
		}
		if (!continueOnFail) throw toNodeError(node, error);
		for (const row of rows) failItem(row.index, error);
		return outputs;
	}

	const counts = new Map<string, Record<string, number>>();
	rows.forEach((row, r) => {
		const fate = fates[r] as Fate;
		const c = counts.get(row.namespace) ?? {};
		counts.set(row.namespace, c);
		const add = (name: string, n = 1) => (c[name] = (c[name] ?? 0) + n);
		add('lookups');
		if (row.force) add('refreshed');
		if (fate.kind === 'hit') {
			const hit = hitItem(row.index, row, fate.record, fate.waitedMs, config.prices);
			outputs[HIT].push(hit.item);
			add('hits');
			add('tokensSaved', hit.saving.tokens);
			add('inputTokensSaved', hit.saving.inputTokens ?? 0);
			add('outputTokensSaved', hit.saving.outputTokens ?? 0);
			add('moneySaved', hit.saving.money ?? 0);
		} else {
			outputs[MISS].push(missItem(items[row.index], row.index, row, fate, config.hashOnly));
			add('misses');
			if (fate.bypassed) add('bypassed');
			if (fate.shadow) {
				add('shadowLookups');
				if (fate.shadow.wouldHit) add('shadowWouldHit');
			}
		}
	});

	if (config.recordStats) {
		// Added to today's counts off the answer's path: with other runs' counts, in one upsert, at
		// the latest when this execution ends (lib/n8n/countBuffer.ts).
		try {
			ledger ??= await openLedger(this);
			deferCounts(this, ledger, [...counts].map(([namespace, c]) => ({ namespace, counts: nonZero(c) })));
		} catch {
			this.addExecutionHints({
				message: 'The hits and misses of this run could not be added to the cache stats (the ledger did not answer). The lookups themselves are fine.',
				type: 'warning',
				location: 'outputPane',
			});
		}
	}
	return outputs;
}

const nonZero = (counts: Record<string, number>) => Object.fromEntries(Object.entries(counts).filter(([, n]) => n !== 0));

/**
 * Claims the `cached` rows (reserving the prompts nobody has answered), waits for other runs'
 * answers where allowed, and settles each row's fate. In shadow mode nothing is answered from the
 * cache: what would have been a Hit goes to Miss with what the cache holds, for Store to compare.
 */
async function lookUp(
	ledger: Ledger,
	rows: Row[],
	cached: number[],
	fates: Array<Fate | undefined>,
	config: LookupConfig,
	claimOptions: ClaimOptions,
): Promise<void> {
	const holder = claimOptions.holder;
	const forced = cached.filter((r) => rows[r].force);
	if (forced.length > 0) {
		// Force refresh: mark the stored answer as failed, which makes it claimable again. A
		// reservation held by another run is left alone (that run is fetching a fresh answer).
		await ledger.record(
			forced.map((r) => ({ namespace: rows[r].namespace, key: rows[r].hash, step: CACHE_STEP, status: 'failed_retryable' as const, result: null })),
			{ ttlMs: config.leaseMs, holder },
		);
	}
	// A settled entry with an answer is a Hit whatever a claim would add: read it (one probe, no
	// write), and claim only the rest, as before.
	let toClaim = cached;
	const unforced = cached.filter((r) => !rows[r].force);
	if (ledger.peek && unforced.length > 0) {
		const found = await ledger.peek(unforced.map((r) => ({ namespace: rows[r].namespace, key: rows[r].hash, step: CACHE_STEP })));
		unforced.forEach((r, k) => {
			const record = found[k];
			if (record && (record.status === 'completed' || record.status === 'needs_review') && isStoredEntry(record.result)) {
				fates[r] = { kind: 'hit', record, waitedMs: null };
			}
		});
		toClaim = cached.filter((r) => fates[r] === undefined);
		if (toClaim.length === 0) {
			if (config.shadow) for (const r of cached) fates[r] = shadowFate(fates[r] as Fate);
			return;
		}
	}
	const requests: ClaimRequest[] = toClaim.map((r) => ({ namespace: rows[r].namespace, key: rows[r].hash, step: CACHE_STEP, fingerprint: null }));
	const outcomes: ClaimOutcome[] = await ledger.claim(requests, claimOptions);

	const waiting = new Map<string, { namespace: string; hash: string; rows: number[] }>();
	const duplicates: Array<[number, number]> = [];
	const busy: Array<[number, Extract<ClaimOutcome, { kind: 'in_progress' }>]> = [];
	outcomes.forEach((outcome, k) => {
		const r = toClaim[k];
		const row = rows[r];
		switch (outcome.kind) {
			case 'claimed':
				fates[r] = {
					kind: 'miss',
					record: outcome.record,
					computing: true,
					reason: row.force
						? 'Force refresh'
						: outcome.previousStatus === 'in_progress'
							? 'Not cached; the run that reserved this prompt did not store an answer in time'
							: 'Not cached',
				};
				break;
			case 'duplicate':
				fates[r] = isStoredEntry(outcome.record.result)
					? { kind: 'hit', record: outcome.record, waitedMs: null }
					: { kind: 'miss', record: outcome.record, computing: false, reason: 'The stored entry has no answer' };
				break;
			case 'in_progress':
				if (outcome.record.leaseHolder === holder) {
					fates[r] = { kind: 'miss', record: outcome.record, computing: true, reason: 'Already reserved by this execution' };
				} else {
					busy.push([r, outcome]);
				}
				break;
			case 'mismatch':
				fates[r] = { kind: 'miss', record: outcome.record, computing: false, reason: 'The stored entry does not match' };
				break;
			case 'batch_duplicate':
				duplicates.push([r, toClaim[outcome.firstIndex]]);
				break;
		}
	});
	const held = { since: null as number | null };
	for (const fate of fates) {
		if (fate?.kind === 'miss' && fate.computing && fate.record) held.since = Math.min(held.since ?? Infinity, fate.record.updatedAt.getTime());
	}
	for (const [r, outcome] of busy) {
		const row = rows[r];
		const id = rowId(row.namespace, row.hash);
		if (config.shadow) {
			fates[r] = {
				kind: 'miss',
				record: outcome.record,
				computing: false,
				reason: 'Shadow mode: another run is asking the model for this prompt right now',
				shadow: { wouldHit: config.whileComputing === 'wait' },
			};
		} else if (config.whileComputing !== 'wait') {
			fates[r] = { kind: 'miss', record: outcome.record, computing: false, reason: 'Another run is asking the model for this prompt right now' };
		} else if (!mayWait(outcome.record, held)) {
			fates[r] = { kind: 'miss', record: outcome.record, computing: false, reason: NO_WAIT_WHILE_HOLDING };
		} else {
			const w = waiting.get(id) ?? { namespace: row.namespace, hash: row.hash, rows: [] };
			w.rows.push(r);
			waiting.set(id, w);
		}
	}
	const settle = (list: number[], fate: Fate) => list.forEach((r) => (fates[r] = fate));
	if (waiting.size > 0) {
		await waitForOthers(ledger, waiting, settle, claimOptions, config.waitMs, held);
		for (const w of waiting.values()) {
			settle(w.rows, {
				kind: 'miss',
				record: null,
				computing: false,
				reason: `Waited ${seconds(config.waitMs)} s for another run to store its answer; it has not yet`,
			});
		}
	}
	if (config.shadow) {
		for (const r of cached) fates[r] = fates[r] && shadowFate(fates[r] as Fate);
	}
	// Repeats of a prompt inside this batch share the first one's fate.
	for (const [r, first] of duplicates) fates[r] = fates[first];
}

/** Shadow mode: a Hit becomes a Miss that says it would have hit, with the cached answer's digest. */
function shadowFate(fate: Fate): Fate {
	if (fate.kind === 'hit') {
		return {
			kind: 'miss',
			record: fate.record,
			computing: false,
			reason: 'Shadow mode: the cache has an answer (this would have been a Hit); the model is asked anyway and Store compares the answers',
			shadow: { wouldHit: true, cachedAnswer: answerDigest((fate.record.result as StoredEntry).response) },
		};
	}
	return fate.shadow ? fate : { ...fate, shadow: { wouldHit: false } };
}
