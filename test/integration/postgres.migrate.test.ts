import { execFile } from 'child_process';
import path from 'path';
import { promisify } from 'util';

import { migrations, tableNames } from '../../lib/ledger/postgres/schema';
import { newPool, uniqueTable } from '../support/db';

const run = promisify(execFile);
const CHILD = path.join(__dirname, 'fixtures', 'pg-migrate-child.js');

/**
 * Six processes start on an empty database at the same instant, each creating the ledger
 * schema (in a schema of its own name that does not exist yet). All must succeed, and every
 * migration must be recorded exactly once.
 */
test('the schema is created safely when several processes start at once', async () => {
	const pool = newPool(2);
	const schema = uniqueTable('s');
	const table = 'ledger';
	try {
		for (let round = 0; round < 3; round++) {
			await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
			const startAt = Date.now() + 1200;
			const results = await Promise.all(
				Array.from({ length: 6 }, () => run(process.execPath, [CHILD, schema, table, String(startAt)], { env: process.env })),
			);
			expect(results.map((r) => r.stdout)).toEqual(Array(6).fill('claimed'));
			const { rows } = await pool.query(`SELECT version FROM "${schema}"."${table}_migrations" ORDER BY version`);
			expect(rows.map((r) => r.version)).toEqual(rows.map((_, i) => i + 1));
			expect(rows.length).toBeGreaterThanOrEqual(2);
			const { rows: ledger } = await pool.query(`SELECT count(*)::int AS n FROM "${schema}"."${table}"`);
			expect(ledger[0].n).toBe(6);
			const { rows: daily } = await pool.query(`SELECT counts FROM "${schema}"."${table}_daily"`);
			expect(daily).toEqual([{ counts: { runs: 6 } }]);
		}
	} finally {
		await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
		await pool.end();
	}
}, 60_000);

/**
 * Six processes first use six different ledgers (tables) of one schema that does not exist yet,
 * at the same instant: the schema is created once, every ledger's migrations run, nobody fails.
 */
test('several ledgers of one new schema are created safely by processes starting at once', async () => {
	const pool = newPool(2);
	const schema = uniqueTable('s');
	try {
		for (let round = 0; round < 5; round++) {
			await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
			const startAt = Date.now() + 1200;
			const results = await Promise.allSettled(
				Array.from({ length: 6 }, (_, p) => run(process.execPath, [CHILD, schema, `ledger_${p}`, String(startAt)], { env: process.env })),
			);
			const failures = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => String(r.reason).slice(0, 300));
			expect(failures).toEqual([]);
			for (let p = 0; p < 6; p++) {
				const { rows } = await pool.query(`SELECT count(*)::int AS n FROM "${schema}"."ledger_${p}"`);
				expect(rows[0].n).toBe(1);
			}
		}
	} finally {
		await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
		await pool.end();
	}
}, 90_000);

/**
 * A ledger an earlier version of this package created (migrations 1 to 3, with rows in it) is
 * brought to the current schema by six processes starting at once: each later migration runs
 * once, the rows stay, and the new daily counters work.
 */
test('an older ledger (migrations 1 to 3) is migrated once by processes starting at once, its rows kept', async () => {
	const pool = newPool(2);
	const schema = uniqueTable('s');
	const table = 'ledger';
	const t = tableNames(schema, table);
	const current = migrations(t, table).length;
	expect(current).toBeGreaterThanOrEqual(4);
	try {
		const client = await pool.connect();
		try {
			await client.query('BEGIN');
			await client.query(`CREATE SCHEMA "${schema}"`);
			await client.query(`CREATE TABLE ${t.migrations} (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`);
			for (const [i, step] of migrations(t, table).slice(0, 3).entries()) {
				await client.query(step);
				await client.query(`INSERT INTO ${t.migrations} (version) VALUES ($1)`, [i + 1]);
			}
			await client.query(
				`INSERT INTO ${t.ledger} (namespace, key, step, status, expires_at, fence) VALUES ('m', 'old', '', 'completed', now() + interval '1 day', 1)`,
			);
			await client.query('COMMIT');
		} finally {
			client.release();
		}
		const exists = async () => (await pool.query(`SELECT to_regclass($1) IS NOT NULL AS ok`, [t.daily])).rows[0].ok;
		expect(await exists()).toBe(false);

		const startAt = Date.now() + 1200;
		const results = await Promise.all(
			Array.from({ length: 6 }, () => run(process.execPath, [CHILD, schema, table, String(startAt)], { env: process.env })),
		);
		expect(results.map((r) => r.stdout)).toEqual(Array(6).fill('claimed'));
		const { rows } = await pool.query(`SELECT version FROM ${t.migrations} ORDER BY version`);
		expect(rows.map((r) => r.version)).toEqual(Array.from({ length: current }, (_, i) => i + 1));
		expect(await exists()).toBe(true);
		const { rows: keys } = await pool.query(`SELECT key FROM ${t.ledger} ORDER BY key`);
		expect(keys).toHaveLength(7);
		expect(keys[keys.length - 1].key).toBe('old');
		const { rows: daily } = await pool.query(`SELECT namespace, counts FROM ${t.daily}`);
		expect(daily).toEqual([{ namespace: 'm', counts: { runs: 6 } }]);
	} finally {
		await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
		await pool.end();
	}
}, 60_000);
