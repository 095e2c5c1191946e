import { randomBytes } from 'crypto';
import { Pool } from 'pg';

import { PostgresLedger } from '../../lib/ledger';

export const databaseUrl = () => {
	const url = process.env.DATABASE_URL;
	if (!url) throw new Error('DATABASE_URL is not set: run the suite through jest (globalSetup finds PostgreSQL)');
	return url;
};

/** Connection settings of DATABASE_URL, in the shape of the ledger credential. */
export function settingsFromUrl(table: string, schema = 'public') {
	const u = new URL(databaseUrl());
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

export const uniqueTable = (prefix = 't') => `${prefix}_${randomBytes(5).toString('hex')}`;

export function newPool(max = 10) {
	return new Pool({ connectionString: databaseUrl(), max });
}

/** A ledger on its own fresh table, and a cleanup that drops it. */
export async function freshPostgresLedger(table = uniqueTable()) {
	const pool = newPool();
	const ledger = new PostgresLedger({ pool, table });
	await ledger.ensureSchema();
	return {
		ledger,
		pool,
		table,
		async dispose() {
			for (const suffix of ['', '_counters', '_checkpoints', '_audit', '_migrations']) {
				await pool.query(`DROP TABLE IF EXISTS "public"."${table}${suffix}"`);
			}
			await pool.end();
		},
	};
}
