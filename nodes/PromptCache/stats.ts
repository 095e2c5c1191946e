import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

import { LedgerInputError } from '../../lib/ledger/errors';
import { COUNTS_KEPT_DAYS, type DailyCounts, type Ledger } from '../../lib/ledger';
import { flushCounts } from '../../lib/n8n/countBuffer';
import { failedItem, toNodeError } from '../../lib/n8n/errors';
import { openLedger } from '../../lib/n8n/ledgerAccess';
import { namespaceReader } from '../../lib/n8n/scope';

/** Days Get Stats covers unless told otherwise. */
export const STATS_DAYS = 30;

/** The counters Lookup and Store add to, per namespace and day (one upsert per run). */
const COUNTERS = [
	'lookups',
	'hits',
	'misses',
	'bypassed',
	'refreshed',
	'tokensSaved',
	'inputTokensSaved',
	'outputTokensSaved',
	'moneySaved',
	'shadowLookups',
	'shadowWouldHit',
	'shadowCompared',
	'shadowDiffered',
] as const;

type Counter = (typeof COUNTERS)[number];
export type PromptCacheDay = { day: string } & Record<Counter, number>;

export interface PromptCacheStats {
	namespace: string;
	windowDays: number;
	/** First day in the window with any lookup (UTC, by the ledger's clock). */
	since: string | null;
	lookups: number;
	hits: number;
	misses: number;
	/** Hits per lookup, 0..1 (null before the first lookup). */
	hitRate: number | null;
	/** Items that went to Miss with "Skip the Cache", and lookups with "Force Refresh". */
	bypassed: number;
	refreshed: number;
	/** What the hits did not spend again, by the stored answers' usage. Estimates. */
	tokensSaved: number;
	inputTokensSaved: number;
	outputTokensSaved: number;
	/** By the prices set on the Lookup; 0 where none were set. */
	moneySaved: number;
	/** Shadow mode: how often the cache would have answered, and how often a fresh answer differed from the cached one. */
	shadow: {
		lookups: number;
		wouldHit: number;
		wouldHitRate: number | null;
		compared: number;
		differed: number;
		differedRate: number | null;
	};
	/** Day by day, oldest first; days without lookups are left out. */
	days: PromptCacheDay[];
}

const rate = (part: number, whole: number) => (whole > 0 ? Math.round((part / whole) * 10_000) / 10_000 : null);
/** Money is added up in fractions of a cent: shown to 9 decimals, without float noise. */
const money = (n: number) => Math.round(n * 1e9) / 1e9;

/** The stats of one namespace from its daily counters. */
export function summarizeCounts(namespace: string, daily: DailyCounts[], windowDays: number): PromptCacheStats {
	const total = Object.fromEntries(COUNTERS.map((c) => [c, 0])) as Record<Counter, number>;
	const days: PromptCacheDay[] = [];
	for (const { day, counts } of daily) {
		const row = { day } as PromptCacheDay;
		for (const c of COUNTERS) {
			const n = typeof counts[c] === 'number' && Number.isFinite(counts[c]) ? counts[c] : 0;
			row[c] = c === 'moneySaved' ? money(n) : n;
			total[c] += n;
		}
		if (COUNTERS.some((c) => row[c] !== 0)) days.push(row);
	}
	return {
		namespace,
		windowDays,
		since: days.find((d) => d.lookups > 0)?.day ?? null,
		lookups: total.lookups,
		hits: total.hits,
		misses: total.misses,
		hitRate: rate(total.hits, total.lookups),
		bypassed: total.bypassed,
		refreshed: total.refreshed,
		tokensSaved: total.tokensSaved,
		inputTokensSaved: total.inputTokensSaved,
		outputTokensSaved: total.outputTokensSaved,
		moneySaved: money(total.moneySaved),
		shadow: {
			lookups: total.shadowLookups,
			wouldHit: total.shadowWouldHit,
			wouldHitRate: rate(total.shadowWouldHit, total.shadowLookups),
			compared: total.shadowCompared,
			differed: total.shadowDiffered,
			differedRate: rate(total.shadowDiffered, total.shadowCompared),
		},
		days,
	};
}

export async function promptCacheStats(ledger: Ledger, namespace: string, windowDays = STATS_DAYS): Promise<PromptCacheStats> {
	// Counts this process has not written yet (lib/n8n/countBuffer.ts) are written first.
	await flushCounts(ledger);
	return summarizeCounts(namespace, await ledger.readCounts(namespace, windowDays), windowDays);
}

function readDays(ctx: IExecuteFunctions): number {
	const options = ctx.getNodeParameter('statsOptions', 0, {}) as IDataObject;
	const days = options.days === undefined ? STATS_DAYS : Number(options.days);
	if (!Number.isInteger(days) || days < 1 || days > COUNTS_KEPT_DAYS) {
		throw new LedgerInputError(`"Days" must be a whole number from 1 to ${COUNTS_KEPT_DAYS}, not ${JSON.stringify(options.days)}`, `Stats are kept ${COUNTS_KEPT_DAYS} days; enter how many of the last days to add up, e.g. 30.`);
	}
	return days;
}

export async function executeStats(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	const items = this.getInputData();
	const node = this.getNode();
	const continueOnFail = this.continueOnFail();
	let namespaceOf: ReturnType<typeof namespaceReader>;
	let days: number;
	try {
		namespaceOf = namespaceReader(this);
		days = readDays(this);
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
				stats = await promptCacheStats(ledger, namespace, days);
				computed.set(namespace, stats);
			}
			out.push({ json: { ...stats } as unknown as IDataObject, pairedItem: { item: i } });
		} catch (error) {
			const nodeError = toNodeError(node, error, i);
			if (!continueOnFail) throw nodeError;
			out.push(failedItem(node, items[i], i, nodeError));
		}
	}
	return [out];
}
