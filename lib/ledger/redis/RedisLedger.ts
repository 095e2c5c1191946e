import type { ChainableCommander, Cluster, Redis } from 'ioredis';

import { backgroundPurge } from '../autoPurge';
import { classifyExisting, compareCodePoints, effectiveTtlMs, idKey, resolveBatch } from '../claims';
import { CheckpointRegressionError, LedgerError } from '../errors';
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
import { STATUSES } from '../types';
import { assertCountDays, assertNamespace, countsByNamespace } from '../validate';
import { toUnavailable } from './errors';
import { LAYOUT_VERSION, assertPrefix, member, namespaceKeys, registryKey, versionKey } from './keys';
import { SCRIPTS, type ScriptName, type StoredRow } from './scripts';
import {
	assertTransferBatch,
	decodeTransferCursor,
	emptyCounts,
	encodeTransferCursor,
	type ExportBatch,
	type ImportCounts,
	type LedgerExport,
	type LedgerImport,
} from '../transfer';
import {
	auditToStream,
	dayExpiry,
	isRedisExportCursor,
	parseScannedKey,
	scanPattern,
	storedToTransfer,
	streamIdAfter,
	streamToAudit,
	transferToImport,
	type RedisExportCursor,
} from './transfer';
import { COUNTS_KEPT_DAYS } from '../types';

export interface RedisLedgerOptions {
	client: Redis | Cluster;
	/** Start of every key name; letters, digits, dots, dashes, underscores. Default `idem`. */
	prefix?: string;
	/** Keys per script call (each call is atomic; all calls of one claim go out in one pipeline). */
	chunkSize?: number;
	/**
	 * Rows expire by themselves; their bookkeeping does not: the notes claims leave for indexing and
	 * the index entries of rows gone. With this, claims and adds of counts start background turns
	 * of purgeExpired, which index what is pending and drop those entries (see backgroundPurge).
	 */
	autoPurge?: AutoPurgeOptions;
}

const DEFAULT_CHUNK = 1000;
const MAX_CHUNK = 5000;
/** Index entries one list call examines at most, so that no call blocks Redis for long. */
const LIST_BUDGET = 2000;
/** Index entries one stats call checks at most; stats() calls again until it has the whole answer. */
const STATS_BUDGET = 1000;
/**
 * Rows one script call indexes (of what claims left unindexed) or purges at most: a bound on how
 * long one call keeps Redis busy, and so on what a claim beside it waits. While the background
 * turns drained 1,000,000 expired rows, the p99 of one-key claims beside them was 28 ms with
 * 10,000 rows a call, 14 with 1,000, and 4.6 with 200, against 3.1 before (npm run bench:drain).
 */
const SLICE = 200;
/** Release audit entries kept per namespace (approximately). */
const AUDIT_MAX = 10_000;
const REGISTRY_PAGE = 100;

interface Call {
	name: ScriptName;
	namespace: string;
	keys: string[];
	args: Array<string | number>;
}

/** Optional text in script arguments: '' is null, anything else is prefixed with '='. */
const opt = (v: string | null | undefined) => (v === null || v === undefined ? '' : `=${v}`);
/**
 * Dates of one reply, one object per instant: the rows of a batch share their few instants (the
 * script's clock, the lease end, the expiry), so 10,000 records need a handful of Date objects, not
 * 40,000 for the garbage collector to copy. Records are values: nothing changes a Date in place.
 */
function datesOfReply(): (ms: number) => Date {
	const seen = new Map<number, Date>();
	return (ms) => {
		let d = seen.get(ms);
		if (d === undefined) {
			d = new Date(ms);
			seen.set(ms, d);
		}
		return d;
	};
}

const LONE_SURROGATE_POSSIBLE = /[\ud800-\udfff]/;
/**
 * The text as Redis stores it: UTF-8, where a lone UTF-16 surrogate cannot be and becomes U+FFFD,
 * as when the text travels as a script argument of its own.
 */
const wellFormed = (s: string) => (LONE_SURROGATE_POSSIBLE.test(s) ? Buffer.from(s, 'utf8').toString('utf8') : s);
const jsonText = (s: string) => JSON.stringify(wellFormed(s));
/** An optional text of a request as the row stores it: null when absent. */
const storedText = (s: string | null | undefined) => (s === null || s === undefined ? null : wellFormed(s));

/** The start of a claimed row's JSON text, as the claim script takes it (see CLAIM in scripts.ts). */
function rowHead(r: ClaimRequest): string {
	let head = `{"k":${jsonText(r.key)},"s":${jsonText(r.step)}`;
	if (r.fingerprint !== null && r.fingerprint !== undefined) head += `,"fp":${jsonText(r.fingerprint)}`;
	if (r.version !== null && r.version !== undefined) head += `,"v":${jsonText(r.version)}`;
	return head;
}

/**
 * A row as the scripts return it: its JSON text, and the milliseconds its lease had left by the
 * script's clock (null without a lease). Nothing here reads the host's clock.
 */
function toRecord(namespace: string, text: unknown, leaseRemainingMs: unknown, at: (ms: number) => Date = datesOfReply()): LedgerRecord {
	return recordOf(namespace, JSON.parse(String(text)) as StoredRow, leaseRemainingMs, at);
}

function recordOf(namespace: string, r: StoredRow, leaseRemainingMs: unknown, at: (ms: number) => Date): LedgerRecord {
	return {
		namespace,
		key: r.k,
		step: r.s,
		status: r.st as Status,
		leaseHolder: r.lh ?? null,
		leaseExpiresAt: r.le === null || r.le === undefined ? null : at(r.le),
		leaseRemainingMs: leaseRemainingMs === null || leaseRemainingMs === undefined ? null : Number(leaseRemainingMs),
		fence: r.g ?? null,
		fingerprint: r.fp ?? null,
		version: r.v ?? null,
		externalId: r.x ?? null,
		result: r.res === undefined || r.res === null ? null : JSON.parse(r.res),
		attempts: r.a,
		previousStatus: (r.ps ?? null) as Status | null,
		firstSeenAt: at(r.fs),
		updatedAt: at(r.u),
		expiresAt: at(r.e),
		phase: r.ph ?? null,
	};
}

