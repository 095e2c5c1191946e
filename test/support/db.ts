import { randomBytes } from 'crypto';
import { Pool } from 'pg';

import { PostgresLedger } from '../../lib/ledger';
import { dropLedgerSql } from '../../lib/ledger/postgres/schema';
import { describeIfAvailable } from './redis';

export const databaseUrl = () => {
	const url = process.env.DATABASE_URL;
	if (!url) throw new Error('DATABASE_URL is not set: run the suite through jest (globalSetup finds PostgreSQL)');
	return url;
};

/** Connection settings of DATABASE_URL, in the shape of the ledger credential. */
export function settingsFromUrl(table: string, schema = 'public', url = databaseUrl()) {
	const u = new URL(url);
	return {
		host: u.hostname,
		port: Number(u.port || 5432),
		database: u.pathname.slice(1),
		user: decodeURIComponent(u.username),
		password: decodeURIComponent(u.password),
		ssl: 'disable' as const,
		schema,
		table,
		poolSize: 10,
	};
}

/**
 * The suite's PostgreSQL through PgBouncer in transaction mode (globalSetup starts it), for
 * `describeIfPgBouncer` suites only.
 */
export const bouncerUrl = () => {
	const url = process.env.PGBOUNCER_URL;
	if (!url) throw new Error(`PgBouncer is not running: ${process.env.PGBOUNCER_MISSING ?? 'run the suite through jest (globalSetup starts it)'}`);
	return url;
};

/** `describe` when globalSetup started PgBouncer (see describeIfAvailable). */
export const describeIfPgBouncer = (what: string): jest.Describe =>
	describeIfAvailable(what, 'PgBouncer', process.env.PGBOUNCER_URL ? null : (process.env.PGBOUNCER_MISSING ?? 'PgBouncer did not start'));

export const uniqueTable = (prefix = 't') => `${prefix}_${randomBytes(5).toString('hex')}`;

export function newPool(max = 10, connectionString = databaseUrl()) {
	return new Pool({ connectionString, max });
}

/** Drops a ledger whole: its tables and functions (dropLedgerSql). */
export async function dropLedgerTables(pool: Pool, table: string, schema = 'public'): Promise<void> {
	for (const sql of dropLedgerSql(schema, table)) await pool.query(sql);
}

/** A ledger on its own fresh table (through `connectionString`, the suite's database by default), and a cleanup that drops it. */
export async function freshPostgresLedger(table = uniqueTable(), connectionString = databaseUrl()) {
	const pool = newPool(10, connectionString);
	const ledger = new PostgresLedger({ pool, table });
	await ledger.ensureSchema();
	return {
		ledger,
		pool,
		table,
		/** Another ledger on the same table with a connection of its own, as a second n8n process has; close it. */
		async another() {
			return new PostgresLedger({ pool: newPool(1, connectionString), table });
		},
		/** Today, the UTC day by the server's clock. */
		async ledgerToday() {
			const { rows } = await pool.query(`SELECT to_char((now() AT TIME ZONE 'UTC')::date, 'YYYY-MM-DD') AS day`);
			return rows[0].day as string;
		},
		/** A namespace's counters of a past day, written straight into the table. */
		async putPastCounts(namespace: string, daysAgo: number, counts: Record<string, number>) {
			await pool.query(
				`INSERT INTO "public"."${table}_daily" (namespace, day, counts) VALUES ($1, (now() AT TIME ZONE 'UTC')::date - $2::integer, $3)`,
				[namespace, daysAgo, JSON.stringify(counts)],
			);
		},
		/** Deletes one row straight from the table, as a store that loses data would. */
		async vanish(namespace: string, key: string, step: string) {
			await pool.query(`DELETE FROM "public"."${table}" WHERE namespace = $1 AND key = $2 AND step = $3`, [namespace, key, step]);
		},
		/** A namespace's audit rows, oldest first, in the contract's shape. */
		async audit(namespace: string) {
			const { rows } = await pool.query(`SELECT key, step, action, actor, detail FROM "public"."${table}_audit" WHERE namespace = $1 ORDER BY id`, [namespace]);
			return rows.map((r) => ({
				key: r.key as string,
				step: r.step as string,
				action: r.action as string,
				actor: r.actor as string | null,
				status: r.detail.status as string,
				leaseHolder: (r.detail.leaseHolder ?? null) as string | null,
				fence: r.detail.fence === null || r.detail.fence === undefined ? null : Number(r.detail.fence),
			}));
		},
		async dispose() {
			await dropLedgerTables(pool, table);
			await pool.end();
		},
	};
}
