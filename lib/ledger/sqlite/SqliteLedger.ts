import { classifyExisting, compareCodePoints, effectiveTtlMs, idKey, resolveBatch } from '../claims';
import { CheckpointRegressionError, LedgerInputError } from '../errors';
import { resultFromStored, resultToJson } from '../resultJson';
import type { ExportBatch, LedgerExport } from '../transfer';
import { backgroundPurge } from '../autoPurge';
import type {
	AutoPurgeOptions,
	Checkpoint,
	ClaimOptions,
	ClaimOutcome,
	ClaimRequest,
	CountIncrement,
	DailyCounts,
	FencedRow,
	Ledger,
	LedgerRecord,
	ListFilter,
	ListPage,
	NamespaceStats,
	RecordOptions,
	RecordOutcome,
	RecordRequest,
	ReleaseRequest,
	ReleasedStep,
	RowId,
	Status,
} from '../types';
import { AUDIT_ACTIONS, COUNTS_KEPT_DAYS, STATUSES } from '../types';
import { assertCountDays, assertNamespace, countsByNamespace } from '../validate';
import { loadSqlite, type Database, type SqlRow, type SqlValue, type Statement } from './driver';
import { toUnavailable } from './errors';
import { KEEP_UNTIL_RESOLVED, MIGRATIONS, NOW_MS } from './schema';
import { exportSqlite } from './transfer';

export interface SqliteLedgerOptions {
	/** Path of the ledger file (created when absent). */
	file: string;
	/** How long a write waits for another process's write on the file before failing, in ms. */
	busyTimeoutMs?: number;
	/** Keys per write transaction: another process's write waits at most one chunk. */
	chunkSize?: number;
	autoPurge?: AutoPurgeOptions;
}

const DEFAULT_CHUNK = 5000;
export const DEFAULT_BUSY_TIMEOUT_MS = 10_000;
const DAY = 86_400_000;

/** A ledger row as the file holds it. */
interface Row {
	namespace: string;
	key: string;
	step: string;
	status: Status;
	lease_holder: string | null;
	lease_expires_at: number | null;
	fence: number | null;
	fingerprint: string | null;
	version: string | null;
	external_id: string | null;
	result: string | null;
	attempts: number;
	previous_status: Status | null;
	previous_phase: string | null;
	phase: string | null;
	first_seen_at: number;
	updated_at: number;
	expires_at: number;
}

const COLUMNS: Array<keyof Row> = [
	'namespace', 'key', 'step', 'status', 'lease_holder', 'lease_expires_at', 'fence', 'fingerprint', 'version', 'external_id',
	'result', 'attempts', 'previous_status', 'previous_phase', 'phase', 'first_seen_at', 'updated_at', 'expires_at',
];

const num = (v: SqlValue | undefined): number | null => (v === null || v === undefined ? null : Number(v));

function toRecord(row: Row, now: number): LedgerRecord {
	return {
		namespace: row.namespace,
		key: row.key,
		step: row.step,
		status: row.status,
		leaseHolder: row.lease_holder,
		leaseExpiresAt: row.lease_expires_at === null ? null : new Date(row.lease_expires_at),
		leaseRemainingMs: row.lease_expires_at === null ? null : Math.max(0, row.lease_expires_at - now),
		fence: num(row.fence),
		fingerprint: row.fingerprint,
		version: row.version,
		externalId: row.external_id,
		result: row.result === null ? null : resultFromStored(JSON.parse(row.result)),
		attempts: Number(row.attempts),
		previousStatus: row.previous_status,
		firstSeenAt: new Date(row.first_seen_at),
		updatedAt: new Date(row.updated_at),
		expiresAt: new Date(row.expires_at),
		phase: row.phase,
	};
}

/** The record of a row a claim created (no row before it): its times are the transaction's. */
function freshRecord(row: Row, t: { at: Date; expires: Date; leaseEnds: Date | null; leaseMs: number | null }): LedgerRecord {
	return {
		namespace: row.namespace,
		key: row.key,
		step: row.step,
		status: row.status,
		leaseHolder: row.lease_holder,
		leaseExpiresAt: t.leaseEnds,
		leaseRemainingMs: t.leaseMs,
		fence: row.fence,
		fingerprint: row.fingerprint,
		version: row.version,
		externalId: null,
		result: null,
		attempts: 1,
		previousStatus: null,
		firstSeenAt: t.at,
		updatedAt: t.at,
		expiresAt: t.expires,
		phase: null,
	};
}

