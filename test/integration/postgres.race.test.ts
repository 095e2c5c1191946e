import path from 'path';

import { freshPostgresLedger } from '../support/db';
import { racer, race } from '../support/racer';
const CHILD = path.join(__dirname, 'fixtures', 'pg-claim-child.js');
const PROCESSES = 6;
const KEYS = 1000;
const ROUNDS = 5;

/**
 * Several OS processes, each with its own connection pool, claim the same 1,000 keys at the same
 * instant. Every key must be won exactly once across all of them.
 */
describe('PostgreSQL claims under a multi-process race', () => {
	let fx: Awaited<ReturnType<typeof freshPostgresLedger>>;
	beforeAll(async () => {
		fx = await freshPostgresLedger();
	});
	afterAll(async () => fx && (await fx.dispose()));

	for (const mode of ['lease', 'seen'] as const) {
		test(`${PROCESSES} processes x ${KEYS} keys x ${ROUNDS} rounds, mode ${mode}: each key won exactly once`, async () => {
			// How many processes won something, per round. One script call or statement claims a whole
			// chunk of keys at once, so a round where one process got in first and won everything is a
			// legitimate outcome of the scheduler; across the rounds, the race must have been real.
			const winnersPerRound: number[] = [];
			for (let round = 0; round < ROUNDS; round++) {
				const namespace = `race-${mode}-${round}-${Date.now()}`;
				// Every process is loaded and connected before the shared start instant is sent.
				const results = await race(
					Array.from({ length: PROCESSES }, (_, p) =>
						racer<{ pid: number; won: string[] }>(CHILD, [fx.table, namespace, String(KEYS), mode, String(round * 100 + p)]),
					),
				);
				const wins = new Map<string, number>();
				for (const r of results) for (const key of r.won) wins.set(key, (wins.get(key) ?? 0) + 1);
				const total = results.reduce((n, r) => n + r.won.length, 0);
				expect(total).toBe(KEYS);
				expect(wins.size).toBe(KEYS);
				expect([...wins.values()].every((n) => n === 1)).toBe(true);
				console.log(`${mode} round ${round}: wins per process ${results.map((r) => r.won.length).join(", ")}`);
				winnersPerRound.push(results.filter((r) => r.won.length > 0).length);
				const { rows } = await fx.pool.query(`SELECT count(*)::int AS n FROM "${fx.table}" WHERE namespace = $1`, [namespace]);
				expect(rows[0].n).toBe(KEYS);
			}
			expect(Math.max(...winnersPerRound)).toBeGreaterThan(1);
		}, 120_000);
	}
});