/**
 * The record of a row whose text is the request's head then a tail that other rows share (the
 * claim script's '3'): the tail's record with the request's key and step, and its fingerprint and
 * version where the tail has none (they were in the head). Named fields, not a spread: this runs
 * per duplicate; the tail's Dates and result are shared, as records are values.
 */
function withHead(tail: LedgerRecord, r: ClaimRequest): LedgerRecord {
	return {
		namespace: tail.namespace,
		key: wellFormed(r.key),
		step: wellFormed(r.step),
		status: tail.status,
		leaseHolder: tail.leaseHolder,
		leaseExpiresAt: tail.leaseExpiresAt,
		leaseRemainingMs: tail.leaseRemainingMs,
		fence: tail.fence,
		fingerprint: tail.fingerprint ?? storedText(r.fingerprint),
		version: tail.version ?? storedText(r.version),
		externalId: tail.externalId,
		result: tail.result,
		attempts: tail.attempts,
		previousStatus: tail.previousStatus,
		firstSeenAt: tail.firstSeenAt,
		updatedAt: tail.updatedAt,
		expiresAt: tail.expiresAt,
		phase: tail.phase,
	};
}

/** Milliseconds left on a row's lease at `now` (a script's clock), as the scripts' remaining(): null without a lease. */
const leaseLeft = (row: StoredRow, now: number): number | null => (row.le === null || row.le === undefined ? null : Math.max(0, row.le - now));

/** `indexes` grouped by their namespace, in first-seen order (a Cluster pipeline holds one namespace: one slot). */
function byNamespace(indexes: number[], namespaceOf: (i: number) => string): Map<string, number[]> {
	const groups = new Map<string, number[]>();
	for (let j = 0; j < indexes.length; j++) {
		const i = indexes[j];
		const ns = namespaceOf(i);
		const group = groups.get(ns);
		if (group) group.push(i);
		else groups.set(ns, [i]);
	}
	return groups;
}

/** Rows as get and list scripts return them: text, lease ms left, text, lease ms left, ... */
function toRecords(namespace: string, flat: unknown[]): LedgerRecord[] {
	const out: LedgerRecord[] = [];
	const at = datesOfReply();
	for (let j = 0; j < flat.length; j += 2) out.push(toRecord(namespace, flat[j], flat[j + 1], at));
	return out;
}

/**
 * The ledger on Redis 5+ or Redis Cluster. Claims and records run as Lua scripts, one script call
 * per chunk of keys of one namespace, all chunks of a call sent in one pipeline. Rows expire
 * natively; the secondary indexes are cleaned lazily by get, list, stats and purgeExpired.
 *
 * Cluster mode: every key of a namespace shares the hash tag `{prefix:namespace}` (one slot), so
 * each script stays on one node; a batch spanning several namespaces becomes one pipeline per
 * namespace. list() without a namespace walks the namespace registry (`{prefix}:namespaces`, a
 * sorted set on its own slot) in byte order and pages through each namespace in turn, so the
 * pages come namespace by namespace, each ordered by updated_at.
 */
export class RedisLedger implements Ledger, LedgerExport, LedgerImport {
	readonly prefix: string;
	private readonly client: Redis;
	private readonly isCluster: boolean;
	private readonly chunkSize: number;
	private readonly registry: string;
	private ready: Promise<void> | null = null;
	private trips = 0;
	private lastConnectionError: unknown = null;
	/** The client's command timeout, for the message when a command runs out of it. */
	private readonly commandTimeoutMs: number | undefined;
	/** Called after each claim and add of counts (see backgroundPurge). */
	private readonly purgeInBackground: () => void;

	constructor(options: RedisLedgerOptions) {
		// Redis and Cluster share the command API; one type keeps the calls simple.
		this.client = options.client as Redis;
		this.isCluster = (options.client as Cluster).isCluster === true;
		const clientOptions = (options.client as { options?: { commandTimeout?: number; redisOptions?: { commandTimeout?: number } } }).options;
		this.commandTimeoutMs = clientOptions?.commandTimeout ?? clientOptions?.redisOptions?.commandTimeout;
		this.prefix = assertPrefix(options.prefix ?? 'idem');
		this.registry = registryKey(this.prefix);
		this.chunkSize = Math.min(MAX_CHUNK, Math.max(1, Math.floor(options.chunkSize ?? DEFAULT_CHUNK)));
		this.purgeInBackground = backgroundPurge(options.autoPurge, (batch) => this.purgeExpired(batch));
		for (const [name, lua] of Object.entries(SCRIPTS)) {
			if (typeof (this.client as unknown as Record<string, unknown>)[name] !== 'function') {
				this.client.defineCommand(name, { lua });
			}
		}
		// Keeps the real reason (refused, unknown host) for commands that then fail with "max retries".
		this.client.on('error', (error: Error) => {
			if (error?.name !== 'MaxRetriesPerRequestError') this.lastConnectionError = error;
		});
		this.client.on('ready', () => {
			this.lastConnectionError = null;
		});
	}

	get roundTrips(): number {
		return this.trips;
	}

	/** One command. */
	private async send<T>(command: () => Promise<T>): Promise<T> {
		this.trips++;
		try {
			return await command();
		} catch (error) {
			throw toUnavailable(error, this.lastConnectionError, this.commandTimeoutMs);
		}
	}

	/** One pipeline (one round trip). In cluster mode every key in it must share one slot. */
	private async pipeline(build: (p: ChainableCommander) => void): Promise<unknown[]> {
		const p = this.client.pipeline();
		build(p);
		const replies = (await this.send(() => p.exec())) ?? [];
		return replies.map(([error, value]) => {
			if (error) throw toUnavailable(error, this.lastConnectionError, this.commandTimeoutMs);
			return value;
		});
	}