const DECIMAL = /^-?[0-9]+(\.[0-9]+)?$/;

/** Exact comparison of two decimal texts (no float rounding), like PostgreSQL numeric. */
function compareDecimals(a: string, b: string): number {
	const parts = (s: string) => {
		let neg = s.startsWith('-');
		if (neg) s = s.slice(1);
		const [i, f = ''] = s.split('.');
		const int = i.replace(/^0+/, '');
		const frac = f.replace(/0+$/, '');
		if (int === '' && frac === '') neg = false;
		return { neg, int, frac };
	};
	const x = parts(a);
	const y = parts(b);
	if (x.neg !== y.neg) return x.neg ? -1 : 1;
	let c = x.int.length !== y.int.length ? x.int.length - y.int.length : x.int < y.int ? -1 : x.int > y.int ? 1 : 0;
	if (c === 0) {
		const n = Math.max(x.frac.length, y.frac.length);
		const fx = x.frac.padEnd(n, '0');
		const fy = y.frac.padEnd(n, '0');
		c = fx < fy ? -1 : fx > fy ? 1 : 0;
	}
	return x.neg ? -c : c;
}

/** Is version `a` newer than `b`? Numeric when both are numbers, otherwise byte order (as the other backends). */
export function isNewer(a: string | null, b: string | null): boolean {
	if (b === null) return a !== null;
	if (a === null) return false;
	if (DECIMAL.test(a) && DECIMAL.test(b)) return compareDecimals(a, b) > 0;
	return compareCodePoints(a, b) > 0;
}

/** 'YYYY-MM-DD' of epoch ms, UTC. */
const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);

/**
 * The ledger in one SQLite file on this machine (`node:sqlite`, Node.js 22.13+). Every write is
 * one `BEGIN IMMEDIATE` transaction: SQLite's write lock on the file makes the processes that
 * share it (n8n's main process, its task runners, `n8n execute` beside it) take turns, and each
 * transaction reads a row, decides, and writes it while no other process can. The file is in WAL
 * mode, so reads never wait for a write; a write waits for another process's write up to
 * `busyTimeoutMs`. The ledger's clock is SQLite's, read once at the start of each transaction.
 *
 * `node:sqlite` is synchronous: a call runs to its end on the caller's thread. A chunk of 5,000
 * keys takes milliseconds.
 */
export class SqliteLedger implements Ledger, LedgerExport {
	readonly file: string;
	private readonly busyTimeoutMs: number;
	private readonly chunkSize: number;
	/** Called after each claim and add of counts (see backgroundPurge). */
	private readonly purgeInBackground: () => void;
	private db: Database | null = null;
	private readonly statements = new Map<string, Statement>();
	private schemaReady = false;
	private trips = 0;

	constructor(options: SqliteLedgerOptions) {
		this.file = options.file;
		this.busyTimeoutMs = options.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS;
		this.chunkSize = Math.max(1, Math.floor(options.chunkSize ?? DEFAULT_CHUNK));
		this.purgeInBackground = backgroundPurge(options.autoPurge, (batch) => this.purgeExpired(batch));
	}

	get roundTrips(): number {
		return this.trips;
	}

	/** The open file (opened on first use). */
	private open(): Database {
		if (this.db) return this.db;
		const { DatabaseSync } = loadSqlite();
		let db: Database | null = null;
		try {
			db = new DatabaseSync(this.file, { timeout: this.busyTimeoutMs });
			db.exec(`PRAGMA busy_timeout = ${Math.floor(this.busyTimeoutMs)}`);
			db.exec('PRAGMA journal_mode = WAL');
			// FULL: a commit is on disk before the claim answers, so a power cut cannot forget a
			// key that was let through (NORMAL would be safe against a crash of n8n only).
			db.exec('PRAGMA synchronous = FULL');
		} catch (error) {
			try {
				db?.close();
			} catch {
				// already failing
			}
			throw toUnavailable(error, this.file, this.busyTimeoutMs);
		}
		this.db = db;
		return db;
	}

