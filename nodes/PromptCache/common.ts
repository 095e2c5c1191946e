import { randomUUID } from 'crypto';
import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

import { sha256 } from '../../lib/ledger/fingerprint';
import type { PromptEnvelope } from '../../lib/ledger/promptHash';
import type { LedgerRecord } from '../../lib/ledger/types';
import { MAX_NAMESPACE_LENGTH } from '../../lib/ledger/validate';
import { FACTS_FIELD, factsOf, PROMPT_CACHE_STEP } from '../../lib/n8n/facts';

/** Ledger step of a cache entry. The key is the prompt hash. */
export const CACHE_STEP = PROMPT_CACHE_STEP;
/** Ledger step of a stats event (one row per Lookup run and namespace). */
export const STATS_STEP = 'prompt-cache-stats';
/** Stats events are kept this long; Get Stats covers this window. */
export const STATS_TTL_MS = 30 * 86_400_000;

/** What a cache entry row holds in its `result`. */
export interface StoredEntry {
	/** Entry format, independent of the hash envelope version. */
	v: 1;
	/** The AI node's output (or the chosen field of it), as it was. */
	response: unknown;
	/** The usage object of the response, when it carried one. */
	usage: IDataObject | null;
	/** Total tokens that usage counts: what a hit saves. */
	tokens: number | null;
	model: string | null;
	storedAt: string;
	/** The normalized prompt envelope; absent with "Hash Only". */
	prompt?: PromptEnvelope;
}

export const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

export function isStoredEntry(value: unknown): value is StoredEntry {
	return isObject(value) && 'response' in value && value.response !== undefined && value.response !== null;
}

/**
 * Stats events live in a namespace of their own, so that reading them never scans the cache
 * entries (which may be large).
 */
export function statsNamespace(namespace: string): string {
	const name = `prompt-cache-stats:${namespace}`;
	return name.length <= MAX_NAMESPACE_LENGTH ? name : `prompt-cache-stats:#${sha256(namespace)}`;
}

/**
 * Who holds a computing lease: this execution. Without an execution id (never in n8n, possible
 * in hand-made test contexts) a random id keeps two runs from mistaking each other for themselves.
 */
const fallbackHolder = `local:${randomUUID()}`;
export function holderOf(ctx: IExecuteFunctions): string {
	const id = ctx.getExecutionId();
	return id ? `execution:${id}` : fallbackHolder;
}

export type CacheOutcome = 'hit' | 'miss' | 'stored' | 'not_stored' | 'unverified';

/** The ledger facts every Prompt Cache output carries under `idempotency`. */
export function cacheFacts(outcome: CacheOutcome, namespace: string, hash: string, record: LedgerRecord | null, extra: IDataObject = {}): IDataObject {
	const base = factsOf('new', namespace, hash, CACHE_STEP, record);
	// The stored result is the response itself; the item carries it already.
	delete base.result;
	delete base.version;
	delete base.externalId;
	return { ...base, outcome, promptHash: hash, ...extra };
}

export const factsOfItem = (item: INodeExecutionData): IDataObject | null => {
	const facts = item.json[FACTS_FIELD];
	return isObject(facts) ? (facts as IDataObject) : null;
};


export const seconds = (ms: number) => Math.max(0, Math.round(ms / 100) / 10);
