/**
 * The Built-in side of a ledger copy (see ../transfer.ts for the neutral format): an export that
 * pages through each table in primary-key order (byte order, SQLite's BINARY collation), the
 * rows live by the ledger's own clock, durations measured by that clock at the moment of the page.
 */
import { resultFromStored } from '../resultJson';
import {
	decodeTransferCursor,
	encodeTransferCursor,
	type ExportBatch,
	type TransferAudit,
	type TransferCheckpoint,
	type TransferDay,
	type TransferRow,
	isTableCursor as isCursor,
	type TableCursor as Cursor,
	type TablePhase as Phase,
	TABLE_PHASES as PHASES,
} from '../transfer';
import type { Status } from '../types';
import type { SqlRow, SqlValue, Statement } from './driver';
import { KEEP_UNTIL_RESOLVED } from './schema';


const text = (v: SqlValue | undefined): string | null => (v === null || v === undefined ? null : String(v));
const num = (v: SqlValue | undefined): number | null => (v === null || v === undefined ? null : Number(v));

function nextCursor(phase: Phase, got: number, limit: number, last: string[] | null): string | null {
	if (got >= limit && last) return encodeTransferCursor({ p: phase, a: last });
	const following = PHASES[PHASES.indexOf(phase) + 1];
	return following ? encodeTransferCursor({ p: following, a: null }) : null;
}

function toTransferRow(r: SqlRow, now: number): TransferRow {
	const leaseEnds = num(r.lease_expires_at);
	const expires = Number(r.expires_at);
	return {
		namespace: String(r.namespace),
		key: String(r.key),
		step: String(r.step),
		status: String(r.status) as Status,
		phase: text(r.phase),
		previousStatus: text(r.previous_status) as Status | null,
		previousPhase: text(r.previous_phase),
		fence: num(r.fence),
		fingerprint: text(r.fingerprint),
		version: text(r.version),
		externalId: text(r.external_id),
		result: r.result === null || r.result === undefined ? null : resultFromStored(JSON.parse(String(r.result))),
		attempts: Number(r.attempts),
		leaseHolder: text(r.lease_holder),
		leaseRemainingMs: leaseEnds === null ? null : Math.max(0, leaseEnds - now),
		expiresInMs: expires >= KEEP_UNTIL_RESOLVED ? null : expires - now,
		firstSeenAt: Number(r.first_seen_at),
		updatedAt: Number(r.updated_at),
	};
}

/** One page of the export; `stmt` prepares (and caches) a statement, `now` is the ledger's clock of this read. */
export function exportSqlite(stmt: (sql: string) => Statement, now: number, cursorText: string | null, limit: number): ExportBatch {
	const cursor: Cursor = cursorText === null ? { p: 'rows', a: null } : decodeTransferCursor(cursorText, isCursor);
	const batch: ExportBatch = { rows: [], checkpoints: [], days: [], audit: [], next: null };
	const a = cursor.a;
	if (cursor.p === 'rows') {
		const rows = stmt(
			`SELECT * FROM ledger WHERE expires_at > ?1 AND (?2 IS NULL OR (namespace, key, step) > (?2, ?3, ?4))
			 ORDER BY namespace, key, step LIMIT ?5`,
		).all(now, a?.[0] ?? null, a?.[1] ?? null, a?.[2] ?? null, limit);
		batch.rows = rows.map((r) => toTransferRow(r, now));
		const last = batch.rows[batch.rows.length - 1];
		batch.next = nextCursor('rows', rows.length, limit, last ? [last.namespace, last.key, last.step] : null);
	} else if (cursor.p === 'cp') {
		const rows = stmt(
			`SELECT * FROM checkpoints WHERE ?1 IS NULL OR (namespace, name) > (?1, ?2) ORDER BY namespace, name LIMIT ?3`,
		).all(a?.[0] ?? null, a?.[1] ?? null, limit);
		batch.checkpoints = rows.map(
			(r): TransferCheckpoint => ({
				namespace: String(r.namespace),
				name: String(r.name),
				value: String(r.value),
				updatedAt: Number(r.updated_at),
				updatedBy: text(r.updated_by),
			}),
		);
		const last = batch.checkpoints[batch.checkpoints.length - 1];
		batch.next = nextCursor('cp', rows.length, limit, last ? [last.namespace, last.name] : null);
	} else if (cursor.p === 'days') {
		// Every day the file holds; a target leaves out days older than it keeps.
		const rows = stmt(`SELECT * FROM daily WHERE ?1 IS NULL OR (namespace, day) > (?1, ?2) ORDER BY namespace, day LIMIT ?3`).all(
			a?.[0] ?? null,
			a?.[1] ?? null,
			limit,
		);
		batch.days = rows.map(
			(r): TransferDay => ({ namespace: String(r.namespace), day: String(r.day), counts: JSON.parse(String(r.counts)) as Record<string, number> }),
		);
		const last = batch.days[batch.days.length - 1];
		batch.next = nextCursor('days', rows.length, limit, last ? [last.namespace, last.day] : null);
	} else {
		const rows = stmt(`SELECT * FROM audit WHERE ?1 IS NULL OR id > ?1 ORDER BY id LIMIT ?2`).all(a ? Number(a[0]) : null, limit);
		batch.audit = rows.map(
			(r): TransferAudit => ({
				namespace: String(r.namespace),
				key: String(r.key),
				step: text(r.step),
				action: String(r.action),
				actor: text(r.actor),
				at: Number(r.at),
				detail: Object.fromEntries(
					Object.entries((r.detail === null ? {} : JSON.parse(String(r.detail))) as Record<string, unknown>).filter(([, v]) => v !== null && v !== undefined),
				),
			}),
		);
		const last = rows[rows.length - 1];
		batch.next = nextCursor('audit', rows.length, limit, last ? [String(last.id)] : null);
	}
	return batch;
}