	private stmt(sql: string): Statement {
		let s = this.statements.get(sql);
		if (!s) {
			s = this.open().prepare(sql);
			this.statements.set(sql, s);
		}
		return s;
	}

	/** The ledger's clock (SQLite's reading of this machine's time), in epoch ms. */
	private now(): number {
		return Number(this.stmt(`SELECT ${NOW_MS} AS now`).get()!.now);
	}

	/**
	 * One write transaction: `BEGIN IMMEDIATE` takes the file's write lock at once (waiting up to
	 * the busy timeout for another process), so what `body` reads stays true until it commits.
	 * `body` gets the ledger's now, read under the lock.
	 */
	private write<T>(body: (now: number) => T): T {
		const db = this.open();
		this.trips++;
		try {
			db.exec('BEGIN IMMEDIATE');
		} catch (error) {
			throw toUnavailable(error, this.file, this.busyTimeoutMs);
		}
		try {
			const out = body(this.now());
			db.exec('COMMIT');
			return out;
		} catch (error) {
			try {
				db.exec('ROLLBACK');
			} catch {
				// The transaction is gone already.
			}
			throw toUnavailable(error, this.file, this.busyTimeoutMs);
		}
	}

	/** One read: a snapshot (WAL readers never wait for writers), with the ledger's now of that snapshot. */
	private read<T>(body: (now: number) => T): T {
		const db = this.open();
		this.trips++;
		try {
			db.exec('BEGIN');
			try {
				return body(this.now());
			} finally {
				db.exec('COMMIT');
			}
		} catch (error) {
			throw toUnavailable(error, this.file, this.busyTimeoutMs);
		}
	}

	async ensureSchema(): Promise<void> {
		if (this.schemaReady) return;
		const current = () => Number(this.stmt('PRAGMA user_version').get()!.user_version);
		if (current() < MIGRATIONS.length) {
			// Under the write lock: of many processes opening a new file, one creates the tables.
			this.write(() => {
				for (let v = current() + 1; v <= MIGRATIONS.length; v++) {
					this.open().exec(MIGRATIONS[v - 1]);
					this.open().exec(`PRAGMA user_version = ${v}`);
				}
			});
			this.statements.clear();
		}
		if (current() > MIGRATIONS.length) {
			throw new LedgerInputError(
				`The Built-in ledger file ${this.file} was written by a newer version of this package (schema ${current()})`,
				'Update n8n-nodes-idempotency, or use another file name.',
			);
		}
		this.schemaReady = true;
	}

	/** The live row (not expired by `now`), or null. */
	private live(namespace: string, key: string, step: string, now: number): Row | null {
		const row = this.stmt('SELECT * FROM ledger WHERE namespace = ? AND key = ? AND step = ?').get(namespace, key, step) as Row | undefined;
		return row && row.expires_at > now ? row : null;
	}

	private put(row: Row): void {
		this.stmt(`INSERT OR REPLACE INTO ledger (${COLUMNS.join(', ')}) VALUES (${COLUMNS.map(() => '?').join(', ')})`).run(
			...COLUMNS.map((c) => row[c] as SqlValue),
		);
	}

	private nextFence(): number {
		return Number(this.stmt(`UPDATE meta SET value = value + 1 WHERE name = 'fence' RETURNING value`).get()!.value);
	}