	/**
	 * Runs script calls, then registers `namespaces` as holding rows. Standalone: everything in one
	 * pipeline. Cluster: one pipeline per namespace, in parallel, then the registry.
	 * The registry write always follows the row writes (purgeExpired relies on that order).
	 * With `onReply`, each call's reply is handed over as it arrives, while Redis still runs the
	 * calls after it: reading a reply overlaps the server's work instead of following all of it. A
	 * failed call is not handed over; it fails the run as without `onReply`.
	 */
	private async run(
		calls: Array<Call | (() => Call)>,
		namespaces: string[] = [],
		onReply?: (call: number, reply: unknown) => void,
	): Promise<unknown[]> {
		if (calls.length === 0) return [];
		let failure: unknown = null;
		/** A call given as a function is built when it is sent (see below). */
		const callAt = (i: number): Call => {
			const c = calls[i];
			if (typeof c !== 'function') return c;
			const built = c();
			calls[i] = built;
			return built;
		};
		const script = (p: ChainableCommander, i: number): unknown => {
			const c = callAt(i);
			const args = [c.keys.length, ...c.keys, ...c.args];
			// A pipeline queues the call and answers itself; the client sends it and answers its reply.
			const send = (p as unknown as Record<string, (args: unknown[], done?: (error: Error | null, reply: unknown) => void) => unknown>)[c.name];
			if (!onReply) return send.call(p, args);
			return send.call(p, args, (error, reply) => {
				if (error || failure !== null) return;
				try {
					onReply(i, reply);
				} catch (e) {
					failure = e;
				}
			});
		};
		const register = (p: ChainableCommander): unknown => p.zadd(this.registry, 'NX', ...namespaces.flatMap((ns) => [0, ns]));
		if (!this.isCluster) {
			// Each call is written as soon as it is built: Redis runs the first while the client
			// builds the next. One round trip, as a pipeline: nothing waits for a reply in between.
			this.trips++;
			const direct = this.client as unknown as ChainableCommander;
			const sent: Array<Promise<unknown>> = [];
			for (let i = 0; i < calls.length; i++) sent.push(script(direct, i) as Promise<unknown>);
			if (namespaces.length > 0) sent.push(register(direct) as Promise<unknown>);
			const replies = await Promise.all(sent).catch((error) => {
				throw toUnavailable(error, this.lastConnectionError, this.commandTimeoutMs);
			});
			if (failure !== null) throw failure;
			return replies.slice(0, calls.length);
		}
		const replies = new Array<unknown>(calls.length);
		await Promise.all(
			[...byNamespace(calls.map((_, i) => i), (i) => callAt(i).namespace).values()].map(async (indexes) => {
				const out = await this.pipeline((p) => indexes.forEach((i) => script(p, i)));
				indexes.forEach((i, j) => (replies[i] = out[j]));
			}),
		);
		if (namespaces.length > 0) await this.pipeline(register);
		if (failure !== null) throw failure;
		return replies;
	}

	/** Request indexes grouped by namespace, then cut into chunks. */
	private chunks(indexes: number[], namespaceOf: (i: number) => string): Array<{ namespace: string; indexes: number[] }> {
		const out: Array<{ namespace: string; indexes: number[] }> = [];
		for (const [namespace, list] of byNamespace(indexes, namespaceOf)) {
			for (let start = 0; start < list.length; start += this.chunkSize) {
				out.push({ namespace, indexes: list.slice(start, start + this.chunkSize) });
			}
		}
		return out;
	}

	/** Redis needs no schema; this checks the connection and the key layout version, once. */
	ensureSchema(): Promise<void> {
		this.ready ??= this.checkLayout().catch((error) => {
			this.ready = null;
			throw error;
		});
		return this.ready;
	}

	private async checkLayout(): Promise<void> {
		// Connect explicitly the first time: fails on the first attempt, with its real reason.
		if (this.client.status === 'wait') await this.send(() => this.client.connect());
		const key = versionKey(this.prefix);
		const [, version] = await this.pipeline((p) => p.set(key, String(LAYOUT_VERSION), 'NX').get(key));
		// An older layout this version reads (see keys.ts) is marked as this one: from now on rows are
		// written in this layout, which the versions that wrote the older one would not fully read.
		if (Number(version) < LAYOUT_VERSION) await this.send(() => this.client.set(key, String(LAYOUT_VERSION)));
		if (Number(version) > LAYOUT_VERSION) {
			throw new LedgerError(
				`The Redis keys under the prefix "${this.prefix}" were written by a newer version of this package (layout ${String(version)})`,
				'Update n8n-nodes-idempotency, or use another key prefix.',
			);
		}
	}

	async claim(requests: ClaimRequest[], options: ClaimOptions): Promise<ClaimOutcome[]> {
		await this.ensureSchema();
		const { unique, outcomes } = resolveBatch(requests);
		const chunks = this.chunks(unique, (i) => requests[i].namespace);
		const leaseMs = Math.max(0, Math.round(options.leaseMs));
		// Retention never shorter than the lease: a row cannot expire while a run holds it.
		const ttlMs = Math.max(0, Math.round(effectiveTtlMs(options)));
		const leaseRemaining = options.mode === 'lease' ? leaseMs : null;
		const holder = String(options.holder ?? '');
		// Built one at a time as they are sent (see run).
		const calls = chunks.map(({ namespace, indexes }) => (): Call => {
			const k = namespaceKeys(this.prefix, namespace);
			const keys = k.fixed.slice();
			const args: Array<string | number> = [options.mode, holder, leaseMs, ttlMs, options.reclaimOwnLease ? '1' : '', indexes.length];
			for (let j = 0; j < indexes.length; j++) {
				const r = requests[indexes[j]];
				keys.push(k.row(member(r.key, r.step)));
				args.push(rowHead(r));
			}
			return { name: 'idemLedgerClaim', namespace, keys, args };
		});
		const at = datesOfReply();
		const settle = (c: number, reply: unknown) => {
			const { namespace, indexes } = chunks[c];
			const flat = reply as Array<number | string | null>;
			// The script's clock, the token of this call's claims, one code per request, then one
			// JSON array of the rows (and phases) of the requests not claimed fresh (see CLAIM).
			const now = Number(flat[0]);
			const fence = flat[1] === null ? null : Number(flat[1]);
			const codes = String(flat[2]);
			const rows = flat[3] === null ? [] : (JSON.parse(String(flat[3])) as Array<StoredRow | string | null>);
			// The shared tails of rows blocked as '3', each made a record once; which tail each '3' row has.
			const tails = flat[4] === null ? [] : (JSON.parse(String(flat[4])) as StoredRow[]).map((tail) => recordOf(namespace, tail, leaseLeft(tail, now), at));
			const tailOf = flat[5] === null ? null : String(flat[5]).split(',');
			let next = 0;
			let nextTail = 0;
			indexes.forEach((index, j) => {
				const code = codes.charCodeAt(j);
				if (code === 50 /* '2' */) {
					// A key without a live row: the script wrote exactly this row.
					const r = requests[index];
					const record: LedgerRecord = {
						namespace,
						key: wellFormed(r.key),
						step: wellFormed(r.step),
						status: options.mode === 'lease' ? 'in_progress' : 'completed',
						leaseHolder: options.mode === 'lease' ? holder : null,
						leaseExpiresAt: options.mode === 'lease' ? at(now + leaseMs) : null,
						leaseRemainingMs: leaseRemaining,
						fence,
						fingerprint: storedText(r.fingerprint),
						version: storedText(r.version),
						externalId: null,
						result: null,
						attempts: 1,
						previousStatus: null,
						firstSeenAt: at(now),
						updatedAt: at(now),
						expiresAt: at(now + ttlMs),
						phase: null,
					};
					outcomes[index] = { kind: 'claimed', record, previousStatus: null, previousPhase: null };
					return;
				}
				if (code === 51 /* '3' */) {
					const shared = tails[tailOf === null ? 0 : Number(tailOf[nextTail++]) - 1];
					outcomes[index] = classifyExisting(withHead(shared, requests[index]), requests[index], options.mode);
					return;
				}
				const row = rows[next++] as StoredRow;
				if (code === 49 /* '1' */) {
					// Then the phase the replaced row had reached.
					const previousPhase = rows[next++] as string | null;
					const record = recordOf(namespace, row, leaseRemaining, at);
					outcomes[index] = { kind: 'claimed', record, previousStatus: record.previousStatus, previousPhase };
				} else {
					outcomes[index] = classifyExisting(recordOf(namespace, row, leaseLeft(row, now), at), requests[index], options.mode);
				}
			});
		};
		await this.run(calls, [...new Set(chunks.map((c) => c.namespace))], settle);
		this.purgeInBackground();
		return outcomes as ClaimOutcome[];
	}

