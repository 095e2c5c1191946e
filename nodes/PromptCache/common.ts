import { randomUUID } from 'crypto';
import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

import type { PromptEnvelope } from '../../lib/ledger/promptHash';
import type { LedgerRecord } from '../../lib/ledger/types';
import { cacheFactsOf, FACTS_FIELD, itemWithFacts, PROMPT_CACHE_STEP } from '../../lib/n8n/facts';
import { skippedLedgerHint, testRunPolicy } from '../../lib/n8n/testRuns';

/** Ledger step of a cache entry. The key is the prompt hash. */
export const CACHE_STEP = PROMPT_CACHE_STEP;

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
export const cacheFacts = (outcome: CacheOutcome, namespace: string, hash: string, record: LedgerRecord | null, extra: IDataObject = {}): IDataObject =>
	cacheFactsOf(outcome, namespace, hash, CACHE_STEP, record, extra);

export const factsOfItem = (item: INodeExecutionData): IDataObject | null => {
	const facts = item.json[FACTS_FIELD];
	return isObject(facts) ? (facts as IDataObject) : null;
};


export const seconds = (ms: number) => Math.max(0, Math.round(ms / 100) / 10);

const SKIPPED_REASON = 'Editor test run: the ledger was skipped';


/**
 * Lookup in an editor test run set to "Skip the Ledger": the hashed items go to Miss (output 1 of
 * `outputs`) without reading or writing the ledger, and the outputs are returned. Null in every
 * other run. Called once the items are hashed, so bad input still fails as it would for real.
 */
export function skippedLookup(
	ctx: IExecuteFunctions,
	items: INodeExecutionData[],
	rows: ReadonlyArray<{ index: number; namespace: string; hash: string; envelope: PromptEnvelope; receipt: string[] }>,
	hashOnly: boolean,
	outputs: INodeExecutionData[][],
): INodeExecutionData[][] | null {
	if (testRunPolicy(ctx).choice !== 'skip') return null;
	if (rows.length > 0) ctx.addExecutionHints(skippedLedgerHint('every item went to Miss without a cache check'));
	for (const row of rows) {
		const facts = cacheFacts('unverified', row.namespace, row.hash, null, {
			computing: false,
			reason: SKIPPED_REASON,
			model: row.envelope.model,
			hashOnly,
			keyReceipt: row.receipt,
			...(hashOnly ? {} : { prompt: row.envelope as unknown as IDataObject }),
		});
		outputs[1].push(itemWithFacts(items[row.index], row.index, facts));
	}
	return outputs;
}

/**
 * Store in an editor test run set to "Skip the Ledger": the items with an answer (or an error) to
 * store pass on as not stored, nothing is written, and the output is returned. Null in every other
 * run. `results` holds the items already settled (Hit answers, failed items).
 */
export function skippedStore(
	ctx: IExecuteFunctions,
	items: INodeExecutionData[],
	results: Array<INodeExecutionData | undefined>,
	targets: ReadonlyArray<{ index: number; target: { namespace: string; hash: string } }>,
): INodeExecutionData[][] | null {
	if (testRunPolicy(ctx).choice !== 'skip') return null;
	if (targets.length > 0) ctx.addExecutionHints(skippedLedgerHint('no answer was stored'));
	for (const { index, target } of targets) {
		results[index] = itemWithFacts(items[index], index, cacheFacts('not_stored', target.namespace, target.hash, null, { reason: SKIPPED_REASON }));
	}
	return [results.filter((r): r is INodeExecutionData => r !== undefined)];
}