	async claim(requests: ClaimRequest[], options: ClaimOptions): Promise<ClaimOutcome[]> {
		await this.ensureSchema();
		const { unique, outcomes } = resolveBatch(requests);
		const lease = options.mode === 'lease';
		const status: Status = lease ? 'in_progress' : 'completed';
		const holder = lease ? options.holder : null;
		const leaseMs = Math.max(0, Math.round(options.leaseMs));
		const ttlMs = Math.max(0, Math.round(effectiveTtlMs(options)));
		const reclaimOwn = options.reclaimOwnLease === true;
		for (let start = 0; start < unique.length; start += this.chunkSize) {
			const chunk = unique.slice(start, start + this.chunkSize);
			this.write((now) => {
				let fence: number | null = null;
				const blocked = new Map<string, number>();
				// Every new row of this transaction shares its times: one set of Dates for all of them.
				const at = new Date(now);
				const fresh = { at, expires: new Date(now + ttlMs), leaseEnds: lease ? new Date(now + leaseMs) : null, leaseMs: lease ? leaseMs : null };
				for (const index of chunk) {
					const r = requests[index];
					const fingerprint = r.fingerprint ?? null;
					const version = r.version ?? null;
					const old = this.live(r.namespace, r.key, r.step, now);
					let take = old === null;
					if (old) {
						const leased = old.status === 'in_progress' && old.lease_expires_at !== null && old.lease_expires_at > now;
						const samePayload = old.fingerprint === null || fingerprint === null || old.fingerprint === fingerprint;
						take =
							(options.mode === 'newer' && isNewer(version, old.version) && !leased) ||
							(samePayload &&
								((old.status === 'in_progress' && (!leased || (reclaimOwn && old.lease_holder === holder))) || old.status === 'failed_retryable'));
					}
					if (!take) {
						blocked.set(r.namespace, (blocked.get(r.namespace) ?? 0) + 1);
						outcomes[index] = classifyExisting(toRecord(old!, now), r, options.mode);
						continue;
					}
					fence ??= this.nextFence();
					// Taking over a step that may have gone out keeps that knowledge on the row, so a
					// second crash before this claim records anything cannot lose it.
					const keepSending = old !== null && old.phase === 'sending';
					const row: Row = {
						namespace: r.namespace,
						key: r.key,
						step: r.step,
						status,
						lease_holder: holder,
						lease_expires_at: lease ? now + leaseMs : null,
						fence,
						fingerprint,
						version,
						external_id: old ? old.external_id : null,
						result: old ? old.result : null,
						attempts: old ? Number(old.attempts) + 1 : 1,
						previous_status: old ? old.status : null,
						previous_phase: old ? old.phase : null,
						phase: keepSending ? 'sending' : null,
						first_seen_at: old ? old.first_seen_at : now,
						updated_at: now,
						expires_at: keepSending ? KEEP_UNTIL_RESOLVED : now + ttlMs,
					};
					this.put(row);
					const record = old ? toRecord(row, now) : freshRecord(row, fresh);
					outcomes[index] = { kind: 'claimed', record, previousStatus: row.previous_status, previousPhase: old ? old.phase : null };
				}
				for (const [namespace, n] of blocked) {
					this.stmt(
						`INSERT INTO counters (namespace, duplicates_blocked, updated_at) VALUES (?, ?, ?)
						 ON CONFLICT (namespace) DO UPDATE SET duplicates_blocked = duplicates_blocked + excluded.duplicates_blocked, updated_at = excluded.updated_at`,
					).run(namespace, n, now);
				}
			});
		}
		this.purgeInBackground();
		return outcomes as ClaimOutcome[];
	}

