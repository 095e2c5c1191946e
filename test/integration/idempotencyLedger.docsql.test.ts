/**
 * The on-call SQL in docs/operations.md ("On call, in SQL") runs against a real ledger schema and
 * answers the three questions for rows the ledger wrote; the DDL in docs/schema.md creates the
 * same tables as the migrations; the uninstall SQL in docs/install.md leaves nothing behind.
 */
import { readFileSync } from 'fs';
import path from 'path';

import { PostgresLedger } from '../../lib/ledger';
import { newPool } from '../support/db';
import { recordRow, stuckRow } from './idempotencyLedger.support';

const schema = `docs_${Math.random().toString(16).slice(2, 10)}`;
const pool = newPool(2);
const ledger = new PostgresLedger({ pool, schema, table: 'idempotency_ledger' });

afterAll(async () => {
	await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
	await pool.query(`DROP SCHEMA IF EXISTS "${schema}_doc" CASCADE`);
	await pool.end();
});

const page = readFileSync(path.join(__dirname, '../../docs/operations.md'), 'utf8');
// The "On call, in SQL" section of the on-call page, up to the next section of its level.
const start = page.indexOf('\n## On call, in SQL\n');
if (start < 0) throw new Error('docs/operations.md has no "## On call, in SQL" section');
const doc = page.slice(start).split(/\n## (?!On call, in SQL\n)/)[0];
const sqlBlocks = [...doc.matchAll(/```sql\n([\s\S]*?)```/g)].map((m) => m[1]);

type Rows = Array<Record<string, unknown>>;

/** Runs `sql` (one statement or several) with `inSchema` first on the search path, as a reader would. */
async function query(sql: string, inSchema = schema): Promise<Array<{ rows: Rows }>> {
	const client = await pool.connect();
	try {
		await client.query(`SET search_path TO "${inSchema}"`);
		const results: unknown = await client.query(sql);
		return (Array.isArray(results) ? results : [results]) as Array<{ rows: Rows }>;
	} finally {
		await client.query('RESET search_path');
		client.release();
	}
}

test('every SQL block of the doc runs, and the answers are right', async () => {
	await ledger.ensureSchema();
	await stuckRow(ledger, 'stripe-events', 'evt_1NqX2b');
	await recordRow(ledger, 'stripe-events', 'evt_1NqX2b', 'needs_review', 'Send Confirmation', { result: { reason: 'ambiguous' } });
	await recordRow(ledger, 'stripe-events', 'evt_done', 'completed', '', { externalId: 'msg_1' });
	await ledger.release({ namespace: 'stripe-events', key: 'evt_1NqX2b', step: 'Send Confirmation', releasedBy: 'jane', ttlMs: 86_400_000 });
	await recordRow(ledger, 'stripe-events', 'evt_1NqX2b', 'needs_review', 'Send Confirmation', { result: { reason: 'ambiguous' } });
	await ledger.setCheckpoint('stripe-events', 'invoices-sync', '10', { force: false, updatedBy: 'jane' });
	// A step that died while sending.
	const [held] = await ledger.claim([{ namespace: 'stripe-events', key: 'evt_mid', step: 'Send Slack', fingerprint: null }], {
		mode: 'lease',
		holder: 'execution:dead',
		leaseMs: 200,
		ttlMs: 86_400_000,
	});
	await ledger.markPhase([{ namespace: 'stripe-events', key: 'evt_mid', step: 'Send Slack', fence: held.kind === 'claimed' ? held.record.fence! : 0 }], 'sending');
	await new Promise((r) => setTimeout(r, 300));

	expect(sqlBlocks.length).toBeGreaterThanOrEqual(5);
	const [sent, why, audit, stuck, glance] = await Promise.all(sqlBlocks.map((sql) => query(sql)));
	expect(sent[0].rows.map((r) => [r.step, r.status])).toEqual([
		['', 'in_progress'],
		['Send Confirmation', 'needs_review'],
	]);
	expect(why[0].rows.map((r) => r.why)).toEqual([
		'stuck: the run died before sending; the next attempt takes it over',
		'waiting for a person (ambiguous)',
	]);
	expect(audit[0].rows).toEqual([
		expect.objectContaining({ actor: 'jane', action: 'release', step: 'Send Confirmation', status_before: 'needs_review', phase_before: null }),
	]);
	expect(stuck[0].rows.map((r) => r.key)).toEqual(['evt_1NqX2b']);
	expect(stuck[1].rows.map((r) => [r.key, r.step])).toEqual([['evt_mid', 'Send Slack']]);
	expect(stuck[2].rows.map((r) => [r.key, r.reason])).toEqual([['evt_1NqX2b', 'ambiguous']]);
	expect(glance[0].rows).toEqual([
		expect.objectContaining({ namespace: 'stripe-events', in_progress: '2', stuck: '2', needs_review: '1', completed: '1' }),
	]);
	expect(glance[1].rows).toEqual([expect.objectContaining({ name: 'invoices-sync', value: '10', updated_by: 'jane' })]);
});

test('the PostgreSQL DDL in docs/schema.md creates the tables, columns, keys and indexes the migrations create', async () => {
	const schemaPage = readFileSync(path.join(__dirname, '../../docs/schema.md'), 'utf8');
	const ddl = /\n## PostgreSQL\n[\s\S]*?```sql\n([\s\S]*?)```/.exec(schemaPage)?.[1];
	if (!ddl) throw new Error('docs/schema.md has no sql block under "## PostgreSQL"');
	const docSchema = `${schema}_doc`;
	await pool.query(`CREATE SCHEMA "${docSchema}"`);
	await query(ddl, docSchema);
	await ledger.ensureSchema();

	/** Everything a table's definition says, with the schema name taken out. */
	async function shape(s: string, tables: string[]) {
		const q = async (sql: string) => (await pool.query(sql, [s, tables])).rows;
		const columns = await q(
			`SELECT table_name, column_name, data_type, is_nullable, collation_name, column_default
			 FROM information_schema.columns WHERE table_schema = $1 AND table_name = ANY($2) ORDER BY table_name, column_name`,
		);
		const constraints = await q(
			`SELECT r.relname, c.conname, pg_get_constraintdef(c.oid) AS def FROM pg_constraint c
			 JOIN pg_class r ON r.oid = c.conrelid JOIN pg_namespace n ON n.oid = r.relnamespace
			 WHERE n.nspname = $1 AND r.relname = ANY($2) ORDER BY r.relname, c.conname`,
		);
		const indexes = (await q(`SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename = ANY($2) ORDER BY indexname`)).map(
			(r) => ({ ...r, indexdef: String(r.indexdef).split(`"${s}".`).join('').split(`${s}.`).join('') }),
		);
		// Sequences owned by a column of these tables (OWNED BY, or a serial).
		const sequences = await q(
			`SELECT s.relname AS sequence, t.relname AS owner FROM pg_class s JOIN pg_namespace n ON n.oid = s.relnamespace
			 JOIN pg_depend d ON d.objid = s.oid AND d.deptype IN ('a', 'i') JOIN pg_class t ON t.oid = d.refobjid
			 WHERE s.relkind = 'S' AND n.nspname = $1 AND t.relname = ANY($2) ORDER BY 1`,
		);
		return { columns, constraints, indexes, sequences };
	}
	const tablesOf = async (s: string) =>
		(await pool.query(`SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1`, [s])).rows.map((r) => r.table_name as string);
	const documented = await tablesOf(docSchema);
	expect(documented).toEqual(expect.arrayContaining(['idempotency_ledger', 'idempotency_ledger_daily']));
	expect(await shape(docSchema, documented)).toEqual(await shape(schema, documented));
	// Every table the code creates is at least named on the page.
	for (const table of await tablesOf(schema)) expect(schemaPage).toContain(table);
});

test('the uninstall SQL in docs/install.md drops every table and function of a ledger with the default names', async () => {
	const page = readFileSync(path.join(__dirname, '../../docs/install.md'), 'utf8');
	const sql = /```sql\n([\s\S]*?)```/.exec(page)?.[1]?.replace(/^ {3}/gm, '');
	if (!sql) throw new Error('docs/install.md has no sql block');
	const gone = `${schema}_gone`;
	await pool.query(`CREATE SCHEMA "${gone}"`);
	const doomed = new PostgresLedger({ pool, schema: gone, table: 'idempotency_ledger' });
	await doomed.claim([{ namespace: 'ns', key: 'k', step: '', fingerprint: null }], { mode: 'seen', holder: 'h', leaseMs: 0, ttlMs: 60_000 });
	const left = async () =>
		(
			await pool.query(
				`SELECT (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1)::int AS relations,
				        (SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1)::int AS functions`,
				[gone],
			)
		).rows[0];
	expect(await left()).toEqual({ relations: expect.any(Number), functions: 1 });
	await query(sql, gone);
	expect(await left()).toEqual({ relations: 0, functions: 0 });
	await pool.query(`DROP SCHEMA "${gone}"`);
});
