import type {
	IDataObject,
	IExecuteFunctions,
	INodeExecutionData,
	IPairedItemData,
	ISourceData,
	IWorkflowDataProxyData,
	NodeTypeAndVersion,
} from 'n8n-workflow';

import { LedgerInputError } from '../../lib/ledger/errors';
import type { LedgerRecord, RecordRequest } from '../../lib/ledger/types';
import { failedItem, toNodeError } from '../../lib/n8n/errors';
import { FACTS_FIELD, itemWithFacts } from '../../lib/n8n/facts';
import { formatPath, parameterSource, parseFieldPath, readPath, type PathSegment } from '../../lib/n8n/keySource';
import { openLedger } from '../../lib/n8n/ledgerAccess';
import { namespaceReader, readDurationOption } from '../../lib/n8n/scope';
import { KEEP_ANSWERS } from './options';
import {
	CACHE_STEP,
	cacheFacts,
	factsOfItem,
	holderOf,
	isObject,
	isStoredEntry,
	skippedStore,
	type StoredEntry,
} from './common';
import { answerDigest, looksLikeError, responseModel, responseText, responseUsage, usageTokens } from './responseShapes';

const HASH = /^[0-9a-f]{64}$/;

/** Where an answer goes: the prompt it answers, and who may write it. */
interface Target {
	namespace: string;
	hash: string;
	/** The reservation this answer fulfils, when the Lookup that missed holds it. */
	holder: string | null;
	/** That reservation's fencing token: the answer is stored only while the reservation stands. */
	fence: number | null;
	/** The Lookup sent this item to Hit: there is nothing to store. */
	fromHit: boolean;
	/** "Skip the Cache" was on for this item in the Lookup: nothing is stored. */
	bypassed: boolean;
	/** Shadow mode found a cached answer: its digest, to compare the fresh answer with (nothing is stored). */
	shadowAnswer: string | null;
	/** The Lookup ran in shadow mode: a fresh answer that another run stored first is compared with it. */
	shadow: boolean;
	keyReceipt: string[] | null;
	model: string | null;
	prompt: IDataObject | null;
}

interface StoreConfig {
	target: (itemIndex: number, item: INodeExecutionData) => Target;
	ttlMs: number;
	responsePath: PathSegment[] | null;
	maxBytes: number;
}

const isLookupNode = (n: NodeTypeAndVersion) =>
	!n.disabled &&
	(n.type === 'promptCache' || n.type.endsWith('.promptCache')) &&
	((n.parameters?.operation as string | undefined) ?? 'lookup') === 'lookup';

/** Prompt Cache Lookup nodes upstream of this one, nearest first (graph distance). */
function lookupCandidates(ctx: IExecuteFunctions, named: string): string[] {
	if (named) return [named];
	const self = ctx.getNode().name;
	const all = ctx.getParentNodes(self, { includeNodeParameters: true }).filter(isLookupNode);
	const remaining = new Set(all.map((n) => n.name));
	const ordered: string[] = [];
	for (let depth = 1; remaining.size > 0 && depth <= 1000; depth++) {
		for (const n of ctx.getParentNodes(self, { depth })) if (remaining.delete(n.name)) ordered.push(n.name);
	}
	return ordered;
}

const pairedOf = (p: INodeExecutionData['pairedItem']): IPairedItemData[] =>
	p === undefined || p === null ? [] : (Array.isArray(p) ? p : [p]).map((x) => (typeof x === 'number' ? { item: x } : x));

/**
 * Follows an item's pairedItem lineage back to a Lookup's output item, through nodes that
 * replaced its JSON (the AI node does), with n8n's own paired-item resolution: one data proxy
 * per run, no expression evaluated per item.
 */