	async record(requests: RecordRequest[], options: RecordOptions): Promise<RecordOutcome[]> {
		await this.ensureSchema();
		// Last write per row wins inside one call.
		const last = new Map<string, number>();
		requests.forEach((r, i) => last.set(idKey(r.namespace, r.key, r.step), i));
		const unique = [...last.values()].sort((a, b) => a - b);
		const ttlMs = Math.max(0, Math.round(options.ttlMs));
		const holder = options.holder ?? null;
		const written = new Map<string, LedgerRecord>();
		const missing = new Set<string>();
		for (let start = 0; start < unique.length; start += this.chunkSize) {
			const chunk = unique.slice(start, start + this.chunkSize);
			this.write((now) => {
				for (const index of chunk) {
					const r = requests[index];
					const id = idKey(r.namespace, r.key, r.step);
					const fence = typeof r.fence === 'number' ? r.fence : null;
					const old = this.live(r.namespace, r.key, r.step, now);
					let ok: boolean;
					let gone = false;
					if (fence !== null) {
						ok = old !== null && old.fence !== null && Number(old.fence) === fence && (!options.onlyInProgress || old.status === 'in_progress');
						gone = old === null;
					} else {
						ok = holder === null || old === null || old.status !== 'in_progress' || old.lease_holder === holder;
					}
					if (ok && r.claim) {
						// The claim this write is made for, as it is now (a write earlier in this call included).
						const claimed = this.live(r.namespace, r.key, r.claim.step, now);
						ok = Number.isSafeInteger(r.claim.fence) && claimed !== null && claimed.fence !== null && Number(claimed.fence) === r.claim.fence;
						gone = claimed === null;
					}
					if (!ok) {
						if (gone) missing.add(id);
						continue;
					}
					const keepsPhase = r.status === 'needs_review' || (r.keepSending === true && fence !== null && r.status === 'failed_retryable');
					const phase = keepsPhase && old ? (old.phase ?? (old.status === 'in_progress' ? old.previous_phase : null)) : null;
					const row: Row = {
						namespace: r.namespace,
						key: r.key,
						step: r.step,
						status: r.status,
						lease_holder: null,
						lease_expires_at: null,
						fence: old ? old.fence : null,
						fingerprint: r.fingerprint ?? (old ? old.fingerprint : null),
						version: old ? old.version : null,
						external_id: r.externalId === undefined || r.externalId === null ? null : String(r.externalId),
						result: resultToJson(r.result),
						attempts: old ? Number(old.attempts) : 1,
						previous_status: old ? old.previous_status : null,
						previous_phase: old ? old.previous_phase : null,
						phase,
						first_seen_at: old ? old.first_seen_at : now,
						updated_at: now,
						expires_at: phase === 'sending' ? KEEP_UNTIL_RESOLVED : now + ttlMs,
					};
					this.put(row);
					written.set(id, toRecord(row, now));
				}
			});
		}
		return requests.map((r): RecordOutcome => {
			const id = idKey(r.namespace, r.key, r.step);
			const record = written.get(id);
			if (record) return { kind: 'written', record };
			return missing.has(id) ? { kind: 'lost_lease', missing: true } : { kind: 'lost_lease' };
		});
	}

	/**
	 * Changes each row this claim still owns (live, in progress, carrying the fence, lease not
	 * lapsed, by the ledger's clock) with `set` ($1 the value, $2 now), one transaction per chunk.
	 */
	private async updateOwned(set: string, rows: FencedRow[], value: SqlValue): Promise<boolean[]> {
		if (rows.length === 0) return [];
		await this.ensureSchema();
		const changed = new Array<boolean>(rows.length).fill(false);
		const sql = `UPDATE ledger SET ${set}
			WHERE namespace = ?3 AND key = ?4 AND step = ?5 AND status = 'in_progress' AND fence = ?6
				AND lease_expires_at > ?2 AND expires_at > ?2`;
		for (let start = 0; start < rows.length; start += this.chunkSize) {
			this.write((now) => {
				for (let i = start; i < Math.min(rows.length, start + this.chunkSize); i++) {
					const r = rows[i];
					if (typeof r.fence !== 'number' || !Number.isFinite(r.fence)) continue;
					changed[i] = Number(this.stmt(sql).run(value, now, r.namespace, r.key, r.step, r.fence).changes) > 0;
				}
			});
		}
		return changed;
	}

	/** A row in phase `sending` is kept until it is recorded or resolved. */
	markPhase(rows: FencedRow[], phase: string): Promise<boolean[]> {
		return this.updateOwned(
			`phase = ?1, updated_at = ?2, expires_at = CASE WHEN ?1 IS NOT NULL THEN ${KEEP_UNTIL_RESOLVED} ELSE expires_at END`,
			rows,
			phase,
		);
	}

	/** The lease to `leaseMs` from now; the expiry never below it; updated_at stays the claim's. */
	renewLeases(rows: FencedRow[], leaseMs: number): Promise<boolean[]> {
		return this.updateOwned(`lease_expires_at = ?2 + ?1, expires_at = max(expires_at, ?2 + ?1)`, rows, Math.max(0, Math.round(leaseMs)));
	}

	async get(namespace: string, key: string): Promise<LedgerRecord[]> {
		await this.ensureSchema();
		return this.read((now) =>
			(this.stmt('SELECT * FROM ledger WHERE namespace = ? AND key = ? AND expires_at > ? ORDER BY step').all(namespace, key, now) as unknown as Row[]).map(
				(row) => toRecord(row, now),
			),
		);
	}

