/**
 * The on-call SQL in docs/operations.md ("On call, in SQL") runs against a real ledger schema and
 * answers the three questions for rows the ledger wrote.
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
	await pool.end();
});

const page = readFileSync(path.join(__dirname, '../../docs/operations.md'), 'utf8');
// The "On call, in SQL" section of the on-call page, up to the next section of its level.
const start = page.indexOf('\n## On call, in SQL\n');
if (start < 0) throw new Error('docs/operations.md has no "## On call, in SQL" section');
const doc = page.slice(start).split(/\n## (?!On call, in SQL\n)/)[0];
const sqlBlocks = [...doc.matchAll(/```sql\n([\s\S]*?)```/g)].map((m) => m[1]);

type Rows = Array<Record<string, unknown>>;

async function query(sql: string): Promise<Array<{ rows: Rows }>> {
	const client = await pool.connect();
	try {
		await client.query(`SET search_path TO "${schema}"`);
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
