/**
 * The ledger contract. Every backend (PostgreSQL, Redis) implements `Ledger` and
 * passes the same contract suite in test/integration/ledger.contract.ts.
 * Nothing in lib/ledger knows about n8n.
 */

export const STATUSES = ['in_progress', 'completed', 'failed_retryable', 'needs_review'] as const;
export type Status = (typeof STATUSES)[number];

/** The unit step. `''` is the unit of work itself. */
export const UNIT_STEP = '';

export interface RowId {
	namespace: string;
	key: string;
	step: string;
}

export interface LedgerRecord extends RowId {
	status: Status;
	leaseHolder: string | null;
	leaseExpiresAt: Date | null;
	fingerprint: string | null;
	/** Ordering value for "only newer versions" claims, as text (compared numerically when both parse). */
	version: string | null;
	externalId: string | null;
	result: unknown;
	attempts: number;
	/** Status the row had just before the last successful claim (null when it was new or expired). */
	previousStatus: Status | null;
	/**
	 * Recovery point of an `in_progress` row, set by `markPhase` (e.g. `sending`). Null when no phase
	 * was marked since the last claim; every claim and every record clears it. Optional only while a
	 * backend does not track phases yet (see `Ledger.markPhase`); a backend that does always sets it.
	 */
	phase?: string | null;
	firstSeenAt: Date;
	updatedAt: Date;
	expiresAt: Date;
}

/**
 * How a claim treats an existing live row.
 * - `lease`: take the key as `in_progress` until completed; a lapsed lease or a
 *   `failed_retryable` row may be taken again.
 * - `seen`: record the key as `completed` at once (at-most-once, like Remove Duplicates).
 * - `newer`: like `seen`, but a claim whose `version` is greater than the stored one wins again.
 */
export type ClaimMode = 'lease' | 'seen' | 'newer';

export interface ClaimRequest extends RowId {
	/** Hash of the normalized payload; null means "do not compare". */
	fingerprint: string | null;
	/** Only for mode `newer`. */
	version?: string | null;
}

export interface ClaimOptions {
	mode: ClaimMode;
	/** Who holds the lease, e.g. an execution id. */
	holder: string;
	/** Lease length for mode `lease`. */
	leaseMs: number;
	/** Retention: how long the row lives after this write. */
	ttlMs: number;
	/**
	 * A live lease held by this same `holder` counts as lapsed: the holder's earlier attempt ended
	 * without recording (n8n's Retry On Fail re-runs a node inside the same execution). The claim
	 * then reports the phase that attempt reached, as for any lapsed lease. Off by default: a gate
	 * in a loop must not let one key through twice in one execution.
	 */
	reclaimOwnLease?: boolean;
}

export type ClaimOutcome =
	/**
	 * This request took the key. `previousStatus` is the status of the row it replaced, if any (lapsed
	 * lease, failure, older version). `previousPhase` is the phase that row had reached: a lapsed
	 * `in_progress` row with phase `sending` may have performed its side effect (the ambiguous case).
	 * `undefined` means the backend does not track phases, and the caller must assume the worst.
	 */
	| { kind: 'claimed'; record: LedgerRecord; previousStatus: Status | null; previousPhase?: string | null }
	/** The key is done (completed, needs_review) or its version is not newer. */
	| { kind: 'duplicate'; record: LedgerRecord }
	/** Another holder has a live lease. */
	| { kind: 'in_progress'; record: LedgerRecord }
	/** The key exists with a different payload fingerprint. Nothing was written. */
	| { kind: 'mismatch'; record: LedgerRecord }
	/** An earlier request in the same batch already took this key. */
	| { kind: 'batch_duplicate'; firstIndex: number };

export interface RecordRequest extends RowId {
	status: Exclude<Status, 'in_progress'>;
	externalId?: string | null;
	result?: unknown;
	fingerprint?: string | null;
}

export interface RecordOptions {
	ttlMs: number;
	/** When set, only a row leased by this holder, or a row that is absent, expired or unleased, is written. */
	holder?: string;
}

export interface ListFilter {
	namespace?: string;
	status?: Status;
	/** Only in_progress rows whose lease has lapsed. */
	stuckOnly?: boolean;
	/** Only rows last updated before this instant. */
	updatedBefore?: Date;
	limit: number;
	/** Opaque cursor from a previous page. */
	cursor?: string | null;
}

export interface ListPage {
	records: LedgerRecord[];
	nextCursor: string | null;
}

export interface NamespaceStats {
	namespace: string;
	byStatus: Record<Status, number>;
	duplicatesBlocked: number;
	oldestInProgressAt: Date | null;
	stuck: number;
}

export interface Checkpoint {
	namespace: string;
	name: string;
	value: string;
	updatedAt: Date;
	updatedBy: string | null;
}

export interface Ledger {
	/** Create or migrate the storage. Safe to call from many processes at once. */
	ensureSchema(): Promise<void>;
	/** Claim many rows in as few round trips as the backend allows. Outcomes are in request order. */
	claim(requests: ClaimRequest[], options: ClaimOptions): Promise<ClaimOutcome[]>;
	/**
	 * Set the recovery point of rows this holder still leases, in one statement: only rows that are
	 * live, `in_progress`, leased by `holder` and whose lease has not lapsed are changed. Returns,
	 * in request order, whether each row was marked (false: absent, expired, settled, another holder,
	 * or lease lapsed). A later claim of the row reports the phase as `previousPhase` and clears it.
	 * Optional while the Redis backend catches up; callers treat a backend without it as one that
	 * cannot tell "claimed, not yet sent" from "may have sent", and assume the latter.
	 */
	markPhase?(rows: RowId[], holder: string, phase: string): Promise<boolean[]>;
	/** Record the final status of many rows. Returns the rows written, in request order (null: refused, another holder owns it). */
	record(requests: RecordRequest[], options: RecordOptions): Promise<Array<LedgerRecord | null>>;
	/** All live steps of a key. */
	get(namespace: string, key: string): Promise<LedgerRecord[]>;
	/** Live rows by status, paged. */
	list(filter: ListFilter): Promise<ListPage>;
	/** Delete one step, or every step of a key, so that a deliberate replay is allowed. Returns rows released. */
	release(namespace: string, key: string, step: string | null, releasedBy: string): Promise<number>;
	/** Delete at most `limit` expired rows. Returns the number deleted. */
	purgeExpired(limit: number): Promise<number>;
	stats(namespace: string): Promise<NamespaceStats>;
	getCheckpoint(namespace: string, name: string): Promise<Checkpoint | null>;
	/** Refuses to move backwards unless `force`. */
	setCheckpoint(
		namespace: string,
		name: string,
		value: string,
		options: { force: boolean; updatedBy: string | null },
	): Promise<Checkpoint>;
	/** Round trips made so far (for benchmarks and tests). */
	readonly roundTrips: number;
	close(): Promise<void>;
}
