/**
 * The PostgreSQL side of a ledger copy (see ../transfer.ts for the neutral format and the merge
 * rule). Export pages through each table in primary-key order; import is one statement per kind
 * and batch, an upsert whose conflict rule re-checks the merge rule on the row as it is then.
 */
import type { QueryResultRow } from 'pg';

import { resultFromStored, resultToJson } from '../resultJson';
import {
	assertTransferBatch,
	decodeTransferCursor,
	emptyCounts,
	encodeTransferCursor,
	transferRankSql,
	type ExportBatch,
	type ImportCounts,
	type TransferAudit,
	type TransferCheckpoint,
	type TransferDay,
	type TransferRow,
	isTableCursor as isCursor,
	type TableCursor as Cursor,
	type TablePhase as Phase,
	TABLE_PHASES as PHASES,
} from '../transfer';
import { COUNTS_KEPT_DAYS, type Status } from '../types';
import { KEEP_UNTIL_RESOLVED, type TableNames } from './schema';

type Query = <R extends QueryResultRow = QueryResultRow>(text: string, values?: unknown[]) => Promise<R[]>;


const epochMs = (column: string) => `(extract(epoch FROM ${column}) * 1000)::float8`;
const TODAY = `(now() AT TIME ZONE 'UTC')::date`;
const num = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

function nextCursor(phase: Phase, got: number, limit: number, last: string[] | null): string | null {
	if (got >= limit && last) return encodeTransferCursor({ p: phase, a: last });
	const following = PHASES[PHASES.indexOf(phase) + 1];
	return following ? encodeTransferCursor({ p: following, a: null }) : null;
}

export async function exportPostgres(query: Query, t: TableNames, cursorText: string | null, limit: number): Promise<ExportBatch> {
	const cursor: Cursor = cursorText === null ? { p: 'rows', a: null } : decodeTransferCursor(cursorText, isCursor);
	const batch: ExportBatch = { rows: [], checkpoints: [], days: [], audit: [], next: null };
	const a = cursor.a;
	if (cursor.p === 'rows') {
		const rows = await query(
			`SELECT namespace, key, step, status, phase, previous_status, previous_phase, fence, fingerprint, version, external_id,
				result, attempts, lease_holder,
				(CASE WHEN lease_expires_at IS NULL THEN NULL ELSE greatest(0, extract(epoch FROM lease_expires_at - now()) * 1000) END)::float8 AS lease_ms,
				(CASE WHEN expires_at >= ${KEEP_UNTIL_RESOLVED} THEN NULL ELSE extract(epoch FROM expires_at - now()) * 1000 END)::float8 AS expires_ms,
				${epochMs('first_seen_at')} AS fs, ${epochMs('updated_at')} AS u
			 FROM ${t.ledger}
			 WHERE expires_at > now() AND ($1::text IS NULL OR (namespace, key, step) > ($1::text, $2::text, $3::text))
			 ORDER BY namespace, key, step LIMIT $4`,
			[a?.[0] ?? null, a?.[1] ?? null, a?.[2] ?? null, limit],
		);
		batch.rows = rows.map(
			(r): TransferRow => ({
				namespace: r.namespace,
				key: r.key,
				step: r.step,
				status: r.status as Status,
				phase: r.phase ?? null,
				previousStatus: (r.previous_status ?? null) as Status | null,
				previousPhase: r.previous_phase ?? null,
				fence: num(r.fence),
				fingerprint: r.fingerprint ?? null,
				version: r.version ?? null,
				externalId: r.external_id ?? null,
				result: resultFromStored(r.result ?? null),
				attempts: r.attempts,
				leaseHolder: r.lease_holder ?? null,
				leaseRemainingMs: r.lease_ms ?? null,
				expiresInMs: r.expires_ms ?? null,
				firstSeenAt: r.fs,
				updatedAt: r.u,
			}),
		);
		const last = rows[rows.length - 1];
		batch.next = nextCursor('rows', rows.length, limit, last ? [last.namespace, last.key, last.step] : null);
	} else if (cursor.p === 'cp') {
		const rows = await query(
			`SELECT namespace, name, value, ${epochMs('updated_at')} AS u, updated_by FROM ${t.checkpoints}
			 WHERE $1::text IS NULL OR (namespace, name) > ($1::text, $2::text)
			 ORDER BY namespace, name LIMIT $3`,
			[a?.[0] ?? null, a?.[1] ?? null, limit],
		);
		batch.checkpoints = rows.map(
			(r): TransferCheckpoint => ({ namespace: r.namespace, name: r.name, value: r.value, updatedAt: r.u, updatedBy: r.updated_by ?? null }),
		);
		const last = rows[rows.length - 1];
		batch.next = nextCursor('cp', rows.length, limit, last ? [last.namespace, last.name] : null);
	} else if (cursor.p === 'days') {
		const rows = await query<{ namespace: string; day: string; counts: Record<string, number> }>(
			`SELECT namespace, to_char(day, 'YYYY-MM-DD') AS day, counts FROM ${t.daily}
			 WHERE $1::text IS NULL OR (namespace, day) > ($1::text, $2::date)
			 ORDER BY namespace, day LIMIT $3`,
			[a?.[0] ?? null, a?.[1] ?? null, limit],
		);
		batch.days = rows.map((r): TransferDay => ({ namespace: r.namespace, day: r.day, counts: r.counts }));
		const last = rows[rows.length - 1];
		batch.next = nextCursor('days', rows.length, limit, last ? [last.namespace, last.day] : null);
	} else {
		const rows = await query(
			`SELECT id::text AS id, namespace, key, step, action, actor, ${epochMs('at')} AS at, detail FROM ${t.audit}
			 WHERE $1::bigint IS NULL OR id > $1::bigint ORDER BY id LIMIT $2`,
			[a?.[0] ?? null, limit],
		);
		batch.audit = rows.map(
			(r): TransferAudit => ({
				namespace: r.namespace,
				key: r.key,
				step: r.step ?? null,
				action: r.action,
				actor: r.actor ?? null,
				at: r.at,
				detail: Object.fromEntries(Object.entries((r.detail ?? {}) as Record<string, unknown>).filter(([, v]) => v !== null)),
			}),
		);
		const last = rows[rows.length - 1];
		batch.next = nextCursor('audit', rows.length, limit, last ? [last.id] : null);
	}
	return batch;
}

