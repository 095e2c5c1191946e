/**
 * Render Dashboard through the real engine on the Built-in ledger (the suite: dashboardFlow.ts).
 * node:sqlite: runs on Node 22.13+ only (jest.config.js), i.e. in `npm test`'s Node 24 step.
 */
import { rmSync } from 'fs';
import { join } from 'path';

import { closeAllSqliteLedgers } from '../../lib/ledger/sqlite/connect';
import { SqliteLedger } from '../../lib/ledger/sqlite/SqliteLedger';
import { freshSqliteDir } from '../support/sqlite';
import { describeDashboard } from './dashboardFlow';

describeDashboard(
	{
		name: 'Built-in',
		backend: 'builtin',
		async open() {
			const dir = freshSqliteDir('idem-dashboard-');
			const file = join(dir, 'ledger.sqlite');
			const ledger = new SqliteLedger({ file });
			return {
				ledger,
				credentials: { idempotencyBuiltinApi: { file, sweepExpired: false } },
				async dispose() {
					await ledger.close();
					rmSync(dir, { recursive: true, force: true });
				},
			};
		},
	},
	closeAllSqliteLedgers,
);
