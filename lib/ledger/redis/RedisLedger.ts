import type { ChainableCommander, Cluster, Redis } from 'ioredis';

import { classifyExisting, idKey, resolveBatch } from '../claims';
import { CheckpointRegressionError, LedgerError } from '../errors';
import type {
	Checkpoint,
	ClaimOptions,
	ClaimOutcome,
	ClaimRequest,
	Ledger,
	LedgerRecord,
	ListFilter,
	ListPage,
	NamespaceStats,
	RecordOptions,
	RecordRequest,
	RowId,
	Status,
} from '../types';
import { STATUSES } from '../types';
import { toUnavailable } from './errors';
import { LAYOUT_VERSION, assertPrefix, member, namespaceKeys, registryKey, versionKey } from './keys';
import { SCRIPTS, type ScriptName, type StoredRow } from './scripts';

export interface RedisLedgerOptions {
	client: Redis | Cluster;
	/** Start of every key name; letters, digits, dots, dashes, underscores. Default `idem`. */
	prefix?: string;
	/** Keys per script call (each call is atomic; all calls of one claim go out in one pipeline). */
	chunkSize?: number;
}

const DEFAULT_CHUNK = 1000;
const MAX_CHUNK = 5000;
/** Index entries one list call examines at most, so that no call blocks Redis for long. */
const LIST_BUDGET = 2000;
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
const date = (v: number | null | undefined) => (v === null || v === undefined ? null : new Date(v));