	/**
	 * The rows as they are, in the order asked, null where absent or expired (by the ledger's
	 * clock): one read snapshot, nothing written, nothing counted.
	 */
	async peek(ids: RowId[]): Promise<Array<LedgerRecord | null>> {
		if (ids.length === 0) return [];
		await this.ensureSchema();
		return this.read((now) =>
			ids.map((id) => {
				const row = this.live(id.namespace, id.key, id.step, now);
				return row ? toRecord(row, now) : null;
			}),
		);
	}

	/** One page of a copy of this ledger (see ../transfer.ts), read in one snapshot. */
	async exportBatch(cursor: string | null, limit: number): Promise<ExportBatch> {
		await this.ensureSchema();
		return this.read((now) => exportSqlite((sql) => this.stmt(sql), now, cursor, Math.max(1, Math.floor(limit))));
	}

	async list(filter: ListFilter): Promise<ListPage> {
		await this.ensureSchema();
		const cursor = decodeCursor(filter.cursor);
		const limit = Math.max(1, Math.floor(filter.limit));
		const sending = filter.sending === undefined || filter.sending === null ? null : filter.sending ? 1 : 0;
		const quiet = filter.notUpdatedForMs === undefined || filter.notUpdatedForMs === null ? null : Math.max(0, filter.notUpdatedForMs);
		return this.read((now) => {
			const rows = this.stmt(
				`SELECT * FROM ledger
				 WHERE expires_at > ?1
				   AND (?2 IS NULL OR namespace = ?2)
				   AND (?3 IS NULL OR status = ?3)
				   AND (NOT ?4 OR (status = 'in_progress' AND lease_expires_at <= ?1))
				   AND (?5 IS NULL OR updated_at <= ?1 - ?5)
				   AND (?6 IS NULL OR (phase IS 'sending') = ?6)
				   AND (?7 IS NULL OR (updated_at, namespace, key, step) > (?7, ?8, ?9, ?10))
				 ORDER BY updated_at, namespace, key, step
				 LIMIT ?11`,
			).all(
				now,
				filter.namespace ?? null,
				filter.status ?? null,
				filter.stuckOnly === true ? 1 : 0,
				quiet,
				sending,
				cursor ? Number(cursor[0]) : null,
				cursor?.[1] ?? null,
				cursor?.[2] ?? null,
				cursor?.[3] ?? null,
				limit + 1,
			) as unknown as Row[];
			const more = rows.length > limit;
			const page = more ? rows.slice(0, limit) : rows;
			const tail = page[page.length - 1];
			return {
				records: page.map((row) => toRecord(row, now)),
				nextCursor: more ? encodeCursor([String(tail.updated_at), tail.namespace, tail.key, tail.step]) : null,
			};
		});
	}

