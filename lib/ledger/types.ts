/**
 * The ledger contract. Every backend (PostgreSQL, Redis, the Built-in SQLite file) implements
 * `Ledger` and passes the same contract suite in test/integration/ledger.contract.ts.
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

/** A row as its claimer knows it: the fencing token of that claim goes with every later write. */
export interface FencedRow extends RowId {
	fence: number;
}

/**
 * A claim as the writes made for it name it: the step it took (of the same namespace and key as
 * the row written) and its fencing token. A Dedupe Gate's claim of the unit of work is
 * `{ step: '', fence }`.
 */
export interface ClaimRef {
	step: string;
	fence: number;
}

/** A row as the ledger answered it: a value, read-only (its Dates may be shared with other records of the same answer). */
export interface LedgerRecord extends RowId {
	status: Status;
	/** The run that holds the lease (null once the row is settled). */
	leaseHolder: string | null;
	leaseExpiresAt: Date | null;
	/**
	 * How long the lease had left when the ledger answered, measured by the ledger's own clock:
	 * null without a lease, 0 once it has lapsed. Callers decide "live or lapsed" and "how long
	 * may I keep sending" from this, never from their own clock against `leaseExpiresAt`.
	 */
	leaseRemainingMs: number | null;
	/**
	 * Fencing token of the claim that holds (or last held) the row. Every claim gets a larger one;
	 * a write that presents an older token changes nothing (`lost_lease`). Null for a row that was
	 * written without a claim.
	 */
	fence: number | null;
	fingerprint: string | null;
	/** Ordering value for "only newer versions" claims, as text (compared numerically when both parse). */
	version: string | null;
	externalId: string | null;
	result: unknown;
	attempts: number;
	/** Status the row had just before the last successful claim (null when it was new or expired). */
	previousStatus: Status | null;
	/**
	 * Recovery point set by `markPhase` (e.g. `sending`). Null when no phase was marked since the
	 * last claim. A claim clears it, except `sending`, which a takeover keeps (so that a second
	 * crash cannot lose it); a record clears it, except `needs_review`, which keeps `sending`: the
	 * message may have gone out, and a person must say whether it did (and a `failed_retryable`
	 * write with `keepSending`: the destination will be asked again).
	 */
	phase: string | null;
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
	/**
	 * Retention: how long the row lives after this write. A leased row never expires before its
	 * lease ends: a retention shorter than the lease is lengthened to the lease.
	 */
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
	 */
	| { kind: 'claimed'; record: LedgerRecord; previousStatus: Status | null; previousPhase: string | null }
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
	/**
	 * The fencing token of the claim this write belongs to. When set, the row is written only if it
	 * is live and still carries this token; otherwise nothing changes and the answer is `lost_lease`.
	 */
	fence?: number | null;
	/**
	 * The claim this write is made for when that claim took another row of the same key: a Dedupe
	 * Gate's claim of the unit of work, for a write to one of the unit's steps. The write happens
	 * only while the claimed row is live and still carries the claim's fencing token (settled by
	 * that same claim is fine); once another claim took it over, or it was released or expired,
	 * nothing changes and the answer is `lost_lease`. Checked in the same statement (script) as the
	 * write, on the claimed row as it is then. `fence` and `RecordOptions.holder` still apply to the
	 * row written.
	 */
	claim?: ClaimRef | null;
	/**
	 * Only for a `failed_retryable` write with a `fence`: the row keeps the phase `sending` it has
	 * (its own, or the one its claim took over), as `needs_review` does. The step may have gone out
	 * and nobody could tell yet; the next claim takes it at once and reports `previousPhase`
	 * `sending`, so it asks again instead of sending. Kept until recorded or resolved, like any row
	 * in phase `sending`. Ignored on other writes.
	 */
	keepSending?: boolean;
}

export interface RecordOptions {
	/** Retention after this write. A `needs_review` row is kept until a person resolves it. */
	ttlMs: number;
	/**
	 * For requests without a fence: when set, a row that another holder has `in_progress` (its lease
	 * live or lapsed) is not written (`lost_lease`); absent, expired and settled rows are. Unset:
	 * the write happens whoever holds the row. Writes that belong to a claim carry its authority
	 * instead: its `fence` for the row it took, `claim` for the other steps of its key. That also
	 * refuses a late write over a row another claim settled, holder or not; only an operator's
	 * release (which leaves an audit row) overrides a claim.
	 */
	holder?: string;
	/**
	 * For requests with a fence: write only a row that is still `in_progress` (a claim nobody has
	 * settled yet). A row that its claim already settled, with a result, is left as it is and
	 * answers `lost_lease`. Used to close claims at the end of a run without overwriting what a
	 * later node recorded.
	 */
	onlyInProgress?: boolean;
}

