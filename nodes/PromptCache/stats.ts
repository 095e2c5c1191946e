import type { IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

import type { Ledger } from '../../lib/ledger/types';
import { failedItem, toNodeError } from '../../lib/n8n/errors';
import { openLedger } from '../../lib/n8n/ledgerAccess';
import { namespaceReader } from '../../lib/n8n/scope';
import { STATS_STEP, STATS_TTL_MS, isObject, statsNamespace } from './common';

export interface PromptCacheStats {
	namespace: string;
	hits: number;
	misses: number;
	lookups: number;
	/** Hits per lookup, 0..1 (null before the first lookup). */
	hitRate: number | null;
	/** Tokens the stored answers' usage says the hits did not spend again. An estimate. */
	tokensSaved: number;
	/** First counted lookup in the window. */
	since: string | null;
	windowDays: number;
}

const PAGE = 1000;
const count = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : 0);

/**
 * Sums the namespace's stats events. Each Lookup run adds one insert-only event per namespace,
 * so concurrent runs never lose each other's counts; events expire after 30 days.
 */
export async function promptCacheStats(ledger: Ledger, namespace: string): Promise<PromptCacheStats> {
	let hits = 0;
	let misses = 0;
	let tokensSaved = 0;
	let since: string | null = null;
	let cursor: string | null = null;
	do {
		const page = await ledger.list({ namespace: statsNamespace(namespace), status: 'completed', limit: PAGE, cursor });
		for (const record of page.records) {
			if (record.step !== STATS_STEP || !isObject(record.result)) continue;
			hits += count(record.result.hits);
			misses += count(record.result.misses);
			tokensSaved += count(record.result.tokensSaved);
			const at = record.firstSeenAt.toISOString();
			if (since === null || at < since) since = at;
		}
		cursor = page.nextCursor;
	} while (cursor);
	const lookups = hits + misses;
	return {
		namespace,
		hits,
		misses,
		lookups,
		hitRate: lookups ? Math.round((hits / lookups) * 10_000) / 10_000 : null,
		tokensSaved,
		since,
		windowDays: STATS_TTL_MS / 86_400_000,
	};
}

export async function executeStats(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	const items = this.getInputData();
	const node = this.getNode();
	const continueOnFail = this.continueOnFail();
	let namespaceOf: ReturnType<typeof namespaceReader>;
	try {
		namespaceOf = namespaceReader(this);
	} catch (error) {
		throw toNodeError(node, error);
	}
	const out: INodeExecutionData[] = [];
	const computed = new Map<string, PromptCacheStats>();
	let ledger: Ledger | null = null;
	for (let i = 0; i < items.length; i++) {
		try {
			const namespace = namespaceOf(i, items[i]);
			let stats = computed.get(namespace);
			if (!stats) {
				ledger ??= await openLedger(this);
				stats = await promptCacheStats(ledger, namespace);
				computed.set(namespace, stats);
			}
			out.push({ json: { ...stats }, pairedItem: { item: i } });
		} catch (error) {
			const nodeError = toNodeError(node, error, i);
			if (!continueOnFail) throw nodeError;
			out.push(failedItem(node, items[i], i, nodeError));
		}
	}
	return [out];
}
