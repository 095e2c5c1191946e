/**
 * Copying one ledger into another (e.g. the Built-in ledger into PostgreSQL or Redis), whatever
 * the backends. A source implements `LedgerExport`, a target `LedgerImport`; `copyLedger` pages
 * through the one and writes into the other. Both sides speak the neutral format below, so any
 * backend can be copied into any other.
 *
 * Clocks. Each ledger decides "live", "lapsed" and "expired" by its own clock (PostgreSQL now(),
 * Redis TIME, ...), and two ledgers' clocks may differ by seconds or more. So what a rule depends
 * on travels as a duration measured by the source's clock at export (`leaseRemainingMs`,
 * `expiresInMs`), and the target turns it into its own absolute time at import (its now + the
 * duration). A lease thus never ends earlier in the target than it would have in the source; it
 * ends later by at most the time between the export and the import of its batch. Times that are
 * only facts (first seen, last updated, when a checkpoint moved, when an audit entry was made) are
 * carried as they are, as epoch milliseconds.
 *
 * Merging (safe to run twice). A copy never deletes, and never turns a row into one that lets a
 * send happen again. For a row the target already holds (live), it ranks both rows by how much
 * they say about the side effect (`transferRank`):
 *
 *   4 completed   3 needs_review   2 phase `sending` (may have gone out)   1 in_progress   0 failed_retryable
 *
 * The source row replaces the target's only when its rank is strictly higher (`replaced`). Equal
 * rank: the target's row is kept (`alreadyPresent`; that is what a second run finds for every
 * row). Lower rank: the target's row is kept (`skippedOlder`). So a `completed` row is never
 * lost nor reopened, and a row that may have been sent is only ever replaced by `completed` or
 * `needs_review`. A target row that is absent or expired is written (`copied`).
 *
 * Fencing tokens are the target's to hand out: a copied row that had a token gets a new one from
 * the target (one per import batch and namespace), never the source's number, which could equal
 * a token a claim of the target holds. The source's runs write to the source, so nothing is lost.
 *
 * Checkpoints: written when absent, replaced when the source's value is newer by the ledger's
 * checkpoint rule (numeric when both are numbers, otherwise byte order), as setCheckpoint without
 * force; otherwise kept. Daily counters: for a day both ledgers hold, each counter becomes the
 * larger of the two values (a sum would count twice on a second run; the move is meant to happen
 * before the target is used, when one side of every day is empty). Audit entries (releases and
 * "sent" resolutions): appended unless the target has one with the same namespace, key, step,
 * action, actor and time (to the millisecond).
 */

import { LedgerInputError } from './errors';
import { STATUSES, type Status } from './types';

/** One row (one step of one key) in the neutral format. */
export interface TransferRow {
	namespace: string;
	key: string;
	/** `''` is the unit of work itself. */
	step: string;
	status: Status;
	/** Recovery point, e.g. `sending`; null when none. */
	phase: string | null;
	previousStatus: Status | null;
	/** The phase the row had reached when its current claim took it over. */
	previousPhase: string | null;
	/** The source's fencing token (informational: the target gives the row a token of its own). */
	fence: number | null;
	fingerprint: string | null;
	version: string | null;
	externalId: string | null;
	/** The recorded result as a JSON value (null when none). */
	result: unknown;
	attempts: number;
	leaseHolder: string | null;
	/** Lease time left by the source's clock at export: null without a lease, 0 once lapsed. */
	leaseRemainingMs: number | null;
	/** Time until the row expires by the source's clock at export; null: kept until resolved (phase `sending`). Always > 0. */
	expiresInMs: number | null;
	/** Epoch milliseconds. */
	firstSeenAt: number;
	/** Epoch milliseconds. */
	updatedAt: number;
}

export interface TransferCheckpoint {
	namespace: string;
	name: string;
	value: string;
	/** Epoch milliseconds. */
	updatedAt: number;
	updatedBy: string | null;
}

/** One namespace's counters of one UTC day. */
export interface TransferDay {
	namespace: string;
	/** 'YYYY-MM-DD'. */
	day: string;
	counts: Record<string, number>;
}

/** One audit entry: a release, or an operator's "it was sent" or "drop it". */
export interface TransferAudit {
	namespace: string;
	key: string;
	/** Null when the entry was for every step of the key. */
	step: string | null;
	/** `release`, `resolve_sent` or `resolve_dropped` (AUDIT_ACTIONS). */
	action: string;
	actor: string | null;
	/** Epoch milliseconds. */
	at: number;
	/** What the row was: status, phase, leaseHolder, fence, resolution (absent ones left out). */
	detail: Record<string, unknown>;
}

