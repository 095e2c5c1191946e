/**
 * The Redis side of a ledger copy: the conversions between stored rows and the neutral format
 * (see ../transfer.ts), the export cursor, and the key names a scan finds. The calls themselves are
 * in RedisLedger (exportBatch, importBatch).
 */
import type { TransferAudit, TransferRow } from '../transfer';
import type { Status } from '../types';
import type { StoredRow } from './scripts';

/** Expiry of a row kept until resolved (see scripts.ts ROWS). */
export const KEEP_MS = 253402214400000;

/**
 * Where an export is. `rows`: the namespace registry, then each namespace's updated_at index
 * (`ns` the namespace being read, null before the first; `s`/`m` the last index entry read).
 * `scan`: the keyspace of each master in turn for checkpoints, day counters and audit streams
 * (`n` the node, `c` its SCAN cursor, `d` its scan is complete, `q` audit streams found and not yet read, `id` the last
 * entry read of q[0]).
 */
export type RedisExportCursor =
	| { p: 'rows'; ns: string | null; s: string; m: string }
	| { p: 'scan'; n: number; c: string; d: boolean; q: string[]; id: string };

export function isRedisExportCursor(v: unknown): v is RedisExportCursor {
	if (typeof v !== 'object' || v === null) return false;
	const c = v as Record<string, unknown>;
	if (c.p === 'rows') return (c.ns === null || typeof c.ns === 'string') && typeof c.s === 'string' && typeof c.m === 'string';
	return (
		c.p === 'scan' &&
		Number.isSafeInteger(c.n) &&
		typeof c.c === 'string' &&
		typeof c.d === 'boolean' &&
		Array.isArray(c.q) &&
		c.q.every((k) => typeof k === 'string') &&
		typeof c.id === 'string'
	);
}

const unesc = (s: string) => s.replace(/%([0-9A-F]{2})/g, (_, h: string) => String.fromCharCode(parseInt(h, 16)));

/** The glob that finds, under `prefix`, every checkpoint (`cp:`), day (`d:`) and audit stream key, and only those. */
export const scanPattern = (prefix: string) => `{${prefix}:*}:[acd]*`;

/** What a scanned key is: a checkpoint, a day of counters or an audit stream of a namespace; null for anything else. */
export function parseScannedKey(
	prefix: string,
	key: string,
): { kind: 'cp'; namespace: string; name: string } | { kind: 'd'; namespace: string; day: string } | { kind: 'audit'; namespace: string } | null {
	const start = `{${prefix}:`;
	if (!key.startsWith(start)) return null;
	const close = key.indexOf('}:', start.length);
	if (close < 0) return null;
	const namespace = unesc(key.slice(start.length, close));
	const rest = key.slice(close + 2);
	if (rest.startsWith('cp:')) return { kind: 'cp', namespace, name: unesc(rest.slice(3)) };
	if (/^d:\d{4}-\d{2}-\d{2}$/.test(rest)) return { kind: 'd', namespace, day: rest.slice(2) };
	if (rest === 'audit') return { kind: 'audit', namespace };
	return null;
}

/** A stored row as the neutral format, its times turned into durations by the script's `now`. */
export function storedToTransfer(namespace: string, text: string, now: number): TransferRow {
	const r = JSON.parse(text) as StoredRow;
	return {
		namespace,
		key: r.k,
		step: r.s,
		status: r.st as Status,
		phase: r.ph ?? null,
		previousStatus: (r.ps ?? null) as Status | null,
		previousPhase: r.pp ?? null,
		fence: r.g ?? null,
		fingerprint: r.fp ?? null,
		version: r.v ?? null,
		externalId: r.x ?? null,
		result: r.res === undefined || r.res === null ? null : JSON.parse(r.res),
		attempts: r.a,
		leaseHolder: r.lh ?? null,
		leaseRemainingMs: r.le === undefined || r.le === null ? null : Math.max(0, r.le - now),
		expiresInMs: r.e >= KEEP_MS ? null : Math.max(1, r.e - now),
		firstSeenAt: r.fs,
		updatedAt: r.u,
	};
}

/**
 * A neutral row as the import script reads it (see scripts.ts IMPORT_ROWS): the stored field
 * names, absent fields left out, durations rounded up to whole milliseconds (never shorter).
 */
export function transferToImport(r: TransferRow): string {
	const row: Record<string, unknown> = { k: r.key, s: r.step, st: r.status, a: r.attempts, fs: Math.round(r.firstSeenAt), u: Math.round(r.updatedAt) };
	const put = (field: string, value: unknown) => {
		if (value !== null && value !== undefined) row[field] = value;
	};
	put('ph', r.phase);
	put('ps', r.previousStatus);
	put('pp', r.previousPhase);
	put('g', r.fence);
	put('fp', r.fingerprint);
	put('v', r.version);
	put('x', r.externalId);
	put('res', r.result === null || r.result === undefined ? null : JSON.stringify(r.result));
	put('lh', r.leaseHolder);
	put('lm', r.leaseRemainingMs === null ? null : Math.ceil(r.leaseRemainingMs));
	put('em', r.expiresInMs === null ? null : Math.max(1, Math.ceil(r.expiresInMs)));
	return JSON.stringify(row);
}

/** An audit stream entry (flat field list) as the neutral format. */
export function streamToAudit(namespace: string, flat: string[]): TransferAudit {
	const f: Record<string, string> = {};
	for (let i = 0; i < flat.length; i += 2) f[flat[i]] = flat[i + 1];
	const detail: Record<string, unknown> = {};
	if (f.status !== undefined) detail.status = f.status;
	if (f.phase !== undefined) detail.phase = f.phase;
	if (f.leaseHolder !== undefined) detail.leaseHolder = f.leaseHolder;
	if (f.fence !== undefined) detail.fence = Number(f.fence);
	if (f.resolution !== undefined) detail.resolution = f.resolution;
	return { namespace, key: f.key, step: f.step ?? null, action: f.action, actor: f.actor ?? null, at: Number(f.at), detail };
}

/** A neutral audit entry as the stream fields the release script writes. */
export function auditToStream(e: TransferAudit): string[] {
	const flat = ['action', e.action, 'key', e.key];
	if (e.step !== null) flat.push('step', e.step);
	const d = e.detail;
	for (const name of ['status', 'phase', 'leaseHolder', 'fence', 'resolution']) {
		if (d[name] !== null && d[name] !== undefined) flat.push(name, String(d[name]));
	}
	if (e.actor !== null) flat.push('actor', e.actor);
	flat.push('at', String(Math.round(e.at)));
	return flat;
}

/** The stream id just after `id` (XRANGE's exclusive start needs Redis 6.2; this works on 5). */
export function streamIdAfter(id: string): string {
	const [ms, seq] = id.split('-');
	return `${ms}-${(BigInt(seq ?? '0') + 1n).toString()}`;
}

/** When a day's counter hash expires: the start of the day COUNTS_KEPT_DAYS + 1 days on, in epoch seconds (as ADD_COUNTS sets it). */
export function dayExpiry(day: string, keptDays: number): number {
	const number = Math.floor(Date.parse(`${day}T00:00:00Z`) / 86_400_000);
	return (number + keptDays + 1) * 86_400;
}