	async record(requests: RecordRequest[], options: RecordOptions): Promise<RecordOutcome[]> {
		await this.ensureSchema();
		// Last write per row wins inside one call.
		const last = new Map<string, number>();
		requests.forEach((r, i) => last.set(idKey(r.namespace, r.key, r.step), i));
		const unique = [...last.values()].sort((a, b) => a - b);
		const chunks = this.chunks(unique, (i) => requests[i].namespace);
		const ttlMs = Math.max(0, Math.round(options.ttlMs));
		const calls = chunks.map(({ namespace, indexes }): Call => {
			const k = namespaceKeys(this.prefix, namespace);
			const members = indexes.map((i) => member(requests[i].key, requests[i].step));
			const args: Array<string | number> = [opt(options.holder), ttlMs, indexes.length, options.onlyInProgress ? '1' : '0'];
			indexes.forEach((i, j) => {
				const r = requests[i];
				const externalId = r.externalId === undefined || r.externalId === null ? null : String(r.externalId);
				const result = r.result === undefined ? null : JSON.stringify(r.result);
				const fence = typeof r.fence === 'number' ? String(r.fence) : null;
				// A claim whose fence is not a whole number can hold no row: sent without one, it is refused.
				const claimFence = r.claim && Number.isSafeInteger(r.claim.fence) ? String(r.claim.fence) : null;
				args.push(members[j], r.key, r.step, r.status, opt(r.fingerprint), opt(externalId), opt(result), opt(fence));
				args.push(r.claim ? `=${member(r.key, r.claim.step)}` : '', opt(claimFence), r.keepSending === true ? '1' : '');
			});
			const keys = [...k.fixed, ...members.map(k.row)];
			return { name: 'idemLedgerRecord', namespace, keys, args };
		});
		const replies = await this.run(calls, [...new Set(chunks.map((c) => c.namespace))]);
		const written = new Map<string, LedgerRecord>();
		const missing = new Set<string>();
		replies.forEach((reply, c) => {
			(reply as Array<string | number | null>).forEach((text, j) => {
				const r = requests[chunks[c].indexes[j]];
				// 0: refused because a row the write needed is gone (see RECORD).
				if (text === 0) missing.add(idKey(r.namespace, r.key, r.step));
				if (!text) return;
				// A written row has no lease: it was settled.
				const record = toRecord(chunks[c].namespace, text, null);
				written.set(idKey(record.namespace, record.key, record.step), record);
			});
		});
		return requests.map((r): RecordOutcome => {
			const id = idKey(r.namespace, r.key, r.step);
			const record = written.get(id);
			if (record) return { kind: 'written', record };
			return missing.has(id) ? { kind: 'lost_lease', missing: true } : { kind: 'lost_lease' };
		});
	}

	/**
	 * Runs a script built on OWNED (markPhase, renewLeases) over `rows`, one call per namespace
	 * chunk, and answers per row whether it was changed.
	 */
	private async updateOwned(name: 'idemLedgerMarkPhase' | 'idemLedgerRenewLeases', rows: FencedRow[], value: string | number): Promise<boolean[]> {
		if (rows.length === 0) return [];
		await this.ensureSchema();
		const chunks = this.chunks(
			rows.map((_, i) => i),
			(i) => rows[i].namespace,
		);
		const calls = chunks.map(({ namespace, indexes }): Call => {
			const k = namespaceKeys(this.prefix, namespace);
			const members = indexes.map((i) => member(rows[i].key, rows[i].step));
			const args: Array<string | number> = [value, indexes.length];
			indexes.forEach((i, j) => args.push(members[j], String(rows[i].fence)));
			const keys = [...k.fixed, ...members.map(k.row)];
			return { name, namespace, keys, args };
		});
		const replies = await this.run(calls);
		const changed = new Array<boolean>(rows.length).fill(false);
		replies.forEach((reply, c) => (reply as number[]).forEach((ok, j) => (changed[chunks[c].indexes[j]] = ok === 1)));
		return changed;
	}

	markPhase(rows: FencedRow[], phase: string): Promise<boolean[]> {
		return this.updateOwned('idemLedgerMarkPhase', rows, phase);
	}

