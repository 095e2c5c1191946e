import { createHash } from 'crypto';
import type { Pool, PoolClient, QueryResultRow } from 'pg';

import { CheckpointRegressionError, LedgerError, LedgerInputError } from '../errors';
import { classifyExisting, effectiveTtlMs, idKey, resolveBatch, sortByRowId } from '../claims';
import { backgroundPurge } from '../autoPurge';
import type {
	AutoPurgeOptions,
	Checkpoint,
	ClaimOptions,
	ClaimOutcome,
	ClaimRequest,
	CountIncrement,
	DailyCounts,
	Ledger,
	LedgerRecord,
	ListFilter,
	ListPage,
	FencedRow,
	NamespaceStats,
	RecordOptions,
	RecordOutcome,
	RecordRequest,
	ReleaseRequest,
	ReleasedStep,
	RowId,
	Status,
} from '../types';
import { resultFromStored, resultToJson } from '../resultJson';
import { COUNTS_KEPT_DAYS, STATUSES } from '../types';
import { assertCountDays, assertIdentifier, assertNamespace, countsByNamespace } from '../validate';
import { isRetryableConflict, isUniqueViolation, timeoutsOf, toUnavailable, type Timeouts } from './errors';
import { claimFunctionPrefix, KEEP_UNTIL_RESOLVED, migrations, tableNames, type TableNames } from './schema';
import type { ExportBatch, ImportCounts, LedgerExport, LedgerImport } from '../transfer';
import { exportPostgres, importPostgres, postgresImportSql, type PostgresImportSql } from './transfer';

export interface PostgresLedgerOptions {
	pool: Pool;
	schema?: string;
	table?: string;
	/** Keys per claim statement. */
	chunkSize?: number;
	autoPurge?: AutoPurgeOptions;
}

const DEFAULT_CHUNK = 5000;
/** Keys in a claim chunk from which it may be inserted plainly (see claimSql, claimChunk). */
const PLAIN_INSERT_MIN_KEYS = 100;
/** Times a claim tries again when the rows it met kept changing under it, before it gives up. */
const CHANGING_ATTEMPTS = 5;
const keptChanging = () =>
	new LedgerError(
		'The ledger kept changing under a claim and no answer could be settled',
		'Run the workflow again; if it keeps happening, check for jobs that delete ledger rows.',
	);
/** Times a statement is run again after PostgreSQL reported a deadlock or serialization failure. */
const CONFLICT_RETRIES = 4;

/** Like Promise.all, but waits for every promise before throwing the first error. */
async function settleAll(work: Array<Promise<void>>): Promise<void> {
	const results = await Promise.allSettled(work);
	const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
	if (failed) throw failed.reason;
}

/** SQL: a timestamptz as epoch milliseconds, exact to the microsecond (extract() is numeric). */
const epochMs = (column: string) => `(extract(epoch FROM ${column}) * 1000)::float8`;

/** SQL: today, the UTC day by the server's clock. */
const TODAY = `(now() AT TIME ZONE 'UTC')::date`;

/** Columns of a record, with timestamps as epoch milliseconds (cheaper to parse than timestamptz). */
const recordColumns = (a: string, p = '') =>
	[
		`${a}.namespace AS ${p}namespace`,
		`${a}.key AS ${p}key`,
		`${a}.step AS ${p}step`,
		`${a}.status AS ${p}status`,
		`${a}.lease_holder AS ${p}lease_holder`,
		`${epochMs(`${a}.lease_expires_at`)} AS ${p}lease_expires_at`,
		`${a}.fingerprint AS ${p}fingerprint`,
		`${a}.version AS ${p}version`,
		`${a}.external_id AS ${p}external_id`,
		`${a}.result AS ${p}result`,
		`${a}.attempts AS ${p}attempts`,
		`${a}.previous_status AS ${p}previous_status`,
		`${epochMs(`${a}.first_seen_at`)} AS ${p}first_seen_at`,
		`${epochMs(`${a}.updated_at`)} AS ${p}updated_at`,
		`${epochMs(`${a}.expires_at`)} AS ${p}expires_at`,
		`${a}.phase AS ${p}phase`,
		`${leaseRemaining(a)} AS ${p}lease_remaining_ms`,
		`${a}.fence AS ${p}fence`,
	].join(', ');

/** SQL: milliseconds left on a row's lease by the server's clock; null without a lease, 0 once lapsed. */
const leaseRemaining = (a: string) =>
	`(CASE WHEN ${a}.lease_expires_at IS NULL THEN NULL ELSE greatest(0, extract(epoch FROM ${a}.lease_expires_at - now()) * 1000) END)::float8`;

/** The facts of a live row that a claim answers beside the request (see unpackGroup), in order. */
const BLOCKED_FACTS = ['status', 'lease_holder', 'lease_expires_at', 'version', 'external_id', 'result', 'attempts', 'previous_status',
	'first_seen_at', 'updated_at', 'expires_at', 'phase', 'fence'];

/**
 * SQL: the live rows of `existing` that blocked a claim, as one JSON array of groups. Each group
 * is `[positions, fingerprint, ...BLOCKED_FACTS, lease remaining]` (see unpackGroup): the
 * requests' 1-based positions in the statement's input stand for the rows' namespace, key and
 * step, and the fingerprint is `true` where it equals the request's. Rows claimed together share
 * every other fact, so 10,000 duplicates of one earlier batch answer as one group: the server
 * builds, and the client parses, 10,000 numbers instead of 10,000 rows of facts.
 */
const blockedGroups = (existing: string) => {
	const same = 'x.fingerprint IS NOT DISTINCT FROM x.in_fingerprint';
	const facts = BLOCKED_FACTS.map((c) => (c.endsWith('_at') ? epochMs(`g.${c}`) : `g.${c}`));
	return `(SELECT coalesce(json_agg(json_build_array(g.positions,
		CASE WHEN g.same THEN to_json(true) ELSE to_json(g.fingerprint) END, ${facts.join(', ')}, ${leaseRemaining('g')})), '[]')
	FROM (
		SELECT json_agg(x.in_ord) AS positions, ${same} AS same, CASE WHEN ${same} THEN NULL ELSE x.fingerprint END AS fingerprint,
			${BLOCKED_FACTS.map((c) => `x.${c}`).join(', ')}
		FROM ${existing} x WHERE NOT x.claimable
		GROUP BY ${BLOCKED_FACTS.map((_, i) => i + 4).concat([2, 3]).join(', ')}
	) g)`;
};

/** One group of a claim's blocked answer (see blockedGroups): the facts its rows share. */
interface BlockedGroup {
	positions: number[];
	/** Null where each row's fingerprint equals its request's. */
	fingerprint: string | null | undefined;
	facts: Omit<LedgerRecord, 'namespace' | 'key' | 'step' | 'fingerprint'>;
}

function unpackGroup(v: unknown[]): BlockedGroup {
	return {
		positions: v[0] as number[],
		fingerprint: v[1] === true ? undefined : (v[1] as string | null),
		facts: {
			status: v[2] as Status,
			leaseHolder: v[3] as string | null,
			leaseExpiresAt: ms(v[4]),
			version: v[5] as string | null,
			externalId: v[6] as string | null,
			result: resultFromStored(v[7]),
			attempts: v[8] as number,
			previousStatus: v[9] as Status | null,
			firstSeenAt: ms(v[10]) as Date,
			updatedAt: ms(v[11]) as Date,
			expiresAt: ms(v[12]) as Date,
			phase: (v[13] ?? null) as string | null,
			fence: int(v[14]),
			leaseRemainingMs: (v[15] ?? null) as number | null,
		},
	};
}

/** The row a request found, from its group (records are values: the group's Dates are shared). */
function blockedRecord(group: BlockedGroup, r: ClaimRequest): LedgerRecord {
	const f = group.facts;
	// Named fields, not a spread: a third of the cost for 10,000 duplicates.
	return {
		namespace: r.namespace,
		key: r.key,
		step: r.step,
		fingerprint: group.fingerprint === undefined ? (r.fingerprint ?? null) : group.fingerprint,
		status: f.status,
		leaseHolder: f.leaseHolder,
		leaseExpiresAt: f.leaseExpiresAt,
		leaseRemainingMs: f.leaseRemainingMs,
		fence: f.fence,
		version: f.version,
		externalId: f.externalId,
		result: f.result,
		attempts: f.attempts,
		previousStatus: f.previousStatus,
		firstSeenAt: f.firstSeenAt,
		updatedAt: f.updatedAt,
		expiresAt: f.expiresAt,
		phase: f.phase,
	};
}

const ms = (v: unknown): Date | null => (v === null || v === undefined ? null : new Date(v as number));
/** A bigint as the driver gives it (text), or as JSON gives it (a number). */
const int = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

function toRecord(row: QueryResultRow, p = ''): LedgerRecord {
	return {
		namespace: row[`${p}namespace`],
		key: row[`${p}key`],
		step: row[`${p}step`],
		status: row[`${p}status`],
		leaseHolder: row[`${p}lease_holder`],
		leaseExpiresAt: ms(row[`${p}lease_expires_at`]),
		fingerprint: row[`${p}fingerprint`],
		version: row[`${p}version`],
		externalId: row[`${p}external_id`],
		result: resultFromStored(row[`${p}result`]),
		attempts: row[`${p}attempts`],
		previousStatus: row[`${p}previous_status`],
		firstSeenAt: ms(row[`${p}first_seen_at`]) as Date,
		updatedAt: ms(row[`${p}updated_at`]) as Date,
		expiresAt: ms(row[`${p}expires_at`]) as Date,
		phase: row[`${p}phase`] ?? null,
		leaseRemainingMs: row[`${p}lease_remaining_ms`] ?? null,
		fence: int(row[`${p}fence`]),
	};
}

