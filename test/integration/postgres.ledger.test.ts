import { describeLedgerContract } from './ledger.contract';
import { PostgresLedger } from '../../lib/ledger';
import { freshPostgresLedger, newPool, uniqueTable } from '../support/db';

describeLedgerContract('PostgreSQL', freshPostgresLedger);

describe('PostgreSQL ledger: background purge', () => {
	test('a claim triggers a bounded purge of expired rows once the interval has passed', async () => {
		const pool = newPool(2);
		const table = uniqueTable('purge');
		const ledger = new PostgresLedger({ pool, table, autoPurge: { everyMs: 300, batch: 3 } });
		try {
			const seen = { mode: 'seen' as const, holder: 'h', leaseMs: 0, ttlMs: 100 };
			await ledger.claim(Array.from({ length: 5 }, (_, i) => ({ namespace: 'p', key: `old${i}`, step: '', fingerprint: null })), seen);
			await new Promise((r) => setTimeout(r, 400));
			const count = async () => (await pool.query(`SELECT count(*)::int AS n FROM "${table}"`)).rows[0].n as number;
			expect(await count()).toBe(5);
			await ledger.claim([{ namespace: 'p', key: 'fresh', step: '', fingerprint: null }], { ...seen, ttlMs: 60_000 });
			// The purge runs after the claim returned, off the caller's path, and deletes at most 3.
			for (let i = 0; i < 50 && (await count()) > 3; i++) await new Promise((r) => setTimeout(r, 20));
			expect(await count()).toBe(3);
			// Not again before the interval.
			await ledger.claim([{ namespace: 'p', key: 'fresh2', step: '', fingerprint: null }], { ...seen, ttlMs: 60_000 });
			await new Promise((r) => setTimeout(r, 100));
			expect(await count()).toBe(4);
		} finally {
			for (const suffix of ['', '_counters', '_checkpoints', '_audit', '_migrations']) await pool.query(`DROP TABLE IF EXISTS "${table}${suffix}"`);
			await pool.end();
		}
	});
});