/**
 * $1 a JSON array of rows (see importPostgres). The verdict of each row comes from the statement's
 * snapshot; the upsert re-checks the rule under the row lock, so a row that changed meanwhile is
 * never overwritten by a lower rank. Rows go in the global row order (COLLATE "C"), as every other
 * statement locks them. One fencing token for the whole batch, drawn only when a copied row had one.
 */
function importRowsSql(t: TableNames): string {
	const rank = (a: string) => transferRankSql(`${a}.status`, `${a}.phase`);
	return `
WITH input AS (
	SELECT * FROM json_to_recordset($1::json) AS i(ord int, ns text, k text, st text, status text, phase text, ps text, pp text,
		has_fence boolean, fp text, v text, x text, res text, a int, lh text, lease_ms float8, exp_ms float8, fs float8, u float8)
),
token AS (SELECT CASE WHEN EXISTS (SELECT 1 FROM input WHERE has_fence) THEN nextval('${t.fenceSequence}') END AS fence),
cur AS MATERIALIZED (
	SELECT i.ord, CASE WHEN l.namespace IS NULL OR l.expires_at <= now() THEN 'copied'
		WHEN ${rank('i')} > ${rank('l')} THEN 'replaced'
		WHEN ${rank('i')} = ${rank('l')} THEN 'present' ELSE 'older' END AS verdict
	FROM input i LEFT JOIN ${t.ledger} l ON l.namespace = i.ns AND l.key = i.k AND l.step = i.st
),
written AS (
	INSERT INTO ${t.ledger} AS l (namespace, key, step, status, lease_holder, lease_expires_at, fingerprint, version, external_id,
		result, attempts, previous_status, first_seen_at, updated_at, expires_at, phase, previous_phase, fence)
	SELECT i.ns, i.k, i.st, i.status, i.lh,
		CASE WHEN i.lease_ms IS NULL THEN NULL ELSE now() + i.lease_ms * interval '1 millisecond' END,
		i.fp, i.v, i.x, i.res::jsonb, i.a, i.ps, to_timestamp(i.fs / 1000.0), to_timestamp(i.u / 1000.0),
		CASE WHEN i.exp_ms IS NULL THEN ${KEEP_UNTIL_RESOLVED} ELSE now() + i.exp_ms * interval '1 millisecond' END,
		i.phase, i.pp, CASE WHEN i.has_fence THEN (SELECT fence FROM token) END
	FROM input i JOIN cur c ON c.ord = i.ord
	WHERE c.verdict IN ('copied', 'replaced')
	ORDER BY i.ns COLLATE "C", i.k COLLATE "C", i.st COLLATE "C"
	ON CONFLICT (namespace, key, step) DO UPDATE SET
		status = excluded.status, lease_holder = excluded.lease_holder, lease_expires_at = excluded.lease_expires_at,
		fingerprint = excluded.fingerprint, version = excluded.version, external_id = excluded.external_id,
		result = excluded.result, attempts = excluded.attempts, previous_status = excluded.previous_status,
		first_seen_at = excluded.first_seen_at, updated_at = excluded.updated_at, expires_at = excluded.expires_at,
		phase = excluded.phase, previous_phase = excluded.previous_phase, fence = excluded.fence
	WHERE l.expires_at <= now() OR ${rank('excluded')} > ${rank('l')}
	RETURNING l.namespace, l.key, l.step
)
SELECT c.verdict, count(*)::int AS n, count(w.step)::int AS written
FROM cur c JOIN input i ON i.ord = c.ord
	LEFT JOIN written w ON w.namespace = i.ns AND w.key = i.k AND w.step = i.st
GROUP BY c.verdict`;
}