	renewLeases(rows: FencedRow[], leaseMs: number): Promise<boolean[]> {
		return this.updateOwned('idemLedgerRenewLeases', rows, Math.max(0, Math.round(leaseMs)));
	}

	async get(namespace: string, key: string): Promise<LedgerRecord[]> {
		await this.ensureSchema();
		const k = namespaceKeys(this.prefix, namespace);
		const [rows] = await this.run([{ name: 'idemLedgerGet', namespace, keys: [...k.fixed, k.steps(key)], args: [] }]);
		return toRecords(namespace, rows as unknown[]).sort((a, b) => compareCodePoints(a.step, b.step));
	}

	/**
	 * The rows of `ids` as they are, null where absent or expired. A plain read needs no script:
	 * the server's `TIME` and one `MGET` per chunk, in one pipeline (in Cluster, one per namespace,
	 * on the node of its slot), judged by that clock here as the scripts judge by theirs. A row
	 * `MGET` returns was live when it was read, so a row it returns that `TIME` (read just before)
	 * already counts as expired is one that expired in between.
	 */
	async peek(ids: RowId[]): Promise<Array<LedgerRecord | null>> {
		if (ids.length === 0) return [];
		await this.ensureSchema();
		const out = new Array<LedgerRecord | null>(ids.length).fill(null);
		const read = async (chunks: Array<{ namespace: string; indexes: number[] }>) => {
			const rowKeys = chunks.map(({ namespace, indexes }) => {
				const k = namespaceKeys(this.prefix, namespace);
				return indexes.map((i) => k.row(member(ids[i].key, ids[i].step)));
			});
			// Standalone: the commands go out one after the other without waiting for a reply, so
			// still one round trip, but without a pipeline object, which ioredis fills with every
			// script this ledger defined (about 20 µs of a 0.3 ms cache hit). A Cluster pipeline is
			// what sends TIME to the node of the rows' slot.
			const replies = this.isCluster
				? await this.pipeline((p) => {
						p.time();
						for (const keys of rowKeys) p.mget(keys);
					})
				: await this.send(() => Promise.all<unknown>([this.client.time(), ...rowKeys.map((keys) => this.client.mget(keys))]));
			const [seconds, micros] = replies[0] as [string, string];
			const now = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
			const at = datesOfReply();
			chunks.forEach(({ namespace, indexes }, c) => {
				const texts = replies[c + 1] as Array<string | null>;
				indexes.forEach((index, j) => {
					if (texts[j] === null || texts[j] === undefined) return;
					const row = JSON.parse(texts[j]!) as StoredRow;
					if (row.e <= now) return;
					out[index] = recordOf(namespace, row, leaseLeft(row, now), at);
				});
			});
		};
		const chunks = this.chunks(
			ids.map((_, i) => i),
			(i) => ids[i].namespace,
		);
		if (!this.isCluster) await read(chunks);
		else {
			const groups = byNamespace(chunks.map((_, c) => c), (c) => chunks[c].namespace);
			await Promise.all([...groups.values()].map((group) => read(group.map((c) => chunks[c]))));
		}
		return out;
	}

	async list(filter: ListFilter): Promise<ListPage> {
		await this.ensureSchema();
		const cursor = decodeCursor(filter.cursor);
		const limit = Math.max(1, Math.floor(filter.limit));
		const want = limit + 1;
		const found: LedgerRecord[] = [];
		const namespaces = filter.namespace !== undefined ? single(filter.namespace) : this.namespaces(cursor?.[0]);
		for await (const namespace of namespaces) {
			const k = namespaceKeys(this.prefix, namespace);
			await this.indexPending(namespace);
			let after = cursor && cursor[0] === namespace ? [cursor[1], cursor[2]] : ['', ''];
			for (;;) {
				const [reply] = await this.run([
					{
						name: 'idemLedgerList',
						namespace,
						keys: k.fixed,
						args: [
							after[0],
							after[1],
							filter.notUpdatedForMs === undefined || filter.notUpdatedForMs === null
								? ''
								: String(Math.max(0, Math.round(filter.notUpdatedForMs))),
							filter.status ?? '',
							filter.stuckOnly === true ? '1' : '0',
							filter.sending === undefined || filter.sending === null ? '' : filter.sending ? '1' : '0',
							want - found.length,
							LIST_BUDGET,
						],
					},
				]);
				const [done, lastScore, lastMember, rows] = reply as [number, string, string, unknown[]];
				found.push(...toRecords(namespace, rows));
				if (found.length >= want || done === 1) break;
				after = [String(lastScore), String(lastMember)];
			}
			if (found.length >= want) break;
		}
		const page = found.slice(0, limit);
		const tail = page[page.length - 1];
		return {
			records: page,
			nextCursor:
				found.length > limit && tail
					? encodeCursor([tail.namespace, String(tail.updatedAt.getTime()), member(tail.key, tail.step)])
					: null,
		};
	}

	/**
	 * A claim leaves the index entries of the rows it creates to be written later (layout 3, see
	 * keys.ts). This writes those of `namespace`, in slices that each keep Redis busy briefly, before
	 * anything reads its indexes (list, stats, purge, export) or a release removes rows.
	 */
	private async indexPending(namespace: string): Promise<void> {
		const keys = namespaceKeys(this.prefix, namespace).fixed;
		for (;;) {
			const [left] = await this.run([{ name: 'idemLedgerIndexPending', namespace, keys, args: [SLICE] }]);
			if (Number(left) === 0) return;
		}
	}

	/** The namespace registry in byte order, from `start` (inclusive). */
	private async *namespaces(start?: string): AsyncGenerator<string> {
		let min = start === undefined ? '-' : `[${start}`;
		for (;;) {
			const page = await this.send(() => this.client.zrangebylex(this.registry, min, '+', 'LIMIT', 0, REGISTRY_PAGE));
			yield* page;
			if (page.length < REGISTRY_PAGE) return;
			min = `(${page[page.length - 1]}`;
		}
	}