function lineageFinder(ctx: IExecuteFunctions, candidates: string[]) {
	let proxy: IWorkflowDataProxyData | null = null;
	let sources: ISourceData[] | null = null;
	return (item: INodeExecutionData): IDataObject | null => {
		const paired = pairedOf(item.pairedItem);
		if (paired.length === 0 || candidates.length === 0) return null;
		proxy ??= ctx.getWorkflowDataProxy(0);
		sources ??= ctx.getExecuteData()?.source?.main?.filter((s): s is ISourceData => !!s) ?? [];
		for (const name of candidates) {
			for (const p of paired) {
				const from = p.sourceOverwrite ?? sources[p.input ?? 0] ?? sources[0] ?? null;
				try {
					const origin = proxy.$getPairedItem(name, from, p);
					const facts = origin ? lookupFacts(factsOfItem(origin)) : null;
					if (facts) return facts;
				} catch {
					// Not this Lookup (or the trail breaks here); try the next one.
				}
			}
		}
		return null;
	};
}

/** The facts a Lookup put on a Miss (or Hit) item, when these are Prompt Cache facts. */
function lookupFacts(facts: IDataObject | null): IDataObject | null {
	if (!facts || facts.step !== CACHE_STEP || typeof facts.promptHash !== 'string' || typeof facts.namespace !== 'string') return null;
	return facts;
}

function targetFromFacts(facts: IDataObject): Target {
	return {
		namespace: facts.namespace as string,
		hash: facts.promptHash as string,
		holder: facts.computing === true && typeof facts.leaseHolder === 'string' ? facts.leaseHolder : null,
		fence: facts.computing === true && typeof facts.fence === 'number' ? facts.fence : null,
		fromHit: facts.outcome === 'hit',
		bypassed: facts.bypassed === true,
		shadowAnswer: isObject(facts.shadow) && typeof facts.shadow.cachedAnswer === 'string' ? facts.shadow.cachedAnswer : null,
		shadow: isObject(facts.shadow),
		keyReceipt: Array.isArray(facts.keyReceipt) ? (facts.keyReceipt as string[]) : null,
		model: typeof facts.model === 'string' ? facts.model : null,
		prompt: isObject(facts.prompt) ? (facts.prompt as IDataObject) : null,
	};
}

function readConfig(ctx: IExecuteFunctions): StoreConfig {
	const options = ctx.getNodeParameter('storeOptions', 0, {}) as IDataObject;
	const field = String(options.responseField ?? '').trim();
	const kb = options.maxResponseKb === undefined ? 256 : Number(options.maxResponseKb);
	if (!Number.isFinite(kb) || kb <= 0) {
		throw new LedgerInputError(`The max answer size must be a positive number of KB, not ${JSON.stringify(options.maxResponseKb)}`);
	}
	const hashSource = ctx.getNodeParameter('hashSource', 0, 'lookup') as string;
	let target: StoreConfig['target'];
	if (hashSource === 'field') {
		const hash = parameterSource(ctx, 'promptHash');
		const namespace = namespaceReader(ctx);
		target = (i, item) => {
			const value = hash.read(i, item);
			const text = typeof value === 'string' ? value.trim().toLowerCase() : value;
			if (typeof text !== 'string' || !HASH.test(text)) {
				throw new LedgerInputError(
					`The prompt hash ${value === undefined ? 'is missing' : `${JSON.stringify(value)} is not a prompt hash`} on this item`,
					'Map Prompt Hash to the 64-character hash the Lookup put on its Miss items, {{ $json.idempotency.promptHash }}, carried along to this node.',
				);
			}
			return { namespace: namespace(i, item), hash: text, holder: null, fence: null, fromHit: false, bypassed: false, shadowAnswer: null, shadow: false, keyReceipt: null, model: null, prompt: null };
		};
	} else {
		const named = String(ctx.getNodeParameter('lookupNode', 0, '') ?? '').trim();
		let candidates: string[] | null = null;
		let find: ReturnType<typeof lineageFinder> | null = null;
		target = (_i, item) => {
			// The item may still carry the Lookup's facts (when the AI node passes its input on).
			const own = named ? null : lookupFacts(factsOfItem(item));
			if (own) return targetFromFacts(own);
			candidates ??= lookupCandidates(ctx, named);
			find ??= lineageFinder(ctx, candidates);
			const traced = find(item);
			if (traced) return targetFromFacts(traced);
			throw new LedgerInputError(
				named
					? `This item does not lead back to a Miss of the node "${named}"`
					: (candidates ?? []).length === 0
						? 'There is no Prompt Cache Lookup before this node'
						: 'This item does not lead back to a Prompt Cache Lookup',
				'Put Store after the AI node on the Lookup\'s Miss branch, and keep the AI node\'s items linked to their inputs. Or set "Prompt Hash From" to "A Field" and carry {{ $json.idempotency.promptHash }} along.',
			);
		};
	}
	return {
		target,
		ttlMs: readDurationOption(ctx, KEEP_ANSWERS, 'storeOptions'),
		responsePath: field ? parseFieldPath(field, 'answer field') : null,
		maxBytes: Math.round(kb * 1024),
	};
}