function importCheckpointsSql(t: TableNames, isNewer: (a: string, b: string) => string): string {
	return `
WITH input AS (
	SELECT * FROM json_to_recordset($1::json) AS i(ns text, name text, value text, u float8, by text)
),
written AS (
	INSERT INTO ${t.checkpoints} AS cp (namespace, name, value, updated_at, updated_by)
	SELECT ns, name, value, to_timestamp(u / 1000.0), by FROM input ORDER BY ns, name
	ON CONFLICT (namespace, name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at, updated_by = excluded.updated_by
	WHERE ${isNewer('excluded.value', 'cp.value')}
	RETURNING 1
)
SELECT (SELECT count(*) FROM written)::int AS written`;
}

/** Each counter of a day both hold becomes the larger value; days older than the ledger keeps are left out. */
function importDaysSql(t: TableNames): string {
	return `
WITH input AS (
	SELECT i.ns, i.day::date AS day, i.counts::jsonb AS counts FROM json_to_recordset($1::json) AS i(ns text, day text, counts json)
),
written AS (
	INSERT INTO ${t.daily} AS d (namespace, day, counts)
	SELECT ns, day, counts FROM input WHERE day >= ${TODAY} - ${COUNTS_KEPT_DAYS} ORDER BY ns COLLATE "C", day
	ON CONFLICT (namespace, day) DO UPDATE SET
		counts = (
			SELECT jsonb_object_agg(k, greatest((d.counts ->> k)::numeric, (excluded.counts ->> k)::numeric))
			FROM (SELECT jsonb_object_keys(d.counts) UNION SELECT jsonb_object_keys(excluded.counts)) AS keys (k)
		),
		updated_at = now()
	WHERE EXISTS (
		SELECT 1 FROM jsonb_each_text(excluded.counts) e
		WHERE (d.counts ->> e.key) IS NULL OR e.value::numeric > (d.counts ->> e.key)::numeric
	)
	RETURNING 1
)
SELECT (SELECT count(*) FROM written)::int AS written`;
}