/** SQL: is text value `a` newer than `b`? Numeric when both are numbers, otherwise byte order (ISO dates sort right). */
const isNewer = (a: string, b: string) =>
	`(CASE WHEN ${b} IS NULL THEN ${a} IS NOT NULL WHEN ${a} IS NULL THEN false
		WHEN ${a} ~ '^-?[0-9]+(\\.[0-9]+)?$' AND ${b} ~ '^-?[0-9]+(\\.[0-9]+)?$' THEN ${a}::numeric > ${b}::numeric
		ELSE ${a} COLLATE "C" > ${b} COLLATE "C" END)`;

/** Where a claim statement finds its options (see claimSql): mode, reclaim own lease, holder. */
interface ClaimParams {
	mode: string;
	reclaim: string;
	holder: string;
}
const CLAIM_PARAMS: ClaimParams = { mode: '$10', reclaim: '$11', holder: '$7' };

/**
 * SQL: may the claim `incoming` (its fingerprint and version) take the row `row` over? It has
 * expired; or mode `newer` brings a newer version and no live lease holds it; or the content
 * agrees and it is a lapsed lease, the holder's own lease (when asked), or a retryable failure.
 */
const claimable = (row: string, incoming: string, p: ClaimParams = CLAIM_PARAMS) => `(
			${row}.expires_at <= now()
			OR (${p.mode} = 'newer' AND ${isNewer(`${incoming}.version`, `${row}.version`)}
				AND NOT (${row}.status = 'in_progress' AND ${row}.lease_expires_at > now()))
			OR ((${row}.fingerprint IS NULL OR ${incoming}.fingerprint IS NULL OR ${row}.fingerprint = ${incoming}.fingerprint)
				AND ((${row}.status = 'in_progress' AND (${row}.lease_expires_at <= now() OR (${p.reclaim} AND ${row}.lease_holder = ${p.holder})))
					OR ${row}.status = 'failed_retryable')))`;

const CLAIM_INSERT_COLUMNS = `namespace, key, step, status, lease_holder, lease_expires_at, fingerprint, version,
		attempts, first_seen_at, updated_at, expires_at, fence`;

/** SQL: the values of a new claim's row, for the request `i` (ns, k, st, fingerprint, version) and its fencing token. */
const claimInsertValues = (i: { ns: string; k: string; st: string; fingerprint: string; version: string }, fence: string) =>
	`${i.ns}, ${i.k}, ${i.st}, $6, $7, CASE WHEN $6 = 'in_progress' THEN now() + $8 * interval '1 millisecond' END,
		${i.fingerprint}, ${i.version}, 1, now(), now(), now() + $9 * interval '1 millisecond', ${fence}`;

/**
 * SQL: a claim's INSERT meeting a row that is there: it takes the row over only where the latest
 * row version, under its lock, is claimable, so two claimers can never both win.
 */
const CLAIM_TAKE_OVER = `ON CONFLICT (namespace, key, step) DO UPDATE SET
		status = excluded.status,
		lease_holder = excluded.lease_holder,
		lease_expires_at = excluded.lease_expires_at,
		fingerprint = excluded.fingerprint,
		version = excluded.version,
		previous_status = CASE WHEN l.expires_at <= now() THEN NULL ELSE l.status END,
		-- SET expressions read the row as it was: this keeps the phase the replaced claim reached.
		previous_phase = CASE WHEN l.expires_at <= now() THEN NULL ELSE l.phase END,
		-- Taking over a step that may have gone out keeps that knowledge on the row (and the row
		-- until it is resolved), so a second crash before this claim records anything cannot lose it.
		phase = CASE WHEN l.expires_at > now() AND l.phase = 'sending' THEN 'sending' END,
		attempts = CASE WHEN l.expires_at <= now() THEN 1 ELSE l.attempts + 1 END,
		first_seen_at = CASE WHEN l.expires_at <= now() THEN now() ELSE l.first_seen_at END,
		external_id = CASE WHEN l.expires_at <= now() THEN NULL ELSE l.external_id END,
		result = CASE WHEN l.expires_at <= now() THEN NULL ELSE l.result END,
		updated_at = now(),
		expires_at = CASE WHEN l.expires_at > now() AND l.phase = 'sending' THEN ${KEEP_UNTIL_RESOLVED} ELSE excluded.expires_at END,
		fence = excluded.fence
	WHERE ${claimable('l', 'excluded')}`;

const CLAIMED_COLUMNS = `l.namespace, l.key, l.step, l.attempts, l.previous_status, l.external_id, l.result,
		l.first_seen_at, l.updated_at, l.previous_phase, l.expires_at, l.phase`;

/** SQL: a claimed row `c` as one JSON array, in the order renewedClaimFacts reads. */
const claimedFacts = (c: string) =>
	`json_build_array(${c}.namespace, ${c}.key, ${c}.step, ${c}.attempts, ${c}.previous_status, ${c}.external_id, ${c}.result,
		${epochMs(`${c}.first_seen_at`)}, ${epochMs(`${c}.updated_at`)}, ${c}.previous_phase, ${epochMs(`${c}.expires_at`)}, ${c}.phase)`;

/** SQL: add `n` duplicates blocked to namespace `ns`'s counters; `rows` a SELECT of (ns, n). */
const countBlocked = (counters: string, rows: string) => `INSERT INTO ${counters} AS c (namespace, duplicates_blocked)
	${rows}
	ON CONFLICT (namespace) DO UPDATE SET duplicates_blocked = c.duplicates_blocked + excluded.duplicates_blocked, updated_at = now()`;

/** What a claim carries beyond the request: the same for every new claim, read back for a renewed one. */
interface ClaimFacts {
	fence: number;
	attempts: number;
	previousStatus: Status | null;
	previousPhase: string | null;
	externalId: string | null;
	result: unknown;
	firstSeenAt: Date;
	updatedAt: Date;
	expiresAt: Date;
	leaseExpiresAt: Date | null;
	/** `sending` when the claim took over a step that may have gone out (see claimSql). */
	phase: string | null;
}

/**
 * Every new claim of one statement: attempts 1, nothing carried over, the statement's now() as
 * first seen and updated. One object, and one set of Dates, for all of them (records are values;
 * nothing mutates them).
 */
function newClaimFacts(now: number, fence: number, holder: string | null, options: ClaimOptions, ttlMs: number): ClaimFacts {
	const at = new Date(now);
	return {
		fence,
		attempts: 1,
		previousStatus: null,
		previousPhase: null,
		externalId: null,
		result: null,
		firstSeenAt: at,
		updatedAt: at,
		expiresAt: new Date(now + ttlMs),
		leaseExpiresAt: holder === null ? null : new Date(now + options.leaseMs),
		phase: null,
	};
}

/** A renewed claim as the statement answers it: namespace, key, step, then these columns. */
function renewedClaimFacts(row: unknown[], fence: number, holder: string | null, options: ClaimOptions, ttlMs: number): ClaimFacts {
	const [, , , attempts, previousStatus, externalId, result, firstSeenAt, updatedAt, previousPhase, expiresAt, phase] = row as [
		string, string, string, number, Status | null, string | null, unknown, number, number, string | null, number, string | null,
	];
	return {
		fence,
		attempts,
		previousStatus,
		previousPhase: previousPhase ?? null,
		externalId,
		result: resultFromStored(result),
		firstSeenAt: new Date(firstSeenAt),
		updatedAt: new Date(updatedAt),
		expiresAt: new Date(expiresAt),
		phase: phase ?? null,
		leaseExpiresAt: holder === null ? null : new Date(updatedAt + options.leaseMs),
	};
}

function claimedOutcome(r: ClaimRequest, status: Status, holder: string | null, options: ClaimOptions, facts: ClaimFacts): ClaimOutcome {
	const record: LedgerRecord = {
		namespace: r.namespace,
		key: r.key,
		step: r.step,
		status,
		leaseHolder: holder,
		leaseExpiresAt: facts.leaseExpiresAt,
		leaseRemainingMs: holder === null ? null : options.leaseMs,
		fence: facts.fence,
		fingerprint: r.fingerprint,
		version: r.version ?? null,
		externalId: facts.externalId,
		result: facts.result,
		attempts: facts.attempts,
		previousStatus: facts.previousStatus,
		firstSeenAt: facts.firstSeenAt,
		updatedAt: facts.updatedAt,
		expiresAt: facts.expiresAt,
		phase: facts.phase,
	};
	return { kind: 'claimed', record, previousStatus: facts.previousStatus, previousPhase: facts.previousPhase };
}

/** The one row a claim statement answers (see claimSql). */
interface ClaimAnswer extends QueryResultRow {
	now: number;
	/** The fencing token of every row this statement claimed (bigint, as text). */
	fence: string;
	renewed: unknown[][];
	blocked: unknown[][];
	unresolved: number[] | null;
}