/** One page of an export. Any of the lists may be empty on any page. */
export interface ExportBatch {
	rows: TransferRow[];
	checkpoints: TransferCheckpoint[];
	days: TransferDay[];
	audit: TransferAudit[];
	/** Pass back to get the next page; null when the export is complete. */
	next: string | null;
}

/**
 * A ledger that can be read whole, page by page. `exportBatch(null, limit)` starts; each answer
 * carries the cursor of the next page (opaque, the backend's own) until `next` is null. A page
 * holds at most about `limit` items of one kind. Only live rows are exported (expired ones are
 * gone by the ledger's rules). Rows written while an export runs may or may not be in it: copy a
 * ledger that is not in use, or run the copy again afterwards.
 */
export interface LedgerExport {
	exportBatch(cursor: string | null, limit: number): Promise<ExportBatch>;
}

/** What one import did, per kind. */
export interface ImportCounts {
	/** Rows written where the target had none (or an expired one). */
	rowsCopied: number;
	/** Target rows replaced by a source row of higher rank. */
	rowsReplaced: number;
	/** Target rows of equal rank, kept. */
	rowsAlreadyPresent: number;
	/** Target rows of higher rank, kept. */
	rowsSkippedOlder: number;
	/** Checkpoints written or moved forward. */
	checkpointsCopied: number;
	/** Checkpoints the target had at the same value, or ahead. */
	checkpointsKept: number;
	/** Days of counters written or raised. */
	counterDaysCopied: number;
	/** Days whose counters the target already had as high (or older than the ledger keeps). */
	counterDaysKept: number;
	auditCopied: number;
	auditAlreadyPresent: number;
}

export const emptyCounts = (): ImportCounts => ({
	rowsCopied: 0,
	rowsReplaced: 0,
	rowsAlreadyPresent: 0,
	rowsSkippedOlder: 0,
	checkpointsCopied: 0,
	checkpointsKept: 0,
	counterDaysCopied: 0,
	counterDaysKept: 0,
	auditCopied: 0,
	auditAlreadyPresent: 0,
});

/**
 * A ledger that can take a page of another's export. Idempotent: importing a batch twice changes
 * nothing the second time (every row then counts as already present). A few round trips per
 * batch. Does not create the schema: call ensureSchema first.
 */
export interface LedgerImport {
	importBatch(batch: Omit<ExportBatch, 'next'>): Promise<ImportCounts>;
}

/** How much a row says about its side effect (see the merge rule above). */
export function transferRank(status: Status, phase: string | null): number {
	if (status === 'completed') return 4;
	if (status === 'needs_review') return 3;
	if (phase === 'sending') return 2;
	if (status === 'in_progress') return 1;
	return 0;
}

/** SQL of transferRank over columns `status` and `phase` of alias `a`. */
export const transferRankSql = (status: string, phase: string) =>
	`(CASE WHEN ${status} = 'completed' THEN 4 WHEN ${status} = 'needs_review' THEN 3 WHEN ${phase} IS NOT DISTINCT FROM 'sending' THEN 2 WHEN ${status} = 'in_progress' THEN 1 ELSE 0 END)`;

/** Lua of transferRank over a stored row (fields st, ph). */
export const TRANSFER_RANK_LUA = `
local function xrank(st, ph)
	if st == 'completed' then return 4 end
	if st == 'needs_review' then return 3 end
	if ph == 'sending' then return 2 end
	if st == 'in_progress' then return 1 end
	return 0
end
`;

const isText = (v: unknown) => typeof v === 'string';
const isTextOrNull = (v: unknown) => v === null || typeof v === 'string';
const isMsOrNull = (v: unknown) => v === null || (typeof v === 'number' && Number.isFinite(v) && v >= 0);