	/**
	 * Every live step of the key (or the one step), each decided once, in one transaction:
	 * refused when no longer as `onlyIf` says, or while a run holds its lease (unless evenIfHeld);
	 * recorded as sent or dropped on the operator's word (fence and holder cleared); refused when it may have been sent and no resolution was
	 * given; otherwise deleted. One audit row per step acted on keeps its status and phase.
	 */
	async release(request: ReleaseRequest): Promise<ReleasedStep[]> {
		await this.ensureSchema();
		const ttlMs = Math.max(0, Math.round(request.ttlMs));
		const resolution = request.resolution ?? null;
		return this.write((now) => {
			const rows = (
				request.step === null
					? this.stmt('SELECT * FROM ledger WHERE namespace = ? AND key = ? AND expires_at > ? ORDER BY step').all(request.namespace, request.key, now)
					: this.stmt('SELECT * FROM ledger WHERE namespace = ? AND key = ? AND step = ? AND expires_at > ?').all(
							request.namespace,
							request.key,
							request.step,
							now,
						)
			) as unknown as Row[];
			const out: ReleasedStep[] = [];
			for (const row of rows) {
				const held = row.status === 'in_progress' && row.lease_expires_at !== null && row.lease_expires_at > now;
				let action: ReleasedStep['action'];
				let reason: ReleasedStep['reason'];
				const only = request.onlyIf;
				if (only && (row.status !== only.status || num(row.fence) !== only.fence)) [action, reason] = ['refused', 'changed'];
				else if (held && request.evenIfHeld !== true) [action, reason] = ['refused', 'lease_live'];
				else if (resolution === 'sent' || resolution === 'dropped') action = `recorded_${resolution}`;
				else if (row.phase === 'sending' && resolution === null) [action, reason] = ['refused', 'may_have_sent'];
				else action = 'released';
				if (action === 'released') {
					this.stmt('DELETE FROM ledger WHERE namespace = ? AND key = ? AND step = ?').run(row.namespace, row.key, row.step);
				} else if (action !== 'refused') {
					const before = row.result === null ? null : JSON.parse(row.result);
					const result = { resolution, resolvedBy: request.releasedBy, resolvedAt: new Date(now).toISOString(), before };
					this.put({
						...row,
						status: 'completed',
						lease_holder: null,
						lease_expires_at: null,
						phase: null,
						fence: null,
						updated_at: now,
						expires_at: now + ttlMs,
						result: JSON.stringify(result),
					});
				}
				if (action !== 'refused') {
					const detail = { status: row.status, phase: row.phase, leaseHolder: row.lease_holder, fence: num(row.fence), resolution };
					this.stmt('INSERT INTO audit (namespace, key, step, action, actor, at, detail) VALUES (?, ?, ?, ?, ?, ?, ?)').run(
						row.namespace,
						row.key,
						row.step,
						AUDIT_ACTIONS[action],
						request.releasedBy,
						now,
						JSON.stringify(detail),
					);
				}
				out.push({ step: row.step, status: row.status, phase: row.phase, action, ...(reason ? { reason } : {}) });
			}
			return out;
		});
	}

	/** Days of counters older than COUNTS_KEPT_DAYS first, then expired ledger rows, `limit` in all. */
	async purgeExpired(limit: number): Promise<number> {
		await this.ensureSchema();
		if (limit <= 0) return 0;
		return this.write((now) => {
			const oldest = dayOf(now - COUNTS_KEPT_DAYS * DAY);
			const days = Number(
				this.stmt('DELETE FROM daily WHERE rowid IN (SELECT rowid FROM daily WHERE day < ? ORDER BY day LIMIT ?)').run(oldest, limit).changes,
			);
			const rows = Number(
				this.stmt('DELETE FROM ledger WHERE rowid IN (SELECT rowid FROM ledger WHERE expires_at <= ? ORDER BY expires_at LIMIT ?)').run(
					now,
					limit - days,
				).changes,
			);
			return days + rows;
		});
	}

	async stats(namespace: string): Promise<NamespaceStats> {
		await this.ensureSchema();
		return this.read((now) => {
			const rows = this.stmt(
				`SELECT status, count(*) AS n,
					sum(CASE WHEN status = 'in_progress' AND lease_expires_at <= ?2 THEN 1 ELSE 0 END) AS stuck,
					min(CASE WHEN status = 'in_progress' THEN first_seen_at END) AS oldest
				 FROM ledger WHERE namespace = ?1 AND expires_at > ?2 GROUP BY status`,
			).all(namespace, now);
			const blocked = this.stmt('SELECT duplicates_blocked AS n FROM counters WHERE namespace = ?').get(namespace);
			const byStatus = Object.fromEntries(STATUSES.map((s) => [s, 0])) as Record<Status, number>;
			let stuck = 0;
			let oldest: Date | null = null;
			for (const row of rows) {
				byStatus[row.status as Status] = Number(row.n);
				stuck += Number(row.stuck ?? 0);
				if (row.oldest !== null && row.oldest !== undefined) oldest = new Date(Number(row.oldest));
			}
			return { namespace, byStatus, duplicatesBlocked: blocked ? Number(blocked.n) : 0, oldestInProgressAt: oldest, stuck };
		});
	}

	/** A loose scan of the primary key's index: one probe per namespace listed, whatever its rows. */
	async listNamespaces(limit: number, after?: string | null): Promise<string[]> {
		const n = Math.max(0, Math.floor(limit));
		if (n === 0) return [];
		await this.ensureSchema();
		return this.read(() =>
			this.stmt(
				`WITH RECURSIVE ns (namespace) AS (
					SELECT (SELECT min(namespace) FROM ledger WHERE namespace > ?1)
					UNION ALL
					SELECT (SELECT min(namespace) FROM ledger WHERE namespace > ns.namespace) FROM ns WHERE ns.namespace IS NOT NULL
				) SELECT namespace FROM ns WHERE namespace IS NOT NULL LIMIT ?2`,
			)
				.all(after ?? '', n)
				.map((row) => String(row.namespace)),
		);
	}