export class PostgresLedger implements Ledger, LedgerExport, LedgerImport {
	private readonly pool: Pool;
	/** The pool's time limits, named in timeout errors. */
	private readonly timeouts: Timeouts;
	private readonly t: TableNames;
	private readonly table: string;
	private readonly chunkSize: number;
	private schemaReady: Promise<void> | null = null;
	private trips = 0;
	/** Called after each claim and add of counts (see backgroundPurge). */
	private readonly purgeInBackground: () => void;
	private importSql: PostgresImportSql | null = null;
	/** The one-key claim function (see claimOneFunction). */
	private readonly claimOneSql: ReturnType<PostgresLedger['claimOneFunction']>;
	/** Whether ensureSchema found or made it; without it a one-key claim runs claimSql. */
	private oneKeyFunction = false;
	private readonly sql: {
		claim: string;
		recordFenced: string;
		recordUnfenced: string;
		markPhase: string;
		renewLeases: string;
		release: string;
		addCounts: string;
		purge: string;
		peekOne: string;
	};

	constructor(options: PostgresLedgerOptions) {
		this.pool = options.pool;
		this.timeouts = timeoutsOf(options.pool);
		const schema = assertIdentifier(options.schema ?? 'public', 'schema name');
		this.table = assertIdentifier(options.table ?? 'idempotency_ledger', 'table name');
		if (this.table.length > 50) assertIdentifier(`${this.table}_checkpoints`, 'table name');
		this.t = tableNames(schema, this.table);
		this.chunkSize = options.chunkSize ?? DEFAULT_CHUNK;
		this.purgeInBackground = backgroundPurge(options.autoPurge, (batch) => this.purgeExpired(batch));
		this.claimOneSql = this.claimOneFunction();
		this.sql = {
			claim: this.claimSql(),
			recordFenced: this.recordFencedSql(),
			recordUnfenced: this.recordUnfencedSql(),
			markPhase: this.markPhaseSql(),
			renewLeases: this.renewLeasesSql(),
			release: this.releaseSql(),
			addCounts: this.addCountsSql(),
			purge: this.purgeSql(),
			peekOne: `SELECT ${recordColumns('l')} FROM ${this.t.ledger} l WHERE l.namespace = $1 AND l.key = $2 AND l.step = $3 AND l.expires_at > now()`,
		};
	}

	get roundTrips(): number {
		return this.trips;
	}

	get tables(): TableNames {
		return this.t;
	}

	/**
	 * One statement. Outside a transaction (no `client`), a statement that PostgreSQL ended with a
	 * deadlock or serialization failure was rolled back whole, so it is run again a few times after
	 * a short random pause; every statement locks rows in one order, so this should not happen.
	 */
	private async query<R extends QueryResultRow = QueryResultRow>(
		text: string,
		values: unknown[] = [],
		client?: PoolClient,
	): Promise<R[]> {
		for (let attempt = 0; ; attempt++) {
			this.trips++;
			try {
				// Unnamed statements only: a named one lives in the server session, which PgBouncer in
				// transaction mode hands to other clients between transactions.
				const res = await (client ?? this.pool).query<R>(text, values);
				return res.rows;
			} catch (error) {
				if (client || attempt >= CONFLICT_RETRIES || !isRetryableConflict(error)) throw toUnavailable(error, this.t, this.timeouts);
				await new Promise((r) => setTimeout(r, 5 + Math.random() * 20 * 2 ** attempt));
			}
		}
	}

	ensureSchema(): Promise<void> {
		this.schemaReady ??= this.migrate().catch((error) => {
			this.schemaReady = null;
			throw error;
		});
		return this.schemaReady;
	}