/** An entry is the same as one the target has when namespace, key, step, action, actor and time (to the ms) agree. */
function importAuditSql(t: TableNames): string {
	return `
WITH input AS (
	SELECT * FROM json_to_recordset($1::json) AS i(ns text, k text, st text, action text, actor text, at float8, detail jsonb)
),
written AS (
	INSERT INTO ${t.audit} (namespace, key, step, action, actor, at, detail)
	SELECT ns, k, st, action, actor, to_timestamp(at / 1000.0), detail FROM input i
	WHERE NOT EXISTS (
		SELECT 1 FROM ${t.audit} a
		WHERE a.namespace = i.ns AND a.key = i.k AND a.step IS NOT DISTINCT FROM i.st AND a.action = i.action
			AND a.actor IS NOT DISTINCT FROM i.actor AND round(extract(epoch FROM a.at) * 1000) = round(i.at::numeric)
	)
	ORDER BY at
	RETURNING 1
)
SELECT (SELECT count(*) FROM written)::int AS written`;
}

export interface PostgresImportSql {
	rows: string;
	checkpoints: string;
	days: string;
	audit: string;
}

export function postgresImportSql(t: TableNames, isNewer: (a: string, b: string) => string): PostgresImportSql {
	return { rows: importRowsSql(t), checkpoints: importCheckpointsSql(t, isNewer), days: importDaysSql(t), audit: importAuditSql(t) };
}

/** Last entry per row id wins (an export never repeats one within a page; this keeps the upsert safe). */
function distinctRows(rows: TransferRow[]): TransferRow[] {
	const byId = new Map<string, TransferRow>();
	for (const r of rows) byId.set(`${r.namespace}\u0000${r.key}\u0000${r.step}`, r);
	return [...byId.values()];
}

export async function importPostgres(query: Query, sql: PostgresImportSql, batch: Omit<ExportBatch, 'next'>): Promise<ImportCounts> {
	assertTransferBatch(batch);
	const counts = emptyCounts();
	const rows = distinctRows(batch.rows);
	if (rows.length > 0) {
		const input = rows.map((r, ord) => ({
			ord,
			ns: r.namespace,
			k: r.key,
			st: r.step,
			status: r.status,
			phase: r.phase,
			ps: r.previousStatus,
			pp: r.previousPhase,
			has_fence: r.fence !== null,
			fp: r.fingerprint,
			v: r.version,
			x: r.externalId,
			res: resultToJson(r.result ?? null),
			a: r.attempts,
			lh: r.leaseHolder,
			lease_ms: r.leaseRemainingMs,
			exp_ms: r.expiresInMs,
			fs: r.firstSeenAt,
			u: r.updatedAt,
		}));
		const verdicts = await query<{ verdict: string; n: number; written: number }>(sql.rows, [JSON.stringify(input)]);
		for (const v of verdicts) {
			if (v.verdict === 'copied') counts.rowsCopied += v.written;
			else if (v.verdict === 'replaced') counts.rowsReplaced += v.written;
			else if (v.verdict === 'older') counts.rowsSkippedOlder += v.n;
			// A row that changed between the snapshot and its lock (a rare race) is kept: present.
			counts.rowsAlreadyPresent += v.verdict === 'present' ? v.n : v.verdict === 'older' ? 0 : v.n - v.written;
		}
	}
	if (batch.checkpoints.length > 0) {
		const input = batch.checkpoints.map((c) => ({ ns: c.namespace, name: c.name, value: c.value, u: c.updatedAt, by: c.updatedBy }));
		const [{ written }] = await query<{ written: number }>(sql.checkpoints, [JSON.stringify(input)]);
		counts.checkpointsCopied += written;
		counts.checkpointsKept += batch.checkpoints.length - written;
	}
	if (batch.days.length > 0) {
		const input = batch.days.map((d) => ({ ns: d.namespace, day: d.day, counts: d.counts }));
		const [{ written }] = await query<{ written: number }>(sql.days, [JSON.stringify(input)]);
		counts.counterDaysCopied += written;
		counts.counterDaysKept += batch.days.length - written;
	}
	if (batch.audit.length > 0) {
		const input = batch.audit.map((e) => ({ ns: e.namespace, k: e.key, st: e.step, action: e.action, actor: e.actor, at: e.at, detail: e.detail }));
		const [{ written }] = await query<{ written: number }>(sql.audit, [JSON.stringify(input)]);
		counts.auditCopied += written;
		counts.auditAlreadyPresent += batch.audit.length - written;
	}
	return counts;
}