	async getCheckpoint(namespace: string, name: string): Promise<Checkpoint | null> {
		await this.ensureSchema();
		return this.read(() => {
			const row = this.stmt('SELECT * FROM checkpoints WHERE namespace = ? AND name = ?').get(namespace, name);
			return row ? toCheckpoint(row) : null;
		});
	}

	async setCheckpoint(
		namespace: string,
		name: string,
		value: string,
		options: { force: boolean; updatedBy: string | null },
	): Promise<Checkpoint> {
		await this.ensureSchema();
		const current = this.write((now) => {
			const row = this.stmt('SELECT value FROM checkpoints WHERE namespace = ? AND name = ?').get(namespace, name);
			if (row && !options.force && isNewer(String(row.value), value)) return String(row.value);
			this.stmt('INSERT OR REPLACE INTO checkpoints (namespace, name, value, updated_at, updated_by) VALUES (?, ?, ?, ?, ?)').run(
				namespace,
				name,
				value,
				now,
				options.updatedBy,
			);
			return null;
		});
		if (current !== null) throw new CheckpointRegressionError(current, value);
		return (await this.getCheckpoint(namespace, name))!;
	}

	/** One transaction: today's row of each namespace, summed counter by counter. */
	async addCounts(increments: CountIncrement[]): Promise<void> {
		const byNamespace = countsByNamespace(increments);
		if (byNamespace.size === 0) return;
		await this.ensureSchema();
		this.write((now) => {
			const day = dayOf(now);
			for (const [namespace, pairs] of byNamespace) {
				const row = this.stmt('SELECT counts FROM daily WHERE namespace = ? AND day = ?').get(namespace, day);
				// A Map, not an object: counter names such as `constructor` are plain names here.
				const counts = new Map<string, number>(row ? Object.entries(JSON.parse(String(row.counts)) as Record<string, number>) : []);
				for (const [name, amount] of pairs) counts.set(name, (counts.get(name) ?? 0) + amount);
				this.stmt('INSERT OR REPLACE INTO daily (namespace, day, counts, updated_at) VALUES (?, ?, ?, ?)').run(
					namespace,
					day,
					JSON.stringify(Object.fromEntries(counts)),
					now,
				);
			}
		});
		this.purgeInBackground();
	}

	async readCounts(namespace: string, days: number): Promise<DailyCounts[]> {
		assertNamespace(namespace);
		assertCountDays(days);
		await this.ensureSchema();
		return this.read((now) => {
			const after = dayOf(now - days * DAY);
			return this.stmt('SELECT day, counts FROM daily WHERE namespace = ? AND day > ? ORDER BY day')
				.all(namespace, after)
				.map((row) => ({ day: String(row.day), counts: JSON.parse(String(row.counts)) as Record<string, number> }));
		});
	}

	async close(): Promise<void> {
		const db = this.db;
		this.db = null;
		this.statements.clear();
		this.schemaReady = false;
		db?.close();
	}
}

function toCheckpoint(row: SqlRow): Checkpoint {
	return {
		namespace: String(row.namespace),
		name: String(row.name),
		value: String(row.value),
		updatedAt: new Date(Number(row.updated_at)),
		updatedBy: row.updated_by === null ? null : String(row.updated_by),
	};
}

const encodeCursor = (parts: string[]) => Buffer.from(JSON.stringify(parts)).toString('base64url');

function decodeCursor(cursor: string | null | undefined): string[] | null {
	if (!cursor) return null;
	try {
		const parts = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
		if (Array.isArray(parts) && parts.length === 4 && parts.every((p) => typeof p === 'string') && /^\d+$/.test(parts[0])) return parts;
	} catch {
		// fall through
	}
	throw new LedgerInputError('The page cursor is not one this ledger made', 'Leave the cursor empty to start from the first page.');
}
