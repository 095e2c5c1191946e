import { SqliteLedger } from '../../lib/ledger/sqlite/SqliteLedger';
import { loadSqlite } from '../../lib/ledger/sqlite/driver';
import { freshSqliteLedger } from '../support/sqlite';
import { AUTO_PURGE, describeRetention, type Subject } from './retention.suite';

async function sqliteSubject(): Promise<Subject> {
	const fx = await freshSqliteLedger();
	const ledger = new SqliteLedger({ file: fx.file, autoPurge: AUTO_PURGE });
	const direct = new (loadSqlite().DatabaseSync)(fx.file, { timeout: 10_000 });
	return {
		ledger,
		seed: fx.ledger,
		async waiting() {
			return Number(direct.prepare('SELECT count(*) AS n FROM ledger WHERE expires_at <= ?').get(Date.now())!.n);
		},
		putPastCounts: fx.putPastCounts,
		async dispose() {
			direct.close();
			await ledger.close();
			await fx.dispose();
		},
	};
}

describeRetention('Built-in (SQLite)', sqliteSubject);