export type RecordOutcome =
	| { kind: 'written'; record: LedgerRecord }
	/**
	 * Nothing was written: another claim owns the row now, or it was released or expired (or, with
	 * `onlyInProgress`, it was settled already).
	 *
	 * `missing: true` when the write needed a row that the ledger no longer holds at all: the row of
	 * a fenced write, or the row of the claim a write names, is absent or expired. That is what an
	 * operator's release does, or a store that lost the key (Redis evicting it under maxmemory, or
	 * restarting without persistence). Absent (undefined) when the row is there but another claim
	 * owns it, or it was settled: a takeover. Callers word the two differently.
	 */
	| { kind: 'lost_lease'; missing?: true };

/**
 * What an operator says happened to a step that may have been sent: `sent` (it is there: record
 * it as completed), `not_sent` (free it: the next run sends it), `dropped` (it must not go out:
 * record it as completed, abandoned, so that no run sends it).
 */
export type Resolution = 'sent' | 'not_sent' | 'dropped';

export interface ReleaseRequest {
	namespace: string;
	key: string;
	/** One step, or null for every step of the key. */
	step: string | null;
	releasedBy: string;
	/** Release a step even while a run holds its lease (that run's later writes then change nothing). */
	evenIfHeld?: boolean;
	/**
	 * Required for a step that reached `sending` (it may have gone out): `sent` records it as
	 * completed, `not_sent` frees it so the next run sends it again. Applies to every step released.
	 */
	resolution?: Resolution;
	/**
	 * Act only on a step that is still as a person saw it: in this status, with this fencing token.
	 * A step that changed since (settled another way, claimed again) is refused (`changed`). Decided
	 * in the same statement (script, transaction) as the release.
	 */
	onlyIf?: { status: Status; fence: number | null };
	/** Retention of a step recorded as sent or dropped. */
	ttlMs: number;
}

export interface ReleasedStep {
	step: string;
	status: Status;
	phase: string | null;
	/**
	 * `released`: freed. `recorded_sent`: completed by the operator's word. `recorded_dropped`:
	 * completed as abandoned by the operator's word. `refused`: left as it was.
	 */
	action: 'released' | 'recorded_sent' | 'recorded_dropped' | 'refused';
	/**
	 * Why a step was refused: a run holds its lease, it may have been sent and no resolution was
	 * given, or it is no longer as `onlyIf` says.
	 */
	reason?: 'lease_live' | 'may_have_sent' | 'changed';
}

/** The audit entry's action for each thing a release did. */
export const AUDIT_ACTIONS = {
	released: 'release',
	recorded_sent: 'resolve_sent',
	recorded_dropped: 'resolve_dropped',
} as const satisfies Record<Exclude<ReleasedStep['action'], 'refused'>, string>;

