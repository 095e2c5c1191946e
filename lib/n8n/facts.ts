import type { IDataObject } from 'n8n-workflow';

import type { LedgerRecord } from '../ledger/types';
import { isTestNamespace } from './testRuns';

/** Every node adds its ledger facts to an output item under this one field. */
export const FACTS_FIELD = 'idempotency';

export type Outcome = 'new' | 'duplicate' | 'in_progress' | 'mismatch' | 'unverified';

// Rows claimed by one statement share their timestamps; formatting each instant once keeps
// 10,000-item batches cheap.
const isoCache = new Map<number, string>();
function iso(d: Date | null | undefined): string | null {
	if (!d) return null;
	const ms = d.getTime();
	let text = isoCache.get(ms);
	if (text === undefined) {
		if (isoCache.size > 10_000) isoCache.clear();
		text = d.toISOString();
		isoCache.set(ms, text);
	}
	return text;
}

export function factsOf(outcome: Outcome, namespace: string, key: string, step: string, record: LedgerRecord | null): IDataObject {
	return {
		outcome,
		namespace,
		key,
		step,
		status: record?.status ?? null,
		firstSeenAt: iso(record?.firstSeenAt),
		updatedAt: iso(record?.updatedAt),
		expiresAt: iso(record?.expiresAt),
		attempts: record?.attempts ?? null,
		leaseHolder: record?.leaseHolder ?? null,
		leaseExpiresAt: iso(record?.leaseExpiresAt),
		fence: record?.fence ?? null,
		previousStatus: record?.previousStatus ?? null,
		externalId: record?.externalId ?? null,
		result: (record?.result ?? null) as IDataObject | null,
		version: record?.version ?? null,
		// Only on items of editor test runs that used their test namespace.
		...(isTestNamespace(namespace) ? { testRun: true } : {}),
	};
}

/**
 * Ledger step of a Prompt Cache entry. Its facts name a prompt hash, not a unit of work, so
 * nodes that look for the unit's key on an item skip them (see lineage.ts).
 */
export const PROMPT_CACHE_STEP = 'prompt-cache';
