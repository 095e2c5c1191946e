/**
 * The Built-in ledger (SQLite, `node:sqlite`) against the shared contract. Needs Node.js 22.13+:
 * jest.config.js leaves the `sqlite.*` tests out on an older Node, and `npm test` runs them on
 * Node 24 in its second step (scripts/test-vm-engine.js).
 */
import { existsSync, rmSync } from 'fs';
import { join } from 'path';

import { closeAllSqliteLedgers, sqliteLedger } from '../../lib/ledger/sqlite/connect';
import { loadSqlite } from '../../lib/ledger/sqlite/driver';
import { SqliteLedger } from '../../lib/ledger/sqlite/SqliteLedger';
import { describeLedgerContract } from './ledger.contract';
import { freshSqliteDir, freshSqliteLedger } from '../support/sqlite';

describeLedgerContract('Built-in (SQLite)', freshSqliteLedger);

describe('Built-in ledger: background purge (the credential\'s Sweep Expired Rows)', () => {
	test('a claim starts a turn once the interval has passed: batches while each comes back full, at most maxBatches', async () => {
		const dir = freshSqliteDir();
		const file = join(dir, 'purge.sqlite');
		const ledger = new SqliteLedger({ file, autoPurge: { everyMs: 300, batch: 2, maxBatches: 2 } });
		const direct = new (loadSqlite().DatabaseSync)(file, { timeout: 10_000 });
		const count = () => Number(direct.prepare('SELECT count(*) AS n FROM ledger').get()!.n);
		try {
			const seen = { mode: 'seen' as const, holder: 'h', leaseMs: 0, ttlMs: 100 };
			await ledger.claim(Array.from({ length: 5 }, (_, i) => ({ namespace: 'p', key: `old${i}`, step: '', fingerprint: null })), seen);
			await new Promise((r) => setTimeout(r, 400));
			expect(count()).toBe(5);
			await ledger.claim([{ namespace: 'p', key: 'fresh', step: '', fingerprint: null }], { ...seen, ttlMs: 60_000 });
			// The turn runs after the claim returned, off the caller's path: two full batches of 2, then
			// the bound of the turn; one old row waits for the next turn.
			for (let i = 0; i < 50 && count() > 2; i++) await new Promise((r) => setTimeout(r, 20));
			expect(count()).toBe(2);
			// Not again before the interval.
			await ledger.claim([{ namespace: 'p', key: 'fresh2', step: '', fingerprint: null }], { ...seen, ttlMs: 60_000 });
			await new Promise((r) => setTimeout(r, 100));
			expect(count()).toBe(3);
		} finally {
			direct.close();
			await ledger.close();
			rmSync(dir, { recursive: true, force: true });
		}
	});

	test('sqliteLedger(): one ledger per file and sweep setting, in n8n\'s folder by default', async () => {
		const home = freshSqliteDir();
		const before = process.env.N8N_USER_FOLDER;
		process.env.N8N_USER_FOLDER = home;
		try {
			const a = sqliteLedger({});
			expect(a.file).toBe(join(home, '.n8n', 'idempotency-ledger.sqlite'));
			expect(sqliteLedger({ file: 'idempotency-ledger.sqlite' })).toBe(a);
			expect(sqliteLedger({ purge: false })).not.toBe(a);
			await a.ensureSchema();
			expect(existsSync(a.file)).toBe(true);
		} finally {
			if (before === undefined) delete process.env.N8N_USER_FOLDER;
			else process.env.N8N_USER_FOLDER = before;
			await closeAllSqliteLedgers();
			rmSync(home, { recursive: true, force: true });
		}
	});
});