/** Refuses a batch a target must not write (a bad status, a missing field), naming the first bad row. */
export function assertTransferBatch(batch: Omit<ExportBatch, 'next'>): void {
	const bad = (what: string) =>
		new LedgerInputError(`The copy got a ${what} the target ledger cannot store`, 'The source ledger returned data this version does not know; update n8n-nodes-idempotency.');
	for (const r of batch.rows) {
		const ok =
			isText(r.namespace) && isText(r.key) && isText(r.step) && (STATUSES as readonly string[]).includes(r.status) &&
			isTextOrNull(r.phase) && (r.previousStatus === null || (STATUSES as readonly string[]).includes(r.previousStatus)) &&
			isTextOrNull(r.previousPhase) && (r.fence === null || Number.isSafeInteger(r.fence)) && isTextOrNull(r.fingerprint) &&
			isTextOrNull(r.version) && isTextOrNull(r.externalId) && Number.isSafeInteger(r.attempts) && isTextOrNull(r.leaseHolder) &&
			isMsOrNull(r.leaseRemainingMs) && isMsOrNull(r.expiresInMs) && Number.isFinite(r.firstSeenAt) && Number.isFinite(r.updatedAt);
		if (!ok) throw bad(`row (namespace ${JSON.stringify(r.namespace)}, key ${JSON.stringify(r.key)})`);
	}
	for (const c of batch.checkpoints) {
		if (!isText(c.namespace) || !isText(c.name) || !isText(c.value) || !Number.isFinite(c.updatedAt) || !isTextOrNull(c.updatedBy)) {
			throw bad(`checkpoint (${JSON.stringify(c.name)})`);
		}
	}
	for (const d of batch.days) {
		const ok = isText(d.namespace) && /^\d{4}-\d{2}-\d{2}$/.test(d.day) && Object.values(d.counts).every((v) => typeof v === 'number' && Number.isFinite(v));
		if (!ok) throw bad(`day of counters (${JSON.stringify(d.day)})`);
	}
	for (const a of batch.audit) {
		if (!isText(a.namespace) || !isText(a.key) || !isTextOrNull(a.step) || !isText(a.action) || !Number.isFinite(a.at)) {
			throw bad(`audit entry (key ${JSON.stringify(a.key)})`);
		}
	}
}

export interface CopyOptions {
	/** Items per page. Default 1,000. */
	batchSize?: number;
	/** Called after each batch is imported (progress; a test may throw here to stop the copy). */
	onBatch?: (done: CopyTotals) => void | Promise<void>;
}

export interface CopyTotals extends ImportCounts {
	batches: number;
	durationMs: number;
}

export const DEFAULT_TRANSFER_BATCH = 1000;

/**
 * Copies everything `source` holds into `target`, batch by batch. Safe to run again at any time,
 * also after a copy that stopped half way: rows already copied count as already present, the rest
 * are copied.
 */
export async function copyLedger(source: LedgerExport, target: LedgerImport, options: CopyOptions = {}): Promise<CopyTotals> {
	const started = Date.now();
	const limit = Math.max(1, Math.floor(options.batchSize ?? DEFAULT_TRANSFER_BATCH));
	const totals: CopyTotals = { ...emptyCounts(), batches: 0, durationMs: 0 };
	let cursor: string | null = null;
	do {
		const batch: ExportBatch = await source.exportBatch(cursor, limit);
		if (batch.rows.length + batch.checkpoints.length + batch.days.length + batch.audit.length > 0) {
			const counts = await target.importBatch(batch);
			for (const k of Object.keys(counts) as Array<keyof ImportCounts>) totals[k] += counts[k];
			totals.batches++;
			totals.durationMs = Date.now() - started;
			await options.onBatch?.(totals);
		}
		cursor = batch.next;
	} while (cursor !== null);
	totals.durationMs = Date.now() - started;
	return totals;
}

/** `ledger` can be read whole for a copy. */
export const canExport = (ledger: unknown): ledger is LedgerExport => typeof (ledger as LedgerExport)?.exportBatch === 'function';
/** `ledger` can take a copy. */
export const canImport = (ledger: unknown): ledger is LedgerImport => typeof (ledger as LedgerImport)?.importBatch === 'function';

/** Cursor helpers for backends: JSON in base64url. */
export const encodeTransferCursor = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

export function decodeTransferCursor<T>(cursor: string, valid: (v: unknown) => v is T): T {
	try {
		const value: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
		if (valid(value)) return value;
	} catch {
		// fall through
	}
	throw new LedgerInputError('The copy cursor is not one this ledger made', 'Start the copy again from the beginning.');
}

/** The export phases of a table-backed ledger (PostgreSQL, Built-in), in the order they are read. */
export type TablePhase = 'rows' | 'cp' | 'days' | 'audit';
export const TABLE_PHASES: TablePhase[] = ['rows', 'cp', 'days', 'audit'];
/** A table-backed ledger's export cursor, inside encodeTransferCursor. */
export interface TableCursor {
	p: TablePhase;
	/** The primary key (or audit id) of the last item of the page before; null: from the start. */
	a: string[] | null;
}

export const isTableCursor = (v: unknown): v is TableCursor =>
	typeof v === 'object' &&
	v !== null &&
	TABLE_PHASES.includes((v as TableCursor).p) &&
	((v as TableCursor).a === null || (Array.isArray((v as TableCursor).a) && (v as TableCursor).a!.every((x) => typeof x === 'string')));
