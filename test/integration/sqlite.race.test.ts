import path from 'path';

import { freshSqliteLedger } from '../support/sqlite';
import { claimRound } from '../support/racer';

const CHILD = path.join(__dirname, 'fixtures', 'sqlite-claim-child.js');
const PROCESSES = 4;
const KEYS = 1000;

/**
 * Separate OS processes on one Built-in ledger file claim the same 1,000 keys at the same
 * instant, while this process holds the file open too (n8n's main process, with `n8n execute` or a
 * task runner beside it). Every key must be won exactly once in every round. Node.js 22.13+
 * (jest.config.js): `npm test` runs this on Node 24.
 */
describe('Built-in ledger: claims of separate processes on one file', () => {
	let fx: Awaited<ReturnType<typeof freshSqliteLedger>>;
	beforeAll(async () => {
		fx = await freshSqliteLedger();
	});
	afterAll(async () => fx && (await fx.dispose()));

	for (const [mode, rounds] of [['lease', 20], ['seen', 5]] as const) {
		test(`${PROCESSES} processes x ${KEYS} keys x ${rounds} rounds, mode ${mode}: each key won exactly once`, async () => {
			const winnersPerRound: number[] = [];
			for (let round = 0; round < rounds; round++) {
				const namespace = `race-${mode}-${round}-${Date.now()}`;
				const { results, winners } = await claimRound(CHILD, PROCESSES, KEYS, (p) => [fx.file, namespace, String(KEYS), mode, String(round * 100 + p)]);
				winnersPerRound.push(winners);
				// The process that held the file open all along sees every key, each held by one racer.
				const page = await fx.ledger.list({ namespace, limit: KEYS + 1 });
				expect(page.records).toHaveLength(KEYS);
				const holders = new Set(results.filter((r) => r.won.length > 0).map((r) => `pid-${r.pid}`));
				if (mode === 'lease') expect(page.records.every((r) => r.leaseHolder !== null && holders.has(r.leaseHolder))).toBe(true);
			}
			console.log(`${mode}: processes that won keys, per round: ${winnersPerRound.join(' ')}`);
			// The race was real: in some round, keys went to more than one process.
			expect(Math.max(...winnersPerRound)).toBeGreaterThan(1);
		}, 300_000);
	}
});
