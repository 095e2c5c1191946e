import { mkdtempSync, rmSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';

import { SqliteLedger } from '../../lib/ledger/sqlite/SqliteLedger';
import { loadSqlite } from '../../lib/ledger/sqlite/driver';
import type { LedgerFixture } from '../integration/ledger.contract';

/** A fresh folder for ledger files (under the OS temp dir), named after the branch's tests. */
export const freshSqliteDir = (prefix = 'idem-builtin-') => mkdtempSync(join(tmpdir(), prefix));

/** A Built-in ledger on a new file, with the contract's helpers reading the file directly. */
export async function freshSqliteLedger(): Promise<LedgerFixture & { ledger: SqliteLedger; file: string }> {
	const dir = freshSqliteDir();
	const file = join(dir, 'ledger.sqlite');
	const ledger = new SqliteLedger({ file });
	await ledger.ensureSchema();
	const { DatabaseSync } = loadSqlite();
	const direct = new DatabaseSync(file, { timeout: 10_000 });
	const others: SqliteLedger[] = [];
	return {
		ledger,
		file,
		async another() {
			const other = new SqliteLedger({ file });
			others.push(other);
			return other;
		},
		async ledgerToday() {
			return String(direct.prepare(`SELECT date('now') AS day`).get()!.day);
		},
		async putPastCounts(namespace, daysAgo, counts) {
			direct
				.prepare(`INSERT INTO daily (namespace, day, counts, updated_at) VALUES (?, date('now', ?), ?, 0)`)
				.run(namespace, `${-daysAgo} days`, JSON.stringify(counts));
		},
		async vanish(namespace, key, step) {
			direct.prepare('DELETE FROM ledger WHERE namespace = ? AND key = ? AND step = ?').run(namespace, key, step);
		},
		async audit(namespace) {
			return direct
				.prepare('SELECT key, step, action, actor, detail FROM audit WHERE namespace = ? ORDER BY id')
				.all(namespace)
				.map((r) => {
					const detail = JSON.parse(String(r.detail));
					return {
						key: String(r.key),
						step: String(r.step),
						action: String(r.action),
						actor: r.actor === null ? null : String(r.actor),
						status: detail.status as string,
						leaseHolder: (detail.leaseHolder ?? null) as string | null,
						fence: detail.fence === null || detail.fence === undefined ? null : Number(detail.fence),
					};
				});
		},
		async dispose() {
			direct.close();
			await ledger.close();
			for (const other of others) await other.close();
			rmSync(dir, { recursive: true, force: true });
		},
	};
}
