// npm run bench:dashboard: how long Idempotency Ledger's Render Dashboard takes on a PostgreSQL
// ledger of DASHBOARD_ROWS rows (default 1,000,000) beside the same render on an empty ledger, in
// one run, the two taking turns (median and slowest of DASHBOARD_ROUNDS, default 11). The render
// is what the node does: a page of namespaces, per namespace its stats, day counters and short
// pages of stuck and Needs Review rows (lib/dashboard/read.ts), then the HTML (render.ts). The
// full ledger: 20 namespaces (one holds half the rows), 0.1 % stuck in progress, 0.1 % Needs
// Review, 1 % failed, the rest completed, and 30 days of counters per namespace.
//
//   DASHBOARD_ROWS    rows in the full ledger
//   DASHBOARD_ROUNDS  rounds
const { Pool } = require('pg');

const ROWS = Number(process.env.DASHBOARD_ROWS || 1_000_000);
const ROUNDS = Number(process.env.DASHBOARD_ROUNDS || 11);
const { dropLedgerTables, median, time: ms } = require('./util');

async function main() {
	const { PostgresLedger } = require('../dist/lib/ledger');
	const { readDashboard } = require('../dist/lib/dashboard/read');
	const { renderDashboard } = require('../dist/lib/dashboard/render');
	const url = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test';
	const stamp = Date.now().toString(36);
	const admin = new Pool({ connectionString: url, max: 2 });
	const open = (table) => new PostgresLedger({ pool: new Pool({ connectionString: url, max: 10 }), table });
	const tables = [`dash_empty_${stamp}`, `dash_full_${stamp}`];
	const [empty, full] = tables.map(open);
	const request = { title: 'Idempotency Ledger', maxNamespaces: 20, rowsPerList: 5, days: 30 };
	let bytes = 0;
	const render = async (ledger) => {
		const html = renderDashboard(await readDashboard(ledger, request));
		bytes = html.length;
	};
	try {
		await empty.ensureSchema();
		await full.ensureSchema();
		const t = `public."${tables[1]}"`;
		const started = Date.now();
		for (let from = 0; from < ROWS; from += 500_000) {
			await admin.query(
				`INSERT INTO ${t} (namespace, key, step, status, lease_holder, lease_expires_at, phase, result, fence, first_seen_at, updated_at, expires_at)
				 SELECT CASE WHEN g % 2 = 0 THEN 'workflow:big' ELSE 'workflow:wf' || lpad((g % 19)::text, 2, '0') END,
					'evt_' || md5(g::text), CASE WHEN g % 3 = 0 THEN 'send' ELSE '' END,
					CASE WHEN g % 1000 = 7 THEN 'in_progress' WHEN g % 1000 = 8 THEN 'needs_review' WHEN g % 100 = 9 THEN 'failed_retryable' ELSE 'completed' END,
					CASE WHEN g % 1000 = 7 THEN 'execution:dead' END,
					CASE WHEN g % 1000 = 7 THEN now() - interval '1 hour' END,
					CASE WHEN g % 2000 = 7 THEN 'sending' END,
					CASE WHEN g % 1000 = 8 THEN '{"check":{"outcome":"unknown","detail":"Slack answered 503","checkedAt":"2026-12-01T10:00:00.000Z"}}'::jsonb END,
					g, now() - (g % 86400) * interval '1 second', now() - (g % 86400) * interval '1 second', now() + interval '30 days'
				 FROM generate_series($1::bigint, $2::bigint) g`,
				[from + 1, Math.min(ROWS, from + 500_000)],
			);
		}
		await admin.query(
			`INSERT INTO public."${tables[1]}_daily" (namespace, day, counts)
			 SELECT ns, (now() AT TIME ZONE 'UTC')::date - d, jsonb_build_object('duplicatesBlocked', 100 + d, 'lookups', 50, 'hits', 20 + d, 'tokensSaved', 4000, 'moneySaved', 0.12)
			 FROM (SELECT DISTINCT namespace AS ns FROM ${t}) n, generate_series(0, 29) d`,
		);
		await admin.query(`INSERT INTO public."${tables[1]}_counters" (namespace, duplicates_blocked) SELECT DISTINCT namespace, 1234 FROM ${t}`);
		await admin.query(`VACUUM ANALYZE ${t}`);
		console.log(`PostgreSQL: filled ${ROWS.toLocaleString('en')} rows in ${((Date.now() - started) / 1000).toFixed(0)} s`);

		await render(empty);
		await render(full);
		const times = { empty: [], full: [] };
		const page = { empty: 0, full: 0 };
		for (let r = 0; r < ROUNDS; r++) {
			for (const which of r % 2 ? ['full', 'empty'] : ['empty', 'full']) {
				times[which].push(await ms(() => render(which === 'empty' ? empty : full)));
				page[which] = bytes;
			}
		}
		const row = (which, label) => `| ${label} | ${median(times[which]).toFixed(0)} ms | ${Math.max(...times[which]).toFixed(0)} ms | ${(page[which] / 1024).toFixed(0)} KB |`;
		console.log(`\n### Render Dashboard, median of ${ROUNDS} rounds (defaults: 20 namespaces, 5 rows per list, 30 days)`);
		console.log('| ledger | median | slowest | page |\n|---|---|---|---|');
		console.log(row('empty', 'empty (baseline)'));
		console.log(row('full', `${ROWS.toLocaleString('en')} rows`));
		console.log(`\nfull / empty: ${(median(times.full) / median(times.empty)).toFixed(1)}×; target: under 1,000 ms`);
	} finally {
		for (const table of tables) await dropLedgerTables(admin, table);
		await empty.close();
		await full.close();
		await admin.end();
	}
}

main().catch((error) => {
	console.error(error);
	process.exit(1);
});
