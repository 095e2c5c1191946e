/**
 * The plans of the PostgreSQL ledger's batch writes, on a real server: no CTE is scanned again for
 * each row of another. Such a join has no index, and its cost grows with the square of the batch:
 * recording the 5,000 keys a gate claimed, when the execution ended, took 6 s (0.1 s now). The
 * statements are run by EXPLAIN ANALYZE, in a transaction that is rolled back.
 */
import type { Pool } from 'pg';

import { freshPostgresLedger } from '../support/db';

const N = 2_000;

interface PlanNode {
	'Node Type': string;
	'Actual Loops'?: number;
	'CTE Name'?: string;
	Plans?: PlanNode[];
}

/** Every CTE scan the plan ran more than once: [the CTE, how often]. */
function rescannedCtes(node: PlanNode): Array<[string, number]> {
	const own: Array<[string, number]> = node['Node Type'] === 'CTE Scan' && (node['Actual Loops'] ?? 0) > 1 ? [[node['CTE Name'] ?? '?', node['Actual Loops']!]] : [];
	return [...own, ...(node.Plans ?? []).flatMap(rescannedCtes)];
}

async function explain(pool: Pool, sql: string, params: unknown[]): Promise<PlanNode> {
	const client = await pool.connect();
	try {
		await client.query('BEGIN');
		const { rows } = await client.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`, params);
		return (rows[0]['QUERY PLAN'] as Array<{ Plan: PlanNode }>)[0].Plan;
	} finally {
		await client.query('ROLLBACK').catch(() => undefined);
		client.release();
	}
}

describe(`PostgreSQL ledger: batch writes of ${N.toLocaleString('en-US')} rows scan no CTE once per row`, () => {
	let fx: Awaited<ReturnType<typeof freshPostgresLedger>>;
	let sql: { recordFenced: string; recordUnfenced: string };
	const claimed: Array<{ key: string; fence: number }> = [];

	beforeAll(async () => {
		fx = await freshPostgresLedger();
		sql = (fx.ledger as unknown as { sql: typeof sql }).sql; // the statements the ledger runs
		const outcomes = await fx.ledger.claim(
			Array.from({ length: N }, (_, i) => ({ namespace: 'plans', key: `k${i}`, step: '', fingerprint: null })),
			{ mode: 'lease', holder: 'run-1', leaseMs: 60_000, ttlMs: 3_600_000 },
		);
		for (const [i, o] of outcomes.entries()) {
			if (o.kind !== 'claimed') throw new Error(`k${i}: ${o.kind}`);
			claimed.push({ key: `k${i}`, fence: Number(o.record.fence) });
		}
	});
	afterAll(async () => {
		await fx.dispose();
	});

	const many = <T>(value: T) => claimed.map(() => value);

	test('the gate\'s claims recorded as completed when the execution ends (fenced, only rows in progress)', async () => {
		const plan = await explain(fx.pool, sql.recordFenced, [
			many('plans'), claimed.map((c) => c.key), many(''), many('completed'), many(null), many(null), many(null),
			claimed.map((c) => String(c.fence)), 3_600_000, true, many(null), many(null), many(false),
		]);
		expect(rescannedCtes(plan)).toEqual([]);
	});

	test('a step of each unit recorded under its claim (unfenced, the claim named)', async () => {
		const plan = await explain(fx.pool, sql.recordUnfenced, [
			many('plans'), claimed.map((c) => c.key), many('send'), many('completed'), many(null), many(null), many(null),
			3_600_000, 'run-1', many(''), claimed.map((c) => String(c.fence)),
		]);
		expect(rescannedCtes(plan)).toEqual([]);
	});
});