	private async migrate(): Promise<void> {
		const steps = migrations(this.t, this.table);
		// Fast path, one round trip and no lock: the schema is already current, and this version's
		// one-key claim function is there.
		try {
			const rows = await this.query<{ v: number; claim_one: boolean }>(
				`SELECT coalesce(max(version), 0) AS v, to_regprocedure($1) IS NOT NULL AS claim_one FROM ${this.t.migrations}`,
				[this.claimOneSql.signature],
			);
			this.oneKeyFunction = rows[0].claim_one;
			if (rows[0].v >= steps.length) {
				if (!this.oneKeyFunction) this.oneKeyFunction = await this.createClaimOneFunction();
				return;
			}
		} catch (error) {
			// 42P01: no migrations table yet, a new ledger.
			if ((error as { code?: string }).code !== '42P01') throw error;
		}
		await this.inTransaction(async (client) => {
			// The schema is shared by every ledger in it, so it gets its own lock, always taken before
			// the ledger's: two processes creating two ledgers in one new schema wait for each other.
			await this.query(`SELECT pg_advisory_xact_lock(hashtext($1))`, [this.t.schemaLockKey], client);
			await this.query(`CREATE SCHEMA IF NOT EXISTS "${this.t.schema}"`, [], client);
			await this.query(`SELECT pg_advisory_xact_lock(hashtext($1))`, [this.t.lockKey], client);
			await this.query(
				`CREATE TABLE IF NOT EXISTS ${this.t.migrations} (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
				[],
				client,
			);
			const rows = await this.query<{ v: number }>(
				`SELECT coalesce(max(version), 0) AS v FROM ${this.t.migrations}`,
				[],
				client,
			);
			for (let v = rows[0].v + 1; v <= steps.length; v++) {
				await this.query(steps[v - 1], [], client);
				await this.query(`INSERT INTO ${this.t.migrations} (version) VALUES ($1)`, [v], client);
			}
			await this.query(this.claimOneSql.create, [], client);
		});
		this.oneKeyFunction = true;
	}

	/**
	 * This version's one-key claim function, on a ledger whose tables are current (made by another
	 * version, or by an administrator). A ledger user that may not create it (no CREATE on the
	 * schema: the tables were made by an administrator) claims one key with claimSql instead.
	 */
	private async createClaimOneFunction(): Promise<boolean> {
		try {
			await this.inTransaction(async (client) => {
				await this.query(`SELECT pg_advisory_xact_lock(hashtext($1))`, [this.t.lockKey], client);
				await this.query(this.claimOneSql.create, [], client);
			});
			return true;
		} catch (error) {
			if ((error as { code?: string }).code === '42501') return false;
			throw error;
		}
	}

	/** `work` in one transaction on one connection of the pool: committed, or rolled back and thrown. */
	private async inTransaction(work: (client: PoolClient) => Promise<void>): Promise<void> {
		let client: PoolClient;
		try {
			client = await this.pool.connect();
		} catch (error) {
			throw toUnavailable(error, this.t, this.timeouts);
		}
		try {
			await this.query('BEGIN', [], client);
			await work(client);
			await this.query('COMMIT', [], client);
		} catch (error) {
			await client.query('ROLLBACK').catch(() => undefined);
			throw error;
		} finally {
			client.release();
		}
	}

	private claimSql(): string {
		const t = this.t;
		// $1..$5 JSON arrays (namespace, key, step, fingerprint, version; see claimInput), in the
		// global row order (the key columns' COLLATE "C") so that concurrent batches lock rows in the same
		// order; $6 status, $7 holder, $8 lease ms, $9 ttl ms (never shorter than the lease), $10
		// mode, $11 reclaim a live lease of the same holder, $12 / $13 the namespace / step of a
		// batch that has only one (then $1 / $3 are empty), $14 insert plainly (below). Every row
		// this statement claims gets one new fencing token.
		//
		// Rows that the statement's snapshot already shows as live and not claimable are not
		// offered to the INSERT at all: no row lock, no write, the same cost as a plain index probe.
		// Everything else goes through INSERT ... ON CONFLICT DO UPDATE ... WHERE, which re-checks
		// the latest row version under its lock, so two claimers can never both win.
		//
		// $14: when the snapshot shows none of the chunk's rows, insert them all with a plain INSERT
		// (\`fresh\`): ON CONFLICT probes the primary key once more per row and writes a second WAL
		// record to confirm each speculative insertion, a quarter of a 5,000-key statement here. A
		// row a concurrent claim committed meanwhile then fails the whole statement with a unique
		// violation, after which claimChunk runs it again with $14 false. Both INSERTs take rows in
		// the same order, so the lock order argument holds for either.
		const insertValues = claimInsertValues({ ns: 'i.ns', k: 'i.k', st: 'i.st', fingerprint: 'i.fingerprint', version: 'i.version' }, '(SELECT fence FROM token)');
		return `
WITH input AS (
	SELECT coalesce(i.ns, $12) AS ns, i.k, coalesce(i.st, $13) AS st, i.fingerprint, i.version, i.ord
	FROM ROWS FROM (json_array_elements_text($2::json), json_array_elements_text($1::json),
		json_array_elements_text($3::json), json_array_elements_text($4::json), json_array_elements_text($5::json))
		WITH ORDINALITY AS i(k, ns, st, fingerprint, version, ord)
),
token AS (SELECT nextval('${t.fenceSequence}') AS fence),
existing AS MATERIALIZED (
	SELECT e.*, i.ord AS in_ord, i.fingerprint AS in_fingerprint, ${claimable('e', 'i')} AS claimable
	FROM input i JOIN ${t.ledger} e ON e.namespace = i.ns AND e.key = i.k AND e.step = i.st
),
-- The input rows, and those the snapshot shows held (live and not claimable): when they are all
-- held, as in a batch of duplicates, nothing is offered to the INSERT at all.
tally AS (SELECT (SELECT count(*) FROM input) AS inputs, (SELECT count(*) FROM existing x WHERE NOT x.claimable) AS held),
plain AS (SELECT $14::boolean AND NOT EXISTS (SELECT 1 FROM existing) AS yes),
fresh AS (
	INSERT INTO ${t.ledger} AS l (${CLAIM_INSERT_COLUMNS})
	SELECT ${insertValues} FROM input i
	WHERE (SELECT yes FROM plain)
	ORDER BY i.ord
	RETURNING ${CLAIMED_COLUMNS}
),
upserted AS (
	INSERT INTO ${t.ledger} AS l (${CLAIM_INSERT_COLUMNS})
	SELECT ${insertValues} FROM input i
	WHERE NOT (SELECT yes FROM plain) AND (SELECT held < inputs FROM tally) AND NOT EXISTS (
		SELECT 1 FROM existing x WHERE x.namespace = i.ns AND x.key = i.k AND x.step = i.st AND NOT x.claimable
	)
	ORDER BY i.ord
	${CLAIM_TAKE_OVER}
	-- Times as they are: only renewed claims are answered, and only theirs are converted (numeric
	-- extract() for every row cost a 5,000-key statement 15-25 % of its time).
	RETURNING ${CLAIMED_COLUMNS}
),
claimed AS (SELECT * FROM fresh UNION ALL SELECT * FROM upserted),
blocked AS (
	${countBlocked(t.counters, `SELECT ns, n FROM (
		SELECT i.ns, count(*) - (SELECT count(*) FROM claimed c2 WHERE c2.namespace = i.ns) AS n FROM input i GROUP BY i.ns
	) s WHERE n > 0 ORDER BY ns COLLATE "C"`)}
)
-- One row. Every input row is exactly one of: blocked (a live row the snapshot showed, never
-- offered to the insert), claimed, or unresolved (a concurrent commit got there first). A claim
-- that took a fresh or lapsed row (attempts = 1) reads exactly like a new one, so the answer
-- lists only the other claims ("renewed": a retry, an expired lease, a newer version) by row id,
-- the blocked rows by input position, and the unresolved positions only when there are any.
-- Nothing per row for the common case, and no join of 10,000 claimed rows back to the input.
SELECT
	${epochMs('now()')} AS now,
	(SELECT fence FROM token) AS fence,
	(SELECT coalesce(json_agg(${claimedFacts('c')}), '[]') FROM claimed c WHERE c.attempts > 1) AS renewed,
	${blockedGroups('existing')} AS blocked,
	CASE WHEN (SELECT count(*) FROM claimed) + (SELECT held FROM tally) < (SELECT inputs FROM tally)
		THEN (SELECT json_agg(i.ord) FROM input i
			WHERE NOT EXISTS (SELECT 1 FROM claimed c WHERE c.namespace = i.ns AND c.key = i.k AND c.step = i.st)
				AND NOT EXISTS (SELECT 1 FROM existing x WHERE x.in_ord = i.ord AND NOT x.claimable))
	END AS unresolved`;
	}

	/**
	 * One key, the webhook case, in one round trip: a function of this ledger's that runs the claim
	 * as one INSERT … ON CONFLICT DO UPDATE … WHERE of that row (the same take-over rule as
	 * claimSql's, re-checked under the row's lock) and, when the row is held, reads it with a
	 * fresh snapshot and counts the duplicate. Parsing and planning claimSql's CTEs cost a one-key
	 * claim most of its time; a PL/pgSQL function plans its statements once per server connection
	 * (and again on another one: nothing outlives a transaction, so PgBouncer's transaction mode
	 * is fine). Its name carries a hash of its text, so a version of this code only ever calls the
	 * body it was written with, whichever other versions share the ledger (ensureSchema creates
	 * it). Parameters as claimSql's, with $1..$5 one namespace, key, step, fingerprint and version.
	 * It answers one row: the claim (the statement's now, the fence, claimedFacts), or the row
	 * that held it back (recordColumns, and whether the claim may take it over by now), or
	 * neither when the row went away meanwhile.
	 */
	private claimOneFunction(): { name: string; signature: string; create: string; call: string } {
		const values = claimInsertValues({ ns: '$1', k: '$2', st: '$3', fingerprint: '$4', version: '$5' }, `nextval('${this.t.fenceSequence}')`);
		const body = `BEGIN
	RETURN QUERY INSERT INTO ${this.t.ledger} AS l (${CLAIM_INSERT_COLUMNS})
	VALUES (${values})
	${CLAIM_TAKE_OVER}
	RETURNING ${epochMs('now()')}, l.fence, ${claimedFacts('l')}, NULL::json;
	IF FOUND THEN RETURN; END IF;
	RETURN QUERY WITH h AS MATERIALIZED (
		SELECT ${recordColumns('l')}, ${claimable('l', 'i')} AS claimable
		FROM ${this.t.ledger} l, (SELECT $4 AS fingerprint, $5 AS version) i
		WHERE l.namespace = $1 AND l.key = $2 AND l.step = $3
	),
	blocked AS (${countBlocked(this.t.counters, 'SELECT namespace, 1 FROM h WHERE NOT claimable')})
	SELECT NULL::float8, NULL::bigint, NULL::json, row_to_json(h) FROM h;
END`;
		const hash = createHash('sha256').update(`${this.t.ledger}\n${body}`).digest('hex').slice(0, 12);
		const name = `"${this.t.schema}"."${claimFunctionPrefix(this.table)}${hash}"`;
		const args = 'text, text, text, text, text, text, text, float8, float8, text, boolean';
		return {
			name,
			signature: `${name}(${args})`,
			create: `CREATE OR REPLACE FUNCTION ${name}(${args})
RETURNS TABLE (claimed_at float8, claimed_fence bigint, claimed json, held json) LANGUAGE plpgsql AS $claim$
${body}
$claim$`,
			call: `SELECT * FROM ${name}($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		};
	}

	async claim(requests: ClaimRequest[], options: ClaimOptions): Promise<ClaimOutcome[]> {
		await this.ensureSchema();
		// Distinct rows in the global row order (resolveBatch). Chunks hold disjoint keys, each
		// locked in that order, so they run side by side on separate pool connections (as many as
		// the pool allows) and the server inserts them on as many cores as it has. A batch of one
		// chunk is one statement, one round trip.
		const { unique: sorted, outcomes } = resolveBatch(requests);
		if (sorted.length === 1 && this.oneKeyFunction) {
			await this.claimOne(sorted[0], requests, outcomes, options);
			this.purgeInBackground();
			return outcomes as ClaimOutcome[];
		}
		const chunks: number[][] = [];
		for (let start = 0; start < sorted.length; start += this.chunkSize) chunks.push(sorted.slice(start, start + this.chunkSize));
		await settleAll(chunks.map((chunk) => this.claimChunk(chunk, requests, outcomes, options)));
		this.purgeInBackground();
		return outcomes as ClaimOutcome[];
	}

	/** One key (see claimOneFunction): claimed, or held by the row it answers; again if that row went away or lapsed meanwhile. */
	private async claimOne(index: number, requests: ClaimRequest[], outcomes: Array<ClaimOutcome | undefined>, options: ClaimOptions): Promise<void> {
		const r = requests[index];
		const status = options.mode === 'lease' ? 'in_progress' : 'completed';
		const holder = options.mode === 'lease' ? options.holder : null;
		const ttlMs = effectiveTtlMs(options);
		const params = [r.namespace, r.key, r.step, r.fingerprint, r.version ?? null, status, holder, options.leaseMs, ttlMs, options.mode, options.reclaimOwnLease === true];
		for (let attempt = 0; attempt < CHANGING_ATTEMPTS; attempt++) {
			const [answer] = await this.query<{ claimed_at: number; claimed_fence: string; claimed: unknown[] | null; held: QueryResultRow | null }>(
				this.claimOneSql.call,
				params,
			);
			if (answer?.claimed) {
				const fence = Number(answer.claimed_fence);
				const renewed = (answer.claimed[3] as number) > 1;
				const facts = renewed ? renewedClaimFacts(answer.claimed, fence, holder, options, ttlMs) : newClaimFacts(answer.claimed_at, fence, holder, options, ttlMs);
				outcomes[index] = claimedOutcome(r, status, holder, options, facts);
				return;
			}
			if (answer?.held && answer.held.claimable === false) {
				outcomes[index] = classifyExisting(toRecord(answer.held), r, options.mode);
				return;
			}
		}
		throw keptChanging();
	}

	private async claimChunk(
		indexes: number[],
		requests: ClaimRequest[],
		outcomes: Array<ClaimOutcome | undefined>,
		options: ClaimOptions,
	): Promise<void> {
		const status = options.mode === 'lease' ? 'in_progress' : 'completed';
		const holder = options.mode === 'lease' ? options.holder : null;
		const ttlMs = effectiveTtlMs(options);
		let pending = indexes;
		// Set once a plain INSERT lost a race (see claimSql): every later attempt re-checks each row.
		let raced = false;
		for (let attempt = 0; pending.length > 0; attempt++) {
			// A plain INSERT of a chunk the snapshot shows none of, until a concurrent claim's row makes
			// it fail; only for big chunks, where it saves milliseconds, so that a storm of one-item
			// executions never meets that failure.
			const plain = !raced && pending.length >= PLAIN_INSERT_MIN_KEYS;
			if (attempt >= CHANGING_ATTEMPTS) throw keptChanging();
			const input = claimInput(pending, requests);
			let answer: ClaimAnswer;
			try {
				[answer] = await this.query<ClaimAnswer>(this.sql.claim, [
					...input.columns,
					status,
					holder,
					options.leaseMs,
					ttlMs,
					options.mode,
					options.reclaimOwnLease === true,
					input.namespace,
					input.step,
					plain,
				]);
			} catch (error) {
				// Rolled back whole: nothing was claimed or counted. The row that failed it is
				// committed, and the statement runs again on the path that re-checks every row.
				if (!plain || !isUniqueViolation(error)) throw error;
				raced = true;
				continue;
			}
			// Blocked groups and unresolved positions name 1-based positions in `pending`.
			const blocked = new Array<BlockedGroup | undefined>(pending.length);
			for (const packed of answer.blocked) {
				const group = unpackGroup(packed);
				const positions = group.positions;
				for (let j = 0; j < positions.length; j++) blocked[positions[j] - 1] = group;
			}
			const lost = new Set((answer.unresolved ?? []).map((ord) => ord - 1));
			const renewed = new Map(answer.renewed.map((row) => [idKey(row[0] as string, row[1] as string, row[2] as string), row]));
			const fence = Number(answer.fence);
			const fresh = newClaimFacts(answer.now, fence, holder, options, ttlMs);
			const unresolved: number[] = [];
			for (let position = 0; position < pending.length; position++) {
				const index = pending[position];
				const r = requests[index];
				const existing = blocked[position];
				if (existing) {
					outcomes[index] = classifyExisting(blockedRecord(existing, r), r, options.mode);
				} else if (lost.has(position)) {
					unresolved.push(index);
				} else {
					const again = renewed.size > 0 ? renewed.get(idKey(r.namespace, r.key, r.step)) : undefined;
					outcomes[index] = claimedOutcome(r, status, holder, options, again ? renewedClaimFacts(again, fence, holder, options, ttlMs) : fresh);
				}
			}
			// A row committed by a concurrent claim after this statement's snapshot blocks the
			// insert but is invisible to the statement. Read it with a fresh snapshot.
			pending = [];
			if (unresolved.length > 0) {
				const fresh = await this.fetchMany(unresolved.map((i) => requests[i]));
				for (const index of unresolved) {
					const r = requests[index];
					const found = fresh.get(idKey(r.namespace, r.key, r.step));
					if (found?.live) {
						outcomes[index] = classifyExisting(found.record, r, options.mode);
					} else {
						pending.push(index);
					}
				}
			}
		}
	}

	/** Rows as they are now, each with the server's verdict on whether it is live (not expired). */
	private async fetchMany(ids: ClaimRequest[]): Promise<Map<string, { record: LedgerRecord; live: boolean }>> {
		const [ns, k, st] = columns(ids);
		const rows = await this.query(
			`SELECT ${recordColumns('l')}, l.expires_at > now() AS live FROM ${this.t.ledger} l
			 JOIN unnest($1::text[], $2::text[], $3::text[]) AS i(ns, k, st) ON l.namespace = i.ns AND l.key = i.k AND l.step = i.st`,
			[ns, k, st],
		);
		return new Map(rows.map((row) => [idKey(row.namespace, row.key, row.step), { record: toRecord(row), live: row.live === true }]));
	}

	/**
	 * The columns a settled row gets, shared by both record statements. `i` is the request (its
	 * status, fingerprint, external_id and result), `l` the row as it is. A `needs_review` row keeps the phase `sending`
	 * (its own, or the one the claim it belongs to took over): the message may have gone out. Such
	 * a row is kept until a person resolves it; every other row lives `$ttl` from now. `keepSending`
	 * (SQL, true for a fenced failed_retryable write with keepSending) keeps the phase the same way.
	 */
	private settledColumns(i: string, ttl: string, keepSending = 'false'): string {
		const keeps = `(${i}.status = 'needs_review' OR (${i}.status = 'failed_retryable' AND ${keepSending}))`;
		const phase = `CASE WHEN ${keeps} AND l.expires_at > now() THEN coalesce(l.phase, CASE WHEN l.status = 'in_progress' THEN l.previous_phase END) END`;
		return `status = ${i}.status,
	lease_holder = NULL,
	lease_expires_at = NULL,
	phase = ${phase},
	fingerprint = coalesce(${i}.fingerprint, CASE WHEN l.expires_at <= now() THEN NULL ELSE l.fingerprint END),
	external_id = ${i}.external_id,
	result = ${i}.result,
	attempts = CASE WHEN l.expires_at <= now() THEN 1 ELSE l.attempts END,
	first_seen_at = CASE WHEN l.expires_at <= now() THEN now() ELSE l.first_seen_at END,
	updated_at = now(),
	expires_at = CASE WHEN ${phase} = 'sending' THEN ${KEEP_UNTIL_RESOLVED} ELSE now() + ${ttl} * interval '1 millisecond' END`;
	}

	/**
	 * SQL: the live rows of the claims named by `i` (claim_step, claim_fence), and the rows `rows`
	 * selects, locked together in the global row order; each with its fence and whether it is live,
	 * as the latest row version says (a locking read waits for, and then reads, a concurrent
	 * change). A claim whose row was taken over, released or expired while this statement started
	 * is seen as it is now; holding the lock, no claim can take that row over until this
	 * statement's writes are done.
	 */
	private lockedSql(rows: string): string {
		return `locked AS MATERIALIZED (
	SELECT l.namespace, l.key, l.step, l.fence, l.status, l.expires_at > now() AS live FROM ${this.t.ledger} l
	WHERE (l.namespace, l.key, l.step) IN (${rows} UNION ALL SELECT ns, k, claim_step FROM i WHERE claim_step IS NOT NULL)
	ORDER BY l.namespace, l.key, l.step
	FOR UPDATE OF l
)`;
	}

	/**
	 * SQL: the request `r` names no claim, or its claim's row (see lockedSql) is live and still
	 * carries its fence.
	 *
	 * The record statements meet `locked` only through subqueries like this one, which PostgreSQL
	 * hashes and reads whole at the first request (so every lock is taken, in order, before a write),
	 * never through a join of the two CTEs. Such a join has no index, and the planner, guessing a few
	 * rows for `locked`, made it a nested loop: recording 5,000 claimed keys took 6 s instead of
	 * 0.1 s. The subqueries stand under OR or IS TRUE, where PostgreSQL keeps them subqueries
	 * rather than turning them into joins.
	 */
	private static claimHolds(r: string): string {
		return `(${r}.claim_step IS NULL OR (${r}.ns, ${r}.k, ${r}.claim_step, ${r}.claim_fence) IN (SELECT namespace, key, step, fence FROM locked WHERE live))`;
	}

	/**
	 * Writes that belong to a claim: only a live row that still carries the claim's fence changes,
	 * and, for a request that names the claim it is made for (a unit's claim), only while that
	 * claim's row carries its fence too. A fenced write never creates a row (an absent row was
	 * released or expired: the claim is gone). Rows are locked in byte order first, then re-checked
	 * on their latest version.
	 * $1..$7 arrays (namespace, key, step, status, fingerprint, external id, result), $8 fences, $9 ttl ms,
	 * $10 only rows still in progress, $11 / $12 the steps and fences of the claims named (null: none),
	 * $13 keepSending per request.
	 */
	private recordFencedSql(): string {
		const t = this.t;
		return `
WITH i AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::jsonb[], $8::bigint[], $11::text[], $12::bigint[], $13::boolean[])
		AS i(ns, k, st, status, fingerprint, external_id, result, fence, claim_step, claim_fence, keep_sending)
),
${this.lockedSql('SELECT ns, k, st FROM i')},
-- The requests whose row, as locked, is live and carries their fence (a hashed subquery, see claimHolds).
target AS (
	SELECT i.* FROM i
	WHERE ((i.ns, i.k, i.st, i.fence) IN (SELECT namespace, key, step, fence FROM locked WHERE live AND (NOT $10::boolean OR status = 'in_progress'))) IS TRUE
		AND ${PostgresLedger.claimHolds('i')}
)
-- Joined by the primary key alone: the rows are locked and checked above, and a filter on their
-- status here would let the planner start from the status index and rescan target per row.
UPDATE ${t.ledger} l SET ${this.settledColumns('t', '$9', 't.keep_sending')}
FROM target t
WHERE l.namespace = t.ns AND l.key = t.k AND l.step = t.st AND l.fence = t.fence
RETURNING ${recordColumns('l')}`;
	}

	/**
	 * Writes without a claim's fence on the row itself (a step the claim did not take, or a key
	 * typed by hand): inserted, or written over a row that is absent, expired or settled, or in
	 * progress under $9, the holder; with $9 null, always (an operator's override). A request that
	 * names the claim it is made for is written only while that claim's row carries its fence:
	 * those requests' rows and their claims' rows are locked first, in byte order. $1..$7 arrays
	 * as above, $8 ttl ms, $9 holder, $10 / $11 the steps and fences of the claims named (null: none).
	 */
	private recordUnfencedSql(): string {
		return `
WITH i AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::jsonb[], $10::text[], $11::bigint[])
		AS i(ns, k, st, s, fp, ext, res, claim_step, claim_fence)
),
${this.lockedSql('SELECT ns, k, st FROM i WHERE claim_step IS NOT NULL')},
-- Every row of locked is read (a hashed subquery, see claimHolds) before the sort below hands the insert
-- its first row: all of its locks come first, in order.
allowed AS (
	SELECT i.* FROM i WHERE ${PostgresLedger.claimHolds('i')}
)
INSERT INTO ${this.t.ledger} AS l (namespace, key, step, status, fingerprint, external_id, result, attempts,
	first_seen_at, updated_at, expires_at)
SELECT i.ns, i.k, i.st, i.s, i.fp, i.ext, i.res, 1, now(), now(), now() + $8 * interval '1 millisecond'
FROM allowed i
ORDER BY i.ns COLLATE "C", i.k COLLATE "C", i.st COLLATE "C"
ON CONFLICT (namespace, key, step) DO UPDATE SET
	${this.settledColumns('excluded', '$8')},
	fence = CASE WHEN l.expires_at <= now() THEN NULL ELSE l.fence END
WHERE $9::text IS NULL OR l.expires_at <= now() OR l.status <> 'in_progress' OR l.lease_holder = $9
RETURNING ${recordColumns('l')}`;
	}

	async record(requests: RecordRequest[], options: RecordOptions): Promise<RecordOutcome[]> {
		await this.ensureSchema();
		// Last write per row wins inside one call.
		const last = new Map<string, number>();
		requests.forEach((r, i) => last.set(idKey(r.namespace, r.key, r.step), i));
		const unique = [...last.values()];
		const fenced = sortByRowId(unique.filter((i) => typeof requests[i].fence === 'number'), requests);
		const unfenced = sortByRowId(unique.filter((i) => typeof requests[i].fence !== 'number'), requests);
		const written = new Map<string, LedgerRecord>();
		const columnsOf = (chunk: RecordRequest[]) => [
			chunk.map((r) => r.namespace),
			chunk.map((r) => r.key),
			chunk.map((r) => r.step),
			chunk.map((r) => r.status),
			chunk.map((r) => r.fingerprint ?? null),
			chunk.map((r) => (r.externalId === undefined || r.externalId === null ? null : String(r.externalId))),
			chunk.map((r) => resultToJson(r.result)),
		];
		// A claim whose fence is not a whole number can hold no row: sent as null, it is refused.
		const claimsOf = (chunk: RecordRequest[]) => [
			chunk.map((r) => (r.claim ? r.claim.step : null)),
			chunk.map((r) => (r.claim && Number.isSafeInteger(r.claim.fence) ? String(r.claim.fence) : null)),
		];
		// One statement per kind and chunk, one after another: each locks its rows in byte order.
		for (const [indexes, fence] of [[fenced, true], [unfenced, false]] as const) {
			for (let start = 0; start < indexes.length; start += this.chunkSize) {
				const chunk = indexes.slice(start, start + this.chunkSize).map((i) => requests[i]);
				const rows = fence
					? await this.query(this.sql.recordFenced, [
							...columnsOf(chunk),
							chunk.map((r) => String(r.fence)),
							options.ttlMs,
							options.onlyInProgress === true,
							...claimsOf(chunk),
							chunk.map((r) => r.keepSending === true),
						])
					: await this.query(this.sql.recordUnfenced, [...columnsOf(chunk), options.ttlMs, options.holder ?? null, ...claimsOf(chunk)]);
				for (const row of rows) written.set(idKey(row.namespace, row.key, row.step), toRecord(row));
			}
		}
		const missing = await this.missingAmong(unique.map((i) => requests[i]).filter((r) => !written.has(idKey(r.namespace, r.key, r.step))));
		return requests.map((r): RecordOutcome => {
			const id = idKey(r.namespace, r.key, r.step);
			const record = written.get(id);
			if (record) return { kind: 'written', record };
			return missing.has(id) ? { kind: 'lost_lease', missing: true } : { kind: 'lost_lease' };
		});
	}

	/**
	 * Of refused record requests, those refused because a row they needed is gone: the fenced row,
	 * or the row of the claim named, absent or expired (RecordOutcome `missing`). Read after the
	 * refusal, in one statement; only refusals pay for it.
	 */
	private async missingAmong(refused: RecordRequest[]): Promise<Set<string>> {
		const needed = refused.flatMap((r) => [
			...(typeof r.fence === 'number' ? [{ namespace: r.namespace, key: r.key, step: r.step }] : []),
			...(r.claim ? [{ namespace: r.namespace, key: r.key, step: r.claim.step }] : []),
		]);
		if (needed.length === 0) return new Set();
		const [ns, k, st] = [needed.map((x) => x.namespace), needed.map((x) => x.key), needed.map((x) => x.step)];
		const rows = await this.query<{ namespace: string; key: string; step: string }>(
			`SELECT l.namespace, l.key, l.step FROM ${this.t.ledger} l
			 JOIN unnest($1::text[], $2::text[], $3::text[]) AS i(ns, k, st) ON l.namespace = i.ns AND l.key = i.k AND l.step = i.st
			 WHERE l.expires_at > now()`,
			[ns, k, st],
		);
		const live = new Set(rows.map((row) => idKey(row.namespace, row.key, row.step)));
		const gone = (namespace: string, key: string, step: string) => !live.has(idKey(namespace, key, step));
		return new Set(
			refused
				.filter((r) => (typeof r.fence === 'number' && gone(r.namespace, r.key, r.step)) || (r.claim && gone(r.namespace, r.key, r.claim.step)))
				.map((r) => idKey(r.namespace, r.key, r.step)),
		);
	}

	/**
	 * One UPDATE of the rows a claim still owns: live, `in_progress`, with the request's fence and
	 * a lease that has not lapsed. Rows are locked in one global order (no deadlock with a
	 * concurrent claim or mark), and the conditions are checked again on the locked, latest row
	 * version. $1..$3 namespace, key, step arrays, $4 fences, $5 the value `set` uses.
	 */
	private ownedUpdateSql(set: string): string {
		const owned = (a: string) =>
			`${a}.status = 'in_progress' AND ${a}.fence = i.fence AND ${a}.lease_expires_at > now() AND ${a}.expires_at > now()`;
		return `
WITH i AS (SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[]) AS i(ns, k, st, fence)),
target AS (
	SELECT l.namespace, l.key, l.step FROM ${this.t.ledger} l
	JOIN i ON l.namespace = i.ns AND l.key = i.k AND l.step = i.st
	WHERE ${owned('l')}
	ORDER BY l.namespace, l.key, l.step
	FOR UPDATE OF l
)
UPDATE ${this.t.ledger} l SET ${set}
FROM target t JOIN i ON i.ns = t.namespace AND i.k = t.key AND i.st = t.step
WHERE l.namespace = t.namespace AND l.key = t.key AND l.step = t.step AND ${owned('l')}
RETURNING l.namespace, l.key, l.step, l.fence`;
	}

	/**
	 * The phase ($5). A row in phase `sending` is kept until it is recorded or resolved: retention
	 * never forgets that it may have gone out.
	 */
	private markPhaseSql(): string {
		return this.ownedUpdateSql(
			`phase = $5::text, updated_at = now(),
	expires_at = CASE WHEN $5::text IS NOT NULL THEN ${KEEP_UNTIL_RESOLVED} ELSE l.expires_at END`,
		);
	}

	/** The lease, to $5 ms from now; the expiry never below it; updated_at stays the claim's. */
	private renewLeasesSql(): string {
		const leaseEnd = `now() + $5 * interval '1 millisecond'`;
		return this.ownedUpdateSql(`lease_expires_at = ${leaseEnd}, expires_at = greatest(l.expires_at, ${leaseEnd})`);
	}

	/**
	 * Runs an ownedUpdateSql statement over `rows`, chunk by chunk in the global row order, and
	 * answers per row whether it was changed: by row and fence, so a request that names a row with
	 * another fence was not.
	 */
	private async updateOwned(sql: string, rows: FencedRow[], value: unknown): Promise<boolean[]> {
		if (rows.length === 0) return [];
		await this.ensureSchema();
		const changed = new Set<string>();
		// pg reads the bigint fence back as text: compare both as text.
		const fenced = (r: { namespace: string; key: string; step: string; fence: number | string | null }) => `${idKey(r.namespace, r.key, r.step)}\u0000${r.fence}`;
		const order = sortByRowId(
			rows.map((_, i) => i),
			rows,
		);
		for (let start = 0; start < order.length; start += this.chunkSize) {
			const chunk = order.slice(start, start + this.chunkSize).map((i) => rows[i]);
			const result = await this.query<{ namespace: string; key: string; step: string; fence: string }>(sql, [
				chunk.map((r) => r.namespace),
				chunk.map((r) => r.key),
				chunk.map((r) => r.step),
				chunk.map((r) => String(r.fence)),
				value,
			]);
			for (const row of result) changed.add(fenced(row));
		}
		return rows.map((r) => changed.has(fenced(r)));
	}

	markPhase(rows: FencedRow[], phase: string): Promise<boolean[]> {
		return this.updateOwned(this.sql.markPhase, rows, phase);
	}

	renewLeases(rows: FencedRow[], leaseMs: number): Promise<boolean[]> {
		return this.updateOwned(this.sql.renewLeases, rows, Math.max(0, Math.round(leaseMs)));
	}

	async get(namespace: string, key: string): Promise<LedgerRecord[]> {
		await this.ensureSchema();
		const rows = await this.query(
			`SELECT ${recordColumns('l')} FROM ${this.t.ledger} l
			 WHERE l.namespace = $1 AND l.key = $2 AND l.expires_at > now() ORDER BY l.step`,
			[namespace, key],
		);
		return rows.map((row) => toRecord(row));
	}

	/**
	 * The rows of `ids` as they are, null where absent or expired: one primary-key probe for one
	 * id, the same over unnest for several. Reads only.
	 */
	async peek(ids: RowId[]): Promise<Array<LedgerRecord | null>> {
		if (ids.length === 0) return [];
		await this.ensureSchema();
		let rows: QueryResultRow[];
		if (ids.length === 1) {
			const [id] = ids;
			rows = await this.query(this.sql.peekOne, [id.namespace, id.key, id.step]);
		} else {
			rows = await this.query(
				`SELECT ${recordColumns('l')} FROM ${this.t.ledger} l
				 JOIN unnest($1::text[], $2::text[], $3::text[]) AS i(ns, k, st) ON l.namespace = i.ns AND l.key = i.k AND l.step = i.st
				 WHERE l.expires_at > now()`,
				[ids.map((id) => id.namespace), ids.map((id) => id.key), ids.map((id) => id.step)],
			);
		}
		const found = new Map(rows.map((row) => [idKey(row.namespace, row.key, row.step), toRecord(row)]));
		return ids.map((id) => found.get(idKey(id.namespace, id.key, id.step)) ?? null);
	}

	async list(filter: ListFilter): Promise<ListPage> {
		await this.ensureSchema();
		const cursor = decodeCursor(filter.cursor);
		const rows = await this.query(
			`SELECT ${recordColumns('l')}, l.updated_at::text AS cursor_at FROM ${this.t.ledger} l
			 WHERE l.expires_at > now()
			   AND ($1::text IS NULL OR l.namespace = $1)
			   AND ($2::text IS NULL OR l.status = $2)
			   AND (NOT $3::boolean OR (l.status = 'in_progress' AND l.lease_expires_at <= now()))
			   AND ($4::float8 IS NULL OR l.updated_at <= now() - $4 * interval '1 millisecond')
			   AND ($10::boolean IS NULL OR (l.phase IS NOT DISTINCT FROM 'sending') = $10)
			   AND ($5::timestamptz IS NULL OR (l.updated_at, l.namespace, l.key, l.step) > ($5::timestamptz, $6::text, $7::text, $8::text))
			 ORDER BY l.updated_at, l.namespace, l.key, l.step
			 LIMIT $9`,
			[
				filter.namespace ?? null,
				filter.status ?? null,
				filter.stuckOnly === true,
				filter.notUpdatedForMs ?? null,
				cursor?.[0] ?? null,
				cursor?.[1] ?? null,
				cursor?.[2] ?? null,
				cursor?.[3] ?? null,
				filter.limit + 1,
				filter.sending ?? null,
			],
		);
		const more = rows.length > filter.limit;
		const page = more ? rows.slice(0, filter.limit) : rows;
		const tail = page[page.length - 1];
		return {
			records: page.map((row) => toRecord(row)),
			nextCursor: more ? encodeCursor([tail.cursor_at, tail.namespace, tail.key, tail.step]) : null,
		};
	}

	/**
	 * Every live step of the key (or the one step), locked in byte order, each decided once:
	 * - it is no longer in the status and fence `onlyIf` names: refused (`changed`);
	 * - a run holds its lease, and the operator did not say "even if held": refused;
	 * - resolution `sent` or `dropped`: recorded as completed by the operator (its fence cleared,
	 *   so the run that held it can no longer write to it);
	 * - it may have gone out (phase `sending`) and no resolution was given: refused;
	 * - otherwise (or `not_sent`): deleted, so the next run starts it afresh.
	 * One audit row per step acted on keeps its status and phase.
	 * $1 namespace, $2 key, $3 step (null: every step), $4 actor, $5 even if held, $6 resolution, $7 ttl ms,
	 * $8 onlyIf status (null: any), $9 onlyIf fence.
	 */
	private releaseSql(): string {
		const t = this.t;
		return `
WITH target AS (
	SELECT l.namespace, l.key, l.step, l.status, l.phase, l.lease_holder, l.fence,
		(l.status = 'in_progress' AND l.lease_expires_at > now()) AS held,
		($8::text IS NOT NULL AND (l.status IS DISTINCT FROM $8::text OR l.fence IS DISTINCT FROM $9::bigint)) AS changed
	FROM ${t.ledger} l
	WHERE l.namespace = $1 AND l.key = $2 AND ($3::text IS NULL OR l.step = $3) AND l.expires_at > now()
	ORDER BY l.namespace, l.key, l.step
	FOR UPDATE OF l
),
decided AS (
	SELECT target.*, CASE
			WHEN changed THEN 'refused'
			WHEN held AND NOT $5::boolean THEN 'refused'
			WHEN $6::text IN ('sent', 'dropped') THEN 'recorded_' || $6::text
			WHEN phase IS NOT DISTINCT FROM 'sending' AND $6::text IS NULL THEN 'refused'
			ELSE 'released' END AS action,
		CASE
			WHEN changed THEN 'changed'
			WHEN held AND NOT $5::boolean THEN 'lease_live'
			WHEN phase IS NOT DISTINCT FROM 'sending' AND $6::text IS NULL THEN 'may_have_sent' END AS reason
	FROM target
),
freed AS (
	DELETE FROM ${t.ledger} l USING decided d
	WHERE d.action = 'released' AND l.namespace = d.namespace AND l.key = d.key AND l.step = d.step
	RETURNING 1
),
resolved AS (
	UPDATE ${t.ledger} l SET status = 'completed', lease_expires_at = NULL, phase = NULL, fence = NULL,
		lease_holder = NULL, updated_at = now(), expires_at = now() + $7 * interval '1 millisecond',
		result = jsonb_build_object('resolution', $6::text, 'resolvedBy', $4::text, 'resolvedAt', now(), 'before', l.result)
	FROM decided d
	WHERE d.action IN ('recorded_sent', 'recorded_dropped') AND l.namespace = d.namespace AND l.key = d.key AND l.step = d.step
	RETURNING 1
),
audit AS (
	INSERT INTO ${t.audit} (namespace, key, step, action, actor, detail)
	SELECT namespace, key, step, CASE action WHEN 'released' THEN 'release' WHEN 'recorded_sent' THEN 'resolve_sent' ELSE 'resolve_dropped' END, $4,
		jsonb_build_object('status', status, 'phase', phase, 'leaseHolder', lease_holder, 'fence', fence, 'resolution', $6::text)
	FROM decided WHERE action <> 'refused'
	RETURNING 1
)
-- Data-modifying CTEs run to completion whether or not they are read.
SELECT step, status, phase, action, reason FROM decided ORDER BY step`;
	}

	async release(request: ReleaseRequest): Promise<ReleasedStep[]> {
		await this.ensureSchema();
		const rows = await this.query(this.sql.release, [
			request.namespace,
			request.key,
			request.step,
			request.releasedBy,
			request.evenIfHeld === true,
			request.resolution ?? null,
			request.ttlMs,
			request.onlyIf?.status ?? null,
			request.onlyIf?.fence ?? null,
		]);
		return rows.map((row) => ({
			step: row.step,
			status: row.status,
			phase: row.phase ?? null,
			action: row.action,
			...(row.reason ? { reason: row.reason } : {}),
		}));
	}

	/**
	 * $1 the most rows to delete. Days of counters older than COUNTS_KEPT_DAYS go first (a few
	 * rows per namespace and day, so they never starve), then expired ledger rows up to the limit;
	 * rows other sessions hold locked are skipped.
	 */
	private purgeSql(): string {
		const t = this.t;
		return `
WITH old_days AS (
	SELECT namespace, day FROM ${t.daily} WHERE day < ${TODAY} - ${COUNTS_KEPT_DAYS}
	ORDER BY day LIMIT $1 FOR UPDATE SKIP LOCKED
), gone_days AS (
	DELETE FROM ${t.daily} d USING old_days o WHERE d.namespace = o.namespace AND d.day = o.day
	RETURNING 1
), victims AS (
	SELECT namespace, key, step FROM ${t.ledger} WHERE expires_at <= now()
	LIMIT greatest(0, $1 - (SELECT count(*) FROM old_days)) FOR UPDATE SKIP LOCKED
), gone AS (
	DELETE FROM ${t.ledger} l USING victims v
	WHERE l.namespace = v.namespace AND l.key = v.key AND l.step = v.step AND l.expires_at <= now()
	RETURNING 1
) SELECT ((SELECT count(*) FROM gone) + (SELECT count(*) FROM gone_days))::int AS n`;
	}

	async purgeExpired(limit: number): Promise<number> {
		await this.ensureSchema();
		const rows = await this.query<{ n: number }>(this.sql.purge, [limit]);
		return rows[0].n;
	}

	/**
	 * $1 a JSON array of [namespace, counter, amount] (see addCounts). One upsert per namespace of
	 * today's row, summing key by key as numeric (exact: 0.1 + 0.2 is 0.3), keys present on either
	 * side. Several amounts for one counter are summed first, so no row is touched twice. Rows go
	 * in byte order of namespace (the column's COLLATE "C"), so concurrent adds lock them in one
	 * order and cannot deadlock; a concurrent add of the same row waits for it and then adds to
	 * the committed counts.
	 */
	private addCountsSql(): string {
		return `
WITH input AS (
	SELECT e ->> 0 AS ns, e ->> 1 AS name, (e ->> 2)::numeric AS amount FROM json_array_elements($1::json) AS e
), added AS (
	SELECT ns, jsonb_object_agg(name, total) AS counts
	FROM (SELECT ns, name, sum(amount) AS total FROM input GROUP BY ns, name) s
	GROUP BY ns
)
INSERT INTO ${this.t.daily} AS d (namespace, day, counts)
SELECT ns, ${TODAY}, counts FROM added
ORDER BY ns COLLATE "C"
ON CONFLICT (namespace, day) DO UPDATE SET
	counts = (
		SELECT jsonb_object_agg(k, coalesce((d.counts ->> k)::numeric, 0) + coalesce((excluded.counts ->> k)::numeric, 0))
		FROM (SELECT jsonb_object_keys(d.counts) UNION SELECT jsonb_object_keys(excluded.counts)) AS keys (k)
	),
	updated_at = now()`;
	}

	async addCounts(increments: CountIncrement[]): Promise<void> {
		const byNamespace = countsByNamespace(increments);
		if (byNamespace.size === 0) return;
		// Amounts travel as JSON numbers, the shortest text that reads back as the same double, and
		// the server reads that text as an exact numeric.
		const rows: Array<[string, string, number]> = [];
		for (const [namespace, pairs] of byNamespace) for (const [name, amount] of pairs) rows.push([namespace, name, amount]);
		await this.ensureSchema();
		await this.query(this.sql.addCounts, [JSON.stringify(rows)]);
		this.purgeInBackground();
	}

	async readCounts(namespace: string, days: number): Promise<DailyCounts[]> {
		assertNamespace(namespace);
		assertCountDays(days);
		await this.ensureSchema();
		// jsonb numerics come back as JSON numbers: the driver parses them to JavaScript numbers.
		const rows = await this.query<{ day: string; counts: Record<string, number> }>(
			`SELECT to_char(day, 'YYYY-MM-DD') AS day, counts FROM ${this.t.daily}
			 WHERE namespace = $1 AND day > ${TODAY} - $2::integer ORDER BY day`,
			[namespace, days],
		);
		return rows.map((row) => ({ day: row.day, counts: row.counts }));
	}

	async stats(namespace: string): Promise<NamespaceStats> {
		return (await this.statsMany([namespace]))[0];
	}

	/** One statement: a grouped scan of the namespaces' rows (a few rows per namespace and status), and their counters. */
	async statsMany(namespaces: string[]): Promise<NamespaceStats[]> {
		if (namespaces.length === 0) return [];
		await this.ensureSchema();
		const rows = await this.query(
			`SELECT namespace, status, count(*)::int AS n,
				count(*) FILTER (WHERE status = 'in_progress' AND lease_expires_at <= now())::int AS stuck,
				${epochMs("min(first_seen_at) FILTER (WHERE status = 'in_progress')")} AS oldest, NULL::float8 AS blocked
			 FROM ${this.t.ledger} WHERE namespace = ANY($1::text[]) AND expires_at > now() GROUP BY namespace, status
			 UNION ALL
			 SELECT namespace, NULL, 0, 0, NULL, duplicates_blocked::float8 FROM ${this.t.counters} WHERE namespace = ANY($1::text[])`,
			[namespaces],
		);
		const out = new Map<string, NamespaceStats>(
			namespaces.map((namespace) => [
				namespace,
				{ namespace, byStatus: Object.fromEntries(STATUSES.map((s) => [s, 0])) as Record<Status, number>, duplicatesBlocked: 0, oldestInProgressAt: null, stuck: 0 },
			]),
		);
		for (const row of rows) {
			const stats = out.get(row.namespace)!;
			if (row.status === null) {
				stats.duplicatesBlocked = row.blocked;
				continue;
			}
			stats.byStatus[row.status as Status] = row.n;
			stats.stuck += row.stuck;
			if (row.oldest !== null) stats.oldestInProgressAt = new Date(row.oldest);
		}
		return namespaces.map((namespace) => out.get(namespace)!);
	}

	/**
	 * A loose index scan of the primary key (namespace, key, step): each step of the recursion is
	 * one probe for the next namespace after the last, so a page costs `limit` probes however many
	 * rows each namespace holds.
	 */
	async listNamespaces(limit: number, after?: string | null): Promise<string[]> {
		const n = Math.max(0, Math.floor(limit));
		if (n === 0) return [];
		await this.ensureSchema();
		const t = this.t.ledger;
		const rows = await this.query<{ namespace: string }>(
			`WITH RECURSIVE ns (namespace) AS (
				(SELECT namespace FROM ${t} WHERE namespace > $1::text ORDER BY namespace LIMIT 1)
				UNION ALL
				SELECT (SELECT l.namespace FROM ${t} l WHERE l.namespace > ns.namespace ORDER BY l.namespace LIMIT 1)
				FROM ns WHERE ns.namespace IS NOT NULL
			) SELECT namespace FROM ns WHERE namespace IS NOT NULL LIMIT $2`,
			[after ?? '', n],
		);
		return rows.map((row) => row.namespace);
	}

	async getCheckpoint(namespace: string, name: string): Promise<Checkpoint | null> {
		await this.ensureSchema();
		const rows = await this.query(
			`SELECT namespace, name, value, updated_at, updated_by FROM ${this.t.checkpoints} WHERE namespace = $1 AND name = $2`,
			[namespace, name],
		);
		return rows[0] ? toCheckpoint(rows[0]) : null;
	}

	async setCheckpoint(
		namespace: string,
		name: string,
		value: string,
		options: { force: boolean; updatedBy: string | null },
	): Promise<Checkpoint> {
		await this.ensureSchema();
		const rows = await this.query(
			`INSERT INTO ${this.t.checkpoints} AS cp (namespace, name, value, updated_by) VALUES ($1, $2, $3, $5)
			 ON CONFLICT (namespace, name) DO UPDATE SET value = excluded.value, updated_at = now(), updated_by = excluded.updated_by
			 WHERE $4::boolean OR NOT ${isNewer('cp.value', 'excluded.value')}
			 RETURNING namespace, name, value, updated_at, updated_by`,
			[namespace, name, value, options.force, options.updatedBy],
		);
		if (rows[0]) return toCheckpoint(rows[0]);
		const current = await this.getCheckpoint(namespace, name);
		throw new CheckpointRegressionError(current?.value ?? '', value);
	}

	/** One page of this ledger in the neutral format (see ../transfer.ts). */
	async exportBatch(cursor: string | null, limit: number): Promise<ExportBatch> {
		await this.ensureSchema();
		return await exportPostgres((text, values) => this.query(text, values), this.t, cursor, Math.max(1, Math.floor(limit)));
	}

	/** Merges a page of another ledger's export into this one (see ../transfer.ts): one statement per kind. */
	async importBatch(batch: Omit<ExportBatch, 'next'>): Promise<ImportCounts> {
		await this.ensureSchema();
		this.importSql ??= postgresImportSql(this.t, isNewer);
		return await importPostgres((text, values) => this.query(text, values), this.importSql, batch);
	}

	async close(): Promise<void> {
		await this.pool.end();
	}
}

/**
 * The claim's input (see claimSql): five columns as JSON array texts, parsed by the server
 * faster than text[] (whose elements the driver escapes one by one in JavaScript). A column that
 * is the same for the whole batch (the usual namespace and step) goes as one value beside an
 * empty array, and one that is null throughout (fingerprint, version) as an empty array: for
 * 5,000 keys the server parses two arrays instead of five.
 */
function claimInput(indexes: number[], requests: ClaimRequest[]): { columns: string[]; namespace: string | null; step: string | null } {
	// One scan decides which columns vary; only those are made into arrays (the keys always).
	const n = indexes.length;
	const first = requests[indexes[0]];
	let uniformNs = true;
	let uniformSt = true;
	let anyFp = false;
	let anyVer = false;
	for (let j = 0; j < n; j++) {
		const r = requests[indexes[j]];
		if (r.namespace !== first.namespace) uniformNs = false;
		if (r.step !== first.step) uniformSt = false;
		if (r.fingerprint !== null) anyFp = true;
		if (r.version !== undefined && r.version !== null) anyVer = true;
	}
	const column = (read: (r: ClaimRequest) => string | null) => {
		const out = new Array<string | null>(n);
		for (let j = 0; j < n; j++) out[j] = read(requests[indexes[j]]);
		return JSON.stringify(out);
	};
	return {
		columns: [
			uniformNs ? '[]' : column((r) => r.namespace),
			column((r) => r.key),
			uniformSt ? '[]' : column((r) => r.step),
			anyFp ? column((r) => r.fingerprint) : '[]',
			anyVer ? column((r) => r.version ?? null) : '[]',
		],
		namespace: uniformNs ? first.namespace : null,
		step: uniformSt ? first.step : null,
	};
}

function columns(requests: ClaimRequest[]): [string[], string[], string[], Array<string | null>, Array<string | null>] {
	const n = requests.length;
	const ns = new Array<string>(n);
	const k = new Array<string>(n);
	const st = new Array<string>(n);
	const fp = new Array<string | null>(n);
	const ver = new Array<string | null>(n);
	for (let i = 0; i < n; i++) {
		const r = requests[i];
		ns[i] = r.namespace;
		k[i] = r.key;
		st[i] = r.step;
		fp[i] = r.fingerprint;
		ver[i] = r.version ?? null;
	}
	return [ns, k, st, fp, ver];
}

function toCheckpoint(row: QueryResultRow): Checkpoint {
	return {
		namespace: row.namespace,
		name: row.name,
		value: row.value,
		updatedAt: new Date(row.updated_at),
		updatedBy: row.updated_by,
	};
}

const encodeCursor = (parts: string[]) => Buffer.from(JSON.stringify(parts)).toString('base64url');

function decodeCursor(cursor: string | null | undefined): string[] | null {
	if (!cursor) return null;
	try {
		const parts = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
		const valid =
			Array.isArray(parts) &&
			parts.length === 4 &&
			parts.every((p) => typeof p === 'string') &&
			/^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d+)?([+-]\d{2}(:?\d{2}){0,2}|Z)?$/.test(parts[0]);
		if (valid) return parts;
	} catch {
		// fall through
	}
	throw new LedgerInputError('The page cursor is not one this ledger made', 'Leave the cursor empty to start from the first page.');
}