function withoutFacts(json: IDataObject): IDataObject {
	if (!(FACTS_FIELD in json)) return json;
	const { [FACTS_FIELD]: _facts, ...rest } = json;
	void _facts;
	return rest;
}

const kbText = (bytes: number) => `${Math.ceil(bytes / 102.4) / 10} KB`;

interface Pending {
	index: number;
	target: Target;
	entry: StoredEntry;
	bytes: number;
}

export async function executeStore(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	const items = this.getInputData();
	const node = this.getNode();
	const continueOnFail = this.continueOnFail();
	let config: StoreConfig;
	try {
		config = readConfig(this);
	} catch (error) {
		throw toNodeError(node, error);
	}
	const ownHolder = holderOf(this);
	const results = new Array<INodeExecutionData | undefined>(items.length);
	const failItem = (index: number, error: unknown) => {
		const nodeError = toNodeError(node, error, index);
		if (!continueOnFail) throw nodeError;
		results[index] = failedItem(node, items[index], index, nodeError);
	};
	const passOn = (index: number, facts: IDataObject): INodeExecutionData => itemWithFacts(items[index], index, facts);

	const pending: Pending[] = [];
	const failed: Array<{ index: number; target: Target }> = [];
	// Shadow mode's comparisons, per namespace, added to the cache stats in one write.
	const compared = new Map<string, { shadowCompared: number; shadowDiffered: number }>();
	const countComparison = (namespace: string, same: boolean) => {
		const c = compared.get(namespace) ?? { shadowCompared: 0, shadowDiffered: 0 };
		c.shadowCompared++;
		if (!same) c.shadowDiffered++;
		compared.set(namespace, c);
	};
	const recordComparisons = async () => {
		if (compared.size === 0) return;
		try {
			const ledger = await openLedger(this);
			await ledger.addCounts([...compared].map(([namespace, counts]) => ({ namespace, counts })));
		} catch {
			this.addExecutionHints({
				message: 'Shadow mode\'s comparisons of this run could not be added to the cache stats (the ledger did not answer). The answers themselves are fine.',
				type: 'warning',
				location: 'outputPane',
			});
		}
	};
	for (let i = 0; i < items.length; i++) {
		try {
			const item = items[i];
			const target = config.target(i, item);
			const receipt = target.keyReceipt ? { keyReceipt: target.keyReceipt } : {};
			if (target.fromHit) {
				results[i] = passOn(i, cacheFacts('not_stored', target.namespace, target.hash, null, { reason: 'The answer came from the cache (Hit); it is stored already', ...receipt }));
				continue;
			}
			if (target.bypassed) {
				results[i] = passOn(i, cacheFacts('not_stored', target.namespace, target.hash, null, { reason: 'Skip the Cache was on for this item in the Lookup, so its answer is not stored', ...receipt }));
				continue;
			}
			const response = config.responsePath ? readPath(item.json, config.responsePath) : withoutFacts(item.json);
			if (target.shadowAnswer !== null && item.error === undefined && !looksLikeError(response) && response !== undefined && response !== null) {
				// Shadow mode: the cached answer stays; count whether the fresh one says the same.
				const same = answerDigest(response) === target.shadowAnswer;
				countComparison(target.namespace, same);
				results[i] = passOn(i, cacheFacts('not_stored', target.namespace, target.hash, null, {
					reason: same
						? 'Shadow mode: the fresh answer says the same as the cached one, which is kept'
						: 'Shadow mode: the fresh answer differs from the cached one, which is kept',
					shadow: { sameAsCached: same },
					text: responseText(response),
					...receipt,
				}));
				continue;
			}
			if (item.error !== undefined || looksLikeError(response)) {
				// Never cache an error. Free the reservation so that a waiting run asks the model itself.
				failed.push({ index: i, target });
				continue;
			}
			if (response === undefined || response === null) {
				throw new LedgerInputError(
					`The answer field "${formatPath(config.responsePath ?? [])}" is missing on this item`,
					'Check "Answer Field" under Options, or leave it empty to store the whole output of the AI node.',
				);
			}
			const text = JSON.stringify(response);
			const bytes = Buffer.byteLength(text, 'utf8');
			if (bytes > config.maxBytes) {
				throw new LedgerInputError(
					`The answer is ${kbText(bytes)}, more than the ${kbText(config.maxBytes)} a cached answer may have; it was not stored`,
					'Raise "Max Answer Size (KB)" under Options, or store only the part you need with "Answer Field" (for example choices[0].message).',
				);
			}
			const usage = responseUsage(response) ?? responseUsage(item.json);
			pending.push({
				index: i,
				target,
				bytes,
				entry: {
					v: 1,
					response,
					usage: (usage as IDataObject | null) ?? null,
					tokens: usageTokens(usage),
					model: responseModel(response) ?? target.model,
					storedAt: new Date().toISOString(),
					...(target.prompt ? { prompt: target.prompt as unknown as StoredEntry['prompt'] } : {}),
				},
			});
		} catch (error) {
			failItem(i, error);
		}
	}

	const skipped = skippedStore(this, items, results, [...pending, ...failed]);
	if (skipped) return skipped;
	const written = new Map<number, LedgerRecord | null>();
	// Answers another run stored first (with the row as the claim found it), or is fetching.
	const refused = new Map<number, { why: 'stored'; record: LedgerRecord } | { why: 'reserved' }>();
	if (pending.length > 0 || failed.length > 0) {
		try {
			const ledger = await openLedger(this);
			// One write per reservation holder (normally one: this execution).
			const groups = new Map<string, Array<{ index: number; request: RecordRequest }>>();
			const add = (holder: string, index: number, request: RecordRequest) => {
				const group = groups.get(holder) ?? [];
				group.push({ index, request });
				groups.set(holder, group);
			};
			// An answer whose Lookup did not reserve the prompt (it did not wait, or waited in vain)
			// must not replace one that is stored or being fetched: reserve first, atomically, and
			// store only what this run then holds. The first answer stored is the one every run gets.
			const unreserved = pending.filter((p) => p.target.holder === null);
			const fences = new Map<number, number | null>();
			if (unreserved.length > 0) {
				const outcomes = await ledger.claim(
					unreserved.map((p) => ({ namespace: p.target.namespace, key: p.target.hash, step: CACHE_STEP, fingerprint: null })),
					{ mode: 'lease', holder: ownHolder, leaseMs: 60_000, ttlMs: 60_000 },
				);
				outcomes.forEach((outcome, k) => {
					const first = outcome.kind === 'batch_duplicate' ? outcomes[outcome.firstIndex] : outcome;
					const mine = first.kind === 'claimed' || (first.kind === 'in_progress' && first.record.leaseHolder === ownHolder);
					if (!mine) refused.set(unreserved[k].index, first.kind === 'duplicate' ? { why: 'stored', record: first.record } : { why: 'reserved' });
					else fences.set(unreserved[k].index, first.record.fence);
				});
			}
			for (const p of pending) {
				if (refused.has(p.index)) continue;
				add(p.target.holder ?? ownHolder, p.index, {
					namespace: p.target.namespace,
					key: p.target.hash,
					step: CACHE_STEP,
					status: 'completed',
					result: p.entry,
					fence: p.target.fence ?? fences.get(p.index) ?? null,
				});
			}
			const releases = failed.filter((f) => f.target.holder !== null);
			for (const [holder, group] of groups) {
				const rows = await ledger.record(group.map((g) => g.request), { ttlMs: config.ttlMs, holder });
				group.forEach((g, k) => written.set(g.index, rows[k].kind === 'written' ? rows[k].record : null));
			}
			const releaseGroups = new Map<string, RecordRequest[]>();
			for (const f of releases) {
				const group = releaseGroups.get(f.target.holder as string) ?? [];
				group.push({ namespace: f.target.namespace, key: f.target.hash, step: CACHE_STEP, status: 'failed_retryable', result: null });
				releaseGroups.set(f.target.holder as string, group);
			}
			for (const [holder, requests] of releaseGroups) await ledger.record(requests, { ttlMs: 60_000, holder });
		} catch (error) {
			await recordComparisons();
			if (!continueOnFail) throw toNodeError(node, error);
			for (const p of pending) failItem(p.index, error);
			for (const f of failed) failItem(f.index, error);
			return [results.filter((r): r is INodeExecutionData => r !== undefined)];
		}
	}

	for (const f of failed) {
		results[f.index] = passOn(f.index, cacheFacts('not_stored', f.target.namespace, f.target.hash, null, {
			reason: 'The AI node returned an error; errors are never cached',
		}));
	}
	for (const p of pending) {
		const record = written.get(p.index) ?? null;
		const refusal = refused.get(p.index);
		if (!record && p.target.shadow && refusal?.why === 'stored' && isStoredEntry(refusal.record.result)) {
			// Shadow mode, and another run stored its answer while this one asked the model (both
			// missed at their Lookup): compare with the stored answer, as a repeat that found it does.
			const same = answerDigest(p.entry.response) === answerDigest(refusal.record.result.response);
			countComparison(p.target.namespace, same);
			results[p.index] = passOn(p.index, cacheFacts('not_stored', p.target.namespace, p.target.hash, null, {
				reason: same
					? 'Shadow mode: another run stored its answer for this prompt first, and it is kept; the fresh answer says the same'
					: 'Shadow mode: another run stored its answer for this prompt first, and it is kept; the fresh answer differs from it',
				shadow: { sameAsCached: same },
				text: responseText(p.entry.response),
				...(p.target.keyReceipt ? { keyReceipt: p.target.keyReceipt } : {}),
			}));
			continue;
		}
		const extra: IDataObject = {
			...(p.target.keyReceipt ? { keyReceipt: p.target.keyReceipt } : {}),
			model: p.entry.model,
			tokens: p.entry.tokens,
			bytes: p.bytes,
			text: responseText(p.entry.response),
		};
		results[p.index] = record
			? passOn(p.index, cacheFacts('stored', p.target.namespace, p.target.hash, record, { storedAt: p.entry.storedAt, ...extra }))
			: passOn(p.index, cacheFacts('not_stored', p.target.namespace, p.target.hash, null, {
					reason:
						refusal?.why === 'stored'
							? 'Another run stored an answer for this prompt first; that answer is kept'
							: 'Another run has reserved this prompt and is asking the model; its answer will be stored instead',
					...extra,
				}));
	}
	await recordComparisons();
	return [results.filter((r): r is INodeExecutionData => r !== undefined)];
}
