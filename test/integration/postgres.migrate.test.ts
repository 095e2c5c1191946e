import { execFile } from 'child_process';
import path from 'path';
import { promisify } from 'util';

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