export interface ListFilter {
	namespace?: string;
	status?: Status;
	/** Only in_progress rows whose lease has lapsed (by the ledger's clock). */
	stuckOnly?: boolean;
	/** true: only rows in phase `sending` (may have gone out); false: only rows in no phase. */
	sending?: boolean;
	/** Only rows not updated for at least this long (by the ledger's clock). */
	notUpdatedForMs?: number;
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

/** How many days a day's counters are kept (see `Ledger.addCounts`). */
export const COUNTS_KEPT_DAYS = 400;

/** Numbers to add to one namespace's counters for the current day. */
export interface CountIncrement {
	namespace: string;
	/** Counter name → amount to add. Names match /^[A-Za-z][A-Za-z0-9_]{0,63}$/; amounts are finite numbers and may be fractional (money) or 0. */
	counts: Record<string, number>;
}

/** One namespace's counters of one day. */
export interface DailyCounts {
	/** 'YYYY-MM-DD', the UTC day by the ledger's own clock (PostgreSQL now(), Redis TIME). */
	day: string;
	counts: Record<string, number>;
}

/**
 * Deleting expired rows (and, on Redis, the bookkeeping of rows that expired by themselves) without
 * a cron job: after a claim or an add of counts, at most one turn per `everyMs`, off the caller's
 * path. A turn purges `batch` rows at a time while each batch comes back full, at most
 * `maxBatches` batches (see backgroundPurge). Off when not given.
 */
export interface AutoPurgeOptions {
	/** Least time between the starts of two turns. */
	everyMs: number;
	/** Rows one purge call deletes at most. */
	batch: number;
	/** Purge calls one turn makes at most (default 50); a larger backlog goes over several turns. */
	maxBatches?: number;
}

/**
 * What every backend promises; each class documents only how it keeps it. Time is the ledger's
 * own: every verdict (lease live or lapsed, row expired, the day of a counter) uses the backend's
 * clock, never the caller's `Date`, so hosts with skewed clocks agree.
 */
export interface Ledger {
	/** Create or migrate the storage. Safe to call from many processes at once. */
	ensureSchema(): Promise<void>;
	/** Claim many rows in as few round trips as the backend allows. Outcomes are in request order. */
	claim(requests: ClaimRequest[], options: ClaimOptions): Promise<ClaimOutcome[]>;
	/**
	 * Set the recovery point of rows this claim still owns, in one statement: only rows that are
	 * live, `in_progress`, carry the given fence and whose lease has not lapsed are changed. Returns,
	 * in request order, whether each row was marked (false: absent, expired, settled, taken over, or
	 * lease lapsed). A later claim of the row reports the phase as `previousPhase` and clears it.
	 * A row in phase `sending` does not expire until it is recorded or an operator resolves it.
	 */
	markPhase(rows: FencedRow[], phase: string): Promise<boolean[]>;
	/**
	 * Extend leases this claim still holds, so that a run that is alive keeps its keys under a short
	 * lease: each row that is live, `in_progress`, carries the given fence and whose lease has not
	 * lapsed (all by the ledger's clock) gets its lease end set to the ledger's now + `leaseMs`, and
	 * its expiry to at least that (a row never expires while its lease is live). Nothing else on
	 * the row changes (not `updatedAt`: it still says when the key was let through). One statement
	 * (one script call) per chunk, rows locked in the global row order. Returns, in request order,
	 * whether each row was renewed (false: absent, expired, settled, released, taken over, or its
	 * lease had lapsed: a lapsed lease is never revived, as another run may already rely on it).
	 */
	renewLeases(rows: FencedRow[], leaseMs: number): Promise<boolean[]>;
	/** Record the final status of many rows. Returns one outcome per request, in request order. */
	record(requests: RecordRequest[], options: RecordOptions): Promise<RecordOutcome[]>;
	/** All live steps of a key. */
	get(namespace: string, key: string): Promise<LedgerRecord[]>;
	/**
	 * Optional: the rows of these ids as they are now, one per id in order, null where the row is
	 * absent or expired (by the ledger's clock). One round trip; writes nothing, counts nothing. For
	 * a reader that acts only on a settled row (a Prompt Cache hit) and otherwise claims as usual.
	 */
	peek?(ids: RowId[]): Promise<Array<LedgerRecord | null>>;
	/** Live rows by status, paged. */
	list(filter: ListFilter): Promise<ListPage>;
	/**
	 * Free one step, or every step of a key, so that a deliberate replay is allowed; or record a
	 * step that may have been sent as sent. Each live step gets one answer, and one audit row that
	 * keeps its status and phase. Nothing that may have gone out is freed without a resolution.
	 */
	release(request: ReleaseRequest): Promise<ReleasedStep[]>;
	/**
	 * Delete at most `limit` expired rows: ledger rows, and days of counters older than
	 * COUNTS_KEPT_DAYS where the backend does not expire them itself. Returns the number deleted.
	 */
	purgeExpired(limit: number): Promise<number>;
	stats(namespace: string): Promise<NamespaceStats>;
	/**
	 * Namespaces that hold rows, in byte order, at most `limit`, those after `after` when given (the
	 * last one of the previous page). A namespace whose rows all expired may be listed until they are
	 * purged. Costs O(limit) lookups, whatever the number of rows.
	 */
	listNamespaces(limit: number, after?: string | null): Promise<string[]>;
	/**
	 * Optional: `stats` of several namespaces, in their order, in one pass over their rows, for a
	 * backend where one pass beats one per namespace (PostgreSQL: a namespace's rows lie spread over
	 * the whole table, so each stats call reads most of it). Callers without it call `stats` each.
	 */
	statsMany?(namespaces: string[]): Promise<NamespaceStats[]>;
	getCheckpoint(namespace: string, name: string): Promise<Checkpoint | null>;
	/** Refuses to move backwards unless `force`. */
	setCheckpoint(
		namespace: string,
		name: string,
		value: string,
		options: { force: boolean; updatedBy: string | null },
	): Promise<Checkpoint>;
	/**
	 * Add to today's counters (UTC day by the ledger's clock) of each namespace, all in one round trip
	 * (one statement / one script or pipeline). Concurrent adds from many processes never lose each
	 * other's counts. A day's counters are kept COUNTS_KEPT_DAYS days.
	 */
	addCounts(increments: CountIncrement[]): Promise<void>;
	/** A namespace's counters for the last `days` days including today (by the ledger's clock), oldest day first; days with no counts are left out. */
	readCounts(namespace: string, days: number): Promise<DailyCounts[]>;
	/** Round trips made so far (for benchmarks and tests). */
	readonly roundTrips: number;
	close(): Promise<void>;
}