/** A row as the scripts return it: its JSON text. */
function toRecord(namespace: string, text: unknown): LedgerRecord {
	const r = JSON.parse(String(text)) as StoredRow;
	return {
		namespace,
		key: r.k,
		step: r.s,
		status: r.st as Status,
		leaseHolder: r.lh ?? null,
		leaseExpiresAt: date(r.le),
		fingerprint: r.fp ?? null,
		version: r.v ?? null,
		externalId: r.x ?? null,
		result: r.res === undefined || r.res === null ? null : JSON.parse(r.res),
		attempts: r.a,
		previousStatus: (r.ps ?? null) as Status | null,
		firstSeenAt: new Date(r.fs),
		updatedAt: new Date(r.u),
		expiresAt: new Date(r.e),
		phase: r.ph ?? null,
	};
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
export class RedisLedger implements Ledger {
	readonly prefix: string;
	private readonly client: Redis;
	private readonly isCluster: boolean;
	private readonly chunkSize: number;
	private readonly registry: string;
	private ready: Promise<void> | null = null;
	private trips = 0;
	private lastConnectionError: unknown = null;

	constructor(options: RedisLedgerOptions) {
		// Redis and Cluster share the command API; one type keeps the calls simple.
		this.client = options.client as Redis;
		this.isCluster = (options.client as Cluster).isCluster === true;
		this.prefix = assertPrefix(options.prefix ?? 'idem');
		this.registry = registryKey(this.prefix);
		this.chunkSize = Math.min(MAX_CHUNK, Math.max(1, Math.floor(options.chunkSize ?? DEFAULT_CHUNK)));
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
			throw toUnavailable(error, this.lastConnectionError);
		}
	}

	/** One pipeline (one round trip). In cluster mode every key in it must share one slot. */
	private async pipeline(build: (p: ChainableCommander) => void): Promise<unknown[]> {
		const p = this.client.pipeline();
		build(p);
		const replies = (await this.send(() => p.exec())) ?? [];
		return replies.map(([error, value]) => {
			if (error) throw toUnavailable(error, this.lastConnectionError);
			return value;
		});
	}

	/**
	 * Runs script calls, then registers `namespaces` as holding rows. Standalone: everything in one
	 * pipeline. Cluster: one pipeline per namespace, in parallel, then the registry.
	 * The registry write always follows the row writes (purgeExpired relies on that order).
	 */
	private async run(calls: Call[], namespaces: string[] = []): Promise<unknown[]> {
		if (calls.length === 0) return [];
		const script = (p: ChainableCommander, c: Call) =>
			(p as unknown as Record<string, (args: unknown[]) => void>)[c.name]([c.keys.length, ...c.keys, ...c.args]);
		const register = (p: ChainableCommander) => {
			if (namespaces.length > 0) p.zadd(this.registry, 'NX', ...namespaces.flatMap((ns) => [0, ns]));
		};
		if (!this.isCluster) {
			const replies = await this.pipeline((p) => {
				for (const c of calls) script(p, c);
				register(p);
			});
			return replies.slice(0, calls.length);
		}
		const groups = new Map<string, number[]>();
		calls.forEach((c, i) => {
			const group = groups.get(c.namespace);
			if (group) group.push(i);
			else groups.set(c.namespace, [i]);
		});
		const replies = new Array<unknown>(calls.length);
		await Promise.all(
			[...groups.values()].map(async (indexes) => {
				const out = await this.pipeline((p) => indexes.forEach((i) => script(p, calls[i])));
				indexes.forEach((i, j) => (replies[i] = out[j]));
			}),
		);
		if (namespaces.length > 0) await this.pipeline(register);
		return replies;
	}

	/** Request indexes grouped by namespace, then cut into chunks. */
	private chunks(indexes: number[], namespaceOf: (i: number) => string): Array<{ namespace: string; indexes: number[] }> {
		const byNamespace = new Map<string, number[]>();
		for (const i of indexes) {
			const ns = namespaceOf(i);
			const list = byNamespace.get(ns);
			if (list) list.push(i);
			else byNamespace.set(ns, [i]);
		}
		const out: Array<{ namespace: string; indexes: number[] }> = [];
		for (const [namespace, list] of byNamespace) {
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
		const ttlMs = Math.max(0, Math.round(options.ttlMs));
		const calls = chunks.map(({ namespace, indexes }): Call => {
			const k = namespaceKeys(this.prefix, namespace);
			const members = indexes.map((i) => member(requests[i].key, requests[i].step));
			const args: Array<string | number> = [options.mode, String(options.holder ?? ''), leaseMs, ttlMs, options.reclaimOwnLease ? '1' : '', indexes.length];
			indexes.forEach((i, j) => {
				const r = requests[i];
				args.push(members[j], r.key, r.step, opt(r.fingerprint), opt(r.version));
			});
			const keys = [...k.fixed, ...members.map(k.row), ...indexes.map((i) => k.steps(requests[i].key))];
			return { name: 'idemLedgerClaim', namespace, keys, args };
		});
		const replies = await this.run(calls, [...new Set(chunks.map((c) => c.namespace))]);
		replies.forEach((reply, c) => {
			const { namespace, indexes } = chunks[c];
			const flat = reply as Array<number | string | null>;
			indexes.forEach((index, j) => {
				const [claimed, text, previousPhase] = flat.slice(j * 3, j * 3 + 3);
				const record = toRecord(namespace, text);
				outcomes[index] =
					claimed === 1
						? { kind: 'claimed', record, previousStatus: record.previousStatus, previousPhase: (previousPhase as string | null) ?? null }
						: classifyExisting(record, requests[index], options.mode);
			});
		});
		return outcomes as ClaimOutcome[];
	}

	async record(requests: RecordRequest[], options: RecordOptions): Promise<Array<LedgerRecord | null>> {
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
			const args: Array<string | number> = [opt(options.holder), ttlMs, indexes.length];
			indexes.forEach((i, j) => {
				const r = requests[i];
				const externalId = r.externalId === undefined || r.externalId === null ? null : String(r.externalId);
				const result = r.result === undefined ? null : JSON.stringify(r.result);
				args.push(members[j], r.key, r.step, r.status, opt(r.fingerprint), opt(externalId), opt(result));
			});
			const keys = [...k.fixed, ...members.map(k.row), ...indexes.map((i) => k.steps(requests[i].key))];
			return { name: 'idemLedgerRecord', namespace, keys, args };
		});
		const replies = await this.run(calls, [...new Set(chunks.map((c) => c.namespace))]);
		const written = new Map<string, LedgerRecord>();
		replies.forEach((reply, c) => {
			(reply as Array<string | null>).forEach((text) => {
				if (!text) return;
				const record = toRecord(chunks[c].namespace, text);
				written.set(idKey(record.namespace, record.key, record.step), record);
			});
		});
		return requests.map((r) => written.get(idKey(r.namespace, r.key, r.step)) ?? null);
	}

	async markPhase(rows: RowId[], holder: string, phase: string): Promise<boolean[]> {
		if (rows.length === 0) return [];
		await this.ensureSchema();
		const chunks = this.chunks(
			rows.map((_, i) => i),
			(i) => rows[i].namespace,
		);
		const calls = chunks.map(({ namespace, indexes }): Call => {
			const k = namespaceKeys(this.prefix, namespace);
			const members = indexes.map((i) => member(rows[i].key, rows[i].step));
			return { name: 'idemLedgerMarkPhase', namespace, keys: [...k.fixed, ...members.map(k.row)], args: [holder, phase, indexes.length, ...members] };
		});
		const replies = await this.run(calls);
		const marked = new Array<boolean>(rows.length).fill(false);
		replies.forEach((reply, c) => (reply as number[]).forEach((ok, j) => (marked[chunks[c].indexes[j]] = ok === 1)));
		return marked;
	}

	async get(namespace: string, key: string): Promise<LedgerRecord[]> {
		await this.ensureSchema();
		const k = namespaceKeys(this.prefix, namespace);
		const [rows] = await this.run([{ name: 'idemLedgerGet', namespace, keys: [...k.fixed, k.steps(key)], args: [k.base] }]);
		return (rows as string[])
			.map((text) => toRecord(namespace, text))
			.sort((a, b) => Buffer.compare(Buffer.from(a.step), Buffer.from(b.step)));
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
			let after = cursor && cursor[0] === namespace ? [cursor[1], cursor[2]] : ['', ''];
			for (;;) {
				const [reply] = await this.run([
					{
						name: 'idemLedgerList',
						namespace,
						keys: k.fixed,
						args: [
							k.base,
							after[0],
							after[1],
							filter.updatedBefore ? String(filter.updatedBefore.getTime()) : '',
							filter.status ?? '',
							filter.stuckOnly === true ? '1' : '0',
							want - found.length,
							LIST_BUDGET,
						],
					},
				]);
				const [done, lastScore, lastMember, rows] = reply as [number, string, string, string[]];
				for (const text of rows) found.push(toRecord(namespace, text));
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

	async release(namespace: string, key: string, step: string | null, releasedBy: string): Promise<number> {
		await this.ensureSchema();
		const k = namespaceKeys(this.prefix, namespace);
		const [n] = await this.run([
			{
				name: 'idemLedgerRelease',
				namespace,
				keys: [...k.fixed, k.steps(key), k.audit],
				args: [k.base, step === null ? '' : member(key, step), releasedBy, AUDIT_MAX],
			},
		]);
		return Number(n);
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
			const [reply] = await this.run([{ name: 'idemLedgerPurge', namespace, keys: k.fixed, args: [k.base, limit - purged] }]);
			const [n, left] = reply as [number, number];
			purged += n;
			if (left === 0) await this.forgetNamespace(namespace, k.fixed[0]);
			if (purged >= limit) break;
		}
		return purged;
	}

	/**
	 * Drops an empty namespace from the registry. A concurrent claim writes its rows before it
	 * registers the namespace, so re-checking the index after the removal cannot lose one.
	 */
	private async forgetNamespace(namespace: string, idx: string): Promise<void> {
		await this.send(() => this.client.zrem(this.registry, namespace));
		if ((await this.send(() => this.client.zcard(idx))) > 0) {
			await this.send(() => this.client.zadd(this.registry, 'NX', 0, namespace));
		}
	}

	async stats(namespace: string): Promise<NamespaceStats> {
		await this.ensureSchema();
		const k = namespaceKeys(this.prefix, namespace);
		const [reply] = await this.run([{ name: 'idemLedgerStats', namespace, keys: k.fixed, args: [k.base] }]);
		const out = reply as Array<number | string | null>;
		const byStatus = Object.fromEntries(STATUSES.map((s, i) => [s, Number(out[i])])) as Record<Status, number>;
		return {
			namespace,
			byStatus,
			duplicatesBlocked: Number(out[4] ?? 0),
			oldestInProgressAt: out[6] === null ? null : new Date(Number(out[6])),
			stuck: Number(out[5]),
		};
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