	/**
	 * Every live step of the key (or the one step), each decided once in one script: refused when no
	 * longer as `onlyIf` says, or while a run holds its lease (unless evenIfHeld), recorded as sent
	 * or dropped on the operator's word, refused
	 * when it may have been sent and no resolution was given, otherwise deleted. One audit entry per
	 * step acted on. Answers in step byte order.
	 */
	async release(request: ReleaseRequest): Promise<ReleasedStep[]> {
		await this.ensureSchema();
		const { namespace, key, step } = request;
		const k = namespaceKeys(this.prefix, namespace);
		// A released row leaves no trace; one still unindexed would be taken for expired by purge.
		await this.indexPending(namespace);
		const [reply] = await this.run([
			{
				name: 'idemLedgerRelease',
				namespace,
				keys: [...k.fixed, k.steps(key), k.audit],
				args: [
					step === null ? '' : member(key, step),
					request.releasedBy,
					AUDIT_MAX,
					request.evenIfHeld === true ? '1' : '',
					request.resolution ?? '',
					Math.max(0, Math.round(request.ttlMs)),
					request.onlyIf?.status ?? '',
					request.onlyIf?.fence ?? '',
				],
			},
		]);
		const flat = reply as Array<string | null>;
		const steps: ReleasedStep[] = [];
		for (let j = 0; j < flat.length; j += 5) {
			const reason = flat[j + 4] as ReleasedStep['reason'] | null;
			steps.push({
				step: String(flat[j]),
				status: flat[j + 1] as Status,
				phase: flat[j + 2] ?? null,
				action: flat[j + 3] as ReleasedStep['action'],
				...(reason ? { reason } : {}),
			});
		}
		return steps.sort((a, b) => compareCodePoints(a.step, b.step));
	}

	/**
	 * Redis deletes expired rows itself; this removes at most `limit` index entries of such rows
	 * (the count returned), and forgets namespaces that hold no rows any more.
	 */
	async purgeExpired(limit: number): Promise<number> {
		await this.ensureSchema();
		let purged = 0;
		if (limit <= 0) return 0;
		for await (const namespace of this.namespaces()) {
			const k = namespaceKeys(this.prefix, namespace);
			await this.indexPending(namespace);
			for (;;) {
				const slice = Math.min(SLICE, limit - purged);
				const [reply] = await this.run([{ name: 'idemLedgerPurge', namespace, keys: k.fixed, args: [slice] }]);
				const [n, left] = reply as [number, number];
				purged += n;
				if (left === 0) await this.forgetNamespace(namespace);
				if (n < slice || purged >= limit) break;
			}
			if (purged >= limit) break;
		}
		return purged;
	}

	/**
	 * Drops an empty namespace from the registry. A concurrent claim writes its rows (and notes them
	 * as unindexed) before it registers the namespace, so re-checking both after the removal cannot
	 * lose one.
	 */
	private async forgetNamespace(namespace: string): Promise<void> {
		const k = namespaceKeys(this.prefix, namespace);
		await this.send(() => this.client.zrem(this.registry, namespace));
		const [indexed, unindexed] = (await this.pipeline((p) => p.zcard(k.fixed[0]).llen(k.unindexed))) as [number, number];
		if (indexed + unindexed > 0) {
			await this.send(() => this.client.zadd(this.registry, 'NX', 0, namespace));
		}
	}

	/**
	 * Counts come from the status indexes (O(log n)); the oldest in-progress row and the lapsed
	 * leases are read off the in-progress rows themselves (no index is written for them on the claim
	 * path), so the script reads them in bounded slices and this calls it again, with its cursor and
	 * the first call's server time, until the scan is done. Stats cost O(rows in progress).
	 */
	async stats(namespace: string): Promise<NamespaceStats> {
		await this.ensureSchema();
		const k = namespaceKeys(this.prefix, namespace);
		await this.indexPending(namespace);
		let state = { cutoff: '', score: '', member: '', stuck: 0, oldest: '' };
		let first: Array<number | string | null> | null = null;
		for (;;) {
			const [reply] = await this.run([
				{
					name: 'idemLedgerStats',
					namespace,
					keys: k.fixed,
					args: [state.cutoff, state.score, state.member, state.stuck, state.oldest, STATS_BUDGET],
				},
			]);
			const out = reply as Array<number | string | null>;
			first ??= out;
			state = { cutoff: String(out[10]), score: String(out[8]), member: String(out[9]), stuck: Number(out[5]), oldest: out[6] === null ? '' : String(out[6]) };
			if (out[7] === 1) break;
		}
		const byStatus = Object.fromEntries(STATUSES.map((s, i) => [s, Number(first[i])])) as Record<Status, number>;
		return {
			namespace,
			byStatus,
			duplicatesBlocked: Number(first[4] ?? 0),
			oldestInProgressAt: state.oldest === '' ? null : new Date(Number(state.oldest)),
			stuck: state.stuck,
		};
	}

	/**
	 * The namespace registry (every row write adds its namespace; purge forgets empty ones): one
	 * ZRANGEBYLEX of `limit` entries.
	 */
	async listNamespaces(limit: number, after?: string | null): Promise<string[]> {
		const n = Math.max(0, Math.floor(limit));
		if (n === 0) return [];
		await this.ensureSchema();
		const min = after ? `(${after}` : '-';
		return await this.send(() => this.client.zrangebylex(this.registry, min, '+', 'LIMIT', 0, n));
	}

	async getCheckpoint(namespace: string, name: string): Promise<Checkpoint | null> {
		await this.ensureSchema();
		const key = namespaceKeys(this.prefix, namespace).checkpoint(name);
		const [value, updatedAt, updatedBy] = await this.send(() => this.client.hmget(key, 'v', 'u', 'by'));
		if (value === null) return null;
		return { namespace, name, value, updatedAt: new Date(Number(updatedAt)), updatedBy };
	}

	async setCheckpoint(
		namespace: string,
		name: string,
		value: string,
		options: { force: boolean; updatedBy: string | null },
	): Promise<Checkpoint> {
		await this.ensureSchema();
		const key = namespaceKeys(this.prefix, namespace).checkpoint(name);
		const [reply] = await this.run([
			{
				name: 'idemLedgerSetCheckpoint',
				namespace,
				keys: [key],
				args: [value, options.force ? '1' : '0', opt(options.updatedBy)],
			},
		]);
		const [ok, detail] = reply as [number, string];
		if (ok !== 1) throw new CheckpointRegressionError(String(detail), value);
		return { namespace, name, value, updatedAt: new Date(Number(detail)), updatedBy: options.updatedBy };
	}

	/**
	 * One script call adds every namespace's counters to today's hashes (the day is the script's).
	 * Standalone: one call, one round trip. Cluster: the keys of one call must share a slot and
	 * every namespace has a hash tag of its own, so each namespace gets its own call, in its own
	 * pipeline, all sent at once (see run): n namespaces cost n round trips, side by side.
	 */
	async addCounts(increments: CountIncrement[]): Promise<void> {
		const byNamespace = countsByNamespace(increments);
		if (byNamespace.size === 0) return;
		await this.ensureSchema();
		const call = (namespaces: string[]): Call => {
			const args: Array<string | number> = [];
			for (const ns of namespaces) {
				const pairs = byNamespace.get(ns)!;
				args.push(pairs.length);
				// String(amount) is the shortest text that reads back as the same number.
				for (const [name, amount] of pairs) args.push(name, String(amount));
			}
			return { name: 'idemLedgerAddCounts', namespace: namespaces[0], keys: namespaces.map((ns) => namespaceKeys(this.prefix, ns).days), args };
		};
		const namespaces = [...byNamespace.keys()];
		await this.run(this.isCluster ? namespaces.map((ns) => call([ns])) : [call(namespaces)]);
		this.purgeInBackground();
	}

	async readCounts(namespace: string, days: number): Promise<DailyCounts[]> {
		assertNamespace(namespace);
		assertCountDays(days);
		await this.ensureSchema();
		const [reply] = await this.run([
			{ name: 'idemLedgerReadCounts', namespace, keys: [namespaceKeys(this.prefix, namespace).days], args: [days] },
		]);
		const flat = reply as Array<string | string[]>;
		const out: DailyCounts[] = [];
		for (let j = 0; j < flat.length; j += 2) {
			const fields = flat[j + 1] as string[];
			const counts: Record<string, number> = {};
			for (let f = 0; f < fields.length; f += 2) counts[fields[f]] = Number(fields[f + 1]);
			out.push({ day: String(flat[j]), counts });
		}
		return out;
	}

	/**
	 * One page of this ledger in the neutral format (see ../transfer.ts): first the rows, namespace
	 * by namespace (the registry in byte order, each namespace's updated_at index in order), then
	 * checkpoints, day counters and audit entries, found by SCAN on each master in turn (on Redis
	 * Cluster every key is read on the node that holds it). Reads only.
	 */
	async exportBatch(cursorText: string | null, limit: number): Promise<ExportBatch> {
		await this.ensureSchema();
		const want = Math.max(1, Math.floor(limit));
		const cursor: RedisExportCursor = cursorText === null ? { p: 'rows', ns: null, s: '', m: '' } : decodeTransferCursor(cursorText, isRedisExportCursor);
		const batch: ExportBatch = { rows: [], checkpoints: [], days: [], audit: [], next: null };
		if (cursor.p === 'rows') {
			let namespace = cursor.ns;
			let after = [cursor.s, cursor.m];
			if (namespace === null) {
				const [first] = await this.send(() => this.client.zrangebylex(this.registry, '-', '+', 'LIMIT', 0, 1));
				namespace = first ?? null;
				after = ['', ''];
			}
			if (namespace !== null) {
				const k = namespaceKeys(this.prefix, namespace);
				await this.indexPending(namespace);
				const [reply] = await this.run([{ name: 'idemLedgerExport', namespace, keys: k.fixed, args: [after[0], after[1], want, want * 2] }]);
				const [done, lastScore, lastMember, now, rows] = reply as [number, string, string, string, string[]];
				batch.rows = rows.map((text) => storedToTransfer(namespace!, text, Number(now)));
				if (done !== 1) {
					batch.next = encodeTransferCursor({ p: 'rows', ns: namespace, s: String(lastScore), m: String(lastMember) });
					return batch;
				}
				const [following] = await this.send(() => this.client.zrangebylex(this.registry, `(${namespace}`, '+', 'LIMIT', 0, 1));
				if (following !== undefined) {
					batch.next = encodeTransferCursor({ p: 'rows', ns: following, s: '', m: '' });
					return batch;
				}
			}
			batch.next = encodeTransferCursor({ p: 'scan', n: 0, c: '0', d: false, q: [], id: '0-0' });
			return batch;
		}
		const nodes = this.masters();
		const node = nodes[cursor.n];
		if (!node) return batch;
		/** Where to go after this page: the same node, or the next one once it is scanned and drained. */
		const after = (c: string, d: boolean, q: string[], id: string): string | null => {
			if (!d || q.length > 0) return encodeTransferCursor({ p: 'scan', n: cursor.n, c, d, q, id });
			return cursor.n + 1 < nodes.length ? encodeTransferCursor({ p: 'scan', n: cursor.n + 1, c: '0', d: false, q: [], id: '0-0' }) : null;
		};
		if (cursor.q.length > 0) {
			// An audit stream found by the scan, read page by page.
			const [key, ...rest] = cursor.q;
			const namespace = (parseScannedKey(this.prefix, key) as { namespace: string }).namespace;
			const start = cursor.id === '0-0' ? '-' : streamIdAfter(cursor.id);
			const entries = await this.send(() => node.xrange(key, start, '+', 'COUNT', want));
			batch.audit = entries.map(([, flat]) => streamToAudit(namespace, flat));
			const more = entries.length >= want;
			batch.next = after(cursor.c, cursor.d, more ? cursor.q : rest, more ? entries[entries.length - 1][0] : '0-0');
			return batch;
		}
		if (cursor.d) {
			batch.next = after(cursor.c, true, [], '0-0');
			return batch;
		}
		const [next, keys] = await this.send(() => node.scan(cursor.c, 'MATCH', scanPattern(this.prefix), 'COUNT', want));
		const found = keys.map((key) => ({ key, what: parseScannedKey(this.prefix, key) }));
		const reads = found.filter((f) => f.what?.kind === 'cp' || f.what?.kind === 'd');
		if (reads.length > 0) {
			const p = node.pipeline();
			for (const f of reads) p.hgetall(f.key);
			const replies = (await this.send(() => p.exec())) ?? [];
			replies.forEach(([error, value], i) => {
				if (error) throw toUnavailable(error, this.lastConnectionError, this.commandTimeoutMs);
				const fields = value as Record<string, string>;
				const what = reads[i].what!;
				if (what.kind === 'cp' && fields.v !== undefined) {
					batch.checkpoints.push({ namespace: what.namespace, name: what.name, value: fields.v, updatedAt: Number(fields.u), updatedBy: fields.by ?? null });
				} else if (what.kind === 'd' && Object.keys(fields).length > 0) {
					batch.days.push({ namespace: what.namespace, day: what.day, counts: Object.fromEntries(Object.entries(fields).map(([c, v]) => [c, Number(v)])) });
				}
			});
		}
		// SCAN may return a key twice; a stream already queued is not queued again.
		const queue = [...new Set([...cursor.q, ...found.filter((f) => f.what?.kind === 'audit').map((f) => f.key)])];
		batch.next = after(next, next === '0', queue, '0-0');
		return batch;
	}

	/** The nodes to scan: the masters of a cluster in a fixed order, or the one server. */
	private masters(): Redis[] {
		if (!this.isCluster) return [this.client];
		const name = (n: Redis) => `${n.options.host ?? ''}:${n.options.port ?? ''}`;
		return (this.client as unknown as Cluster).nodes('master').sort((a, b) => compareCodePoints(name(a), name(b)));
	}

	/**
	 * Merges a page of another ledger's export into this one (see ../transfer.ts for the rule): one
	 * script call per namespace chunk of rows, one per checkpoint, day and audit stream, all sent in
	 * one pipeline (on a cluster, one per namespace, side by side).
	 */
	async importBatch(batch: Omit<ExportBatch, 'next'>): Promise<ImportCounts> {
		assertTransferBatch(batch);
		await this.ensureSchema();
		const counts = emptyCounts();
		const byId = new Map<string, number>();
		batch.rows.forEach((r, i) => byId.set(idKey(r.namespace, r.key, r.step), i));
		const rows = [...byId.values()].sort((a, b) => a - b);
		const rowChunks = this.chunks(rows, (i) => batch.rows[i].namespace);
		const calls: Call[] = rowChunks.map(({ namespace, indexes }) => {
			const k = namespaceKeys(this.prefix, namespace);
			const members = indexes.map((i) => member(batch.rows[i].key, batch.rows[i].step));
			const args: Array<string | number> = [indexes.length];
			indexes.forEach((i, j) => args.push(members[j], transferToImport(batch.rows[i])));
			const keys = [...k.fixed, ...members.map(k.row)];
			return { name: 'idemLedgerImportRows', namespace, keys, args };
		});
		for (const c of batch.checkpoints) {
			calls.push({
				name: 'idemLedgerImportCheckpoint',
				namespace: c.namespace,
				keys: [namespaceKeys(this.prefix, c.namespace).checkpoint(c.name)],
				args: [c.value, String(Math.round(c.updatedAt)), opt(c.updatedBy)],
			});
		}
		for (const d of batch.days) {
			const args: Array<string | number> = [dayExpiry(d.day, COUNTS_KEPT_DAYS)];
			for (const [name, amount] of Object.entries(d.counts)) args.push(name, String(amount));
			calls.push({ name: 'idemLedgerImportDay', namespace: d.namespace, keys: [`${namespaceKeys(this.prefix, d.namespace).days}${d.day}`], args });
		}
		const audits = new Map<string, string[]>();
		for (const e of batch.audit) {
			const list = audits.get(e.namespace) ?? [];
			list.push(JSON.stringify(auditToStream(e)));
			audits.set(e.namespace, list);
		}
		for (const [namespace, entries] of audits) {
			calls.push({ name: 'idemLedgerImportAudit', namespace, keys: [namespaceKeys(this.prefix, namespace).audit], args: [AUDIT_MAX, ...entries] });
		}
		const replies = await this.run(calls, [...new Set(rowChunks.map((c) => c.namespace))]);
		replies.forEach((reply, i) => {
			const call = calls[i];
			if (call.name === 'idemLedgerImportRows') {
				for (const verdict of reply as number[]) {
					if (verdict === 1) counts.rowsCopied++;
					else if (verdict === 2) counts.rowsReplaced++;
					else if (verdict === 3) counts.rowsAlreadyPresent++;
					else counts.rowsSkippedOlder++;
				}
			} else if (call.name === 'idemLedgerImportCheckpoint') {
				if (reply === 1) counts.checkpointsCopied++;
				else counts.checkpointsKept++;
			} else if (call.name === 'idemLedgerImportDay') {
				if (reply === 1) counts.counterDaysCopied++;
				else counts.counterDaysKept++;
			} else {
				const written = Number(reply);
				counts.auditCopied += written;
				counts.auditAlreadyPresent += call.args.length - 1 - written;
			}
		});
		return counts;
	}

	async close(): Promise<void> {
		await closeClient(this.client);
	}
}

/** Quits a client politely if it is connected, otherwise stops it; resolves once it has ended. */
export async function closeClient(client: Redis | Cluster): Promise<void> {
	const status = client.status;
	if (status === 'end') return;
	if (status !== 'ready' && status !== 'connecting' && status !== 'connect') {
		// Never connected, or between reconnects: no live connection to wait for.
		client.disconnect();
		return;
	}
	const ended = new Promise<void>((resolve) => {
		client.once('end', () => resolve());
		setTimeout(resolve, 3_000).unref();
	});
	if (status === 'ready') await client.quit().catch(() => client.disconnect());
	else client.disconnect();
	await ended;
}

async function* single(namespace: string): AsyncGenerator<string> {
	yield namespace;
}

const encodeCursor = (parts: string[]) => Buffer.from(JSON.stringify(parts)).toString('base64url');

function decodeCursor(cursor: string | null | undefined): [string, string, string] | null {
	if (!cursor) return null;
	try {
		const parts = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
		if (
			Array.isArray(parts) &&
			parts.length === 3 &&
			parts.every((p) => typeof p === 'string') &&
			/^\d+$/.test(parts[1])
		) {
			return parts as [string, string, string];
		}
	} catch {
		// fall through
	}
	throw new LedgerError('The page cursor is not one this ledger made', 'Leave the cursor empty to start from the first page.');
}
