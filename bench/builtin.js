// npm run bench, the Built-in ledger's part (node:sqlite needs Node.js 22.13+). bench/run.js runs
// this file in a child on Node 24 (scripts/n8n-runtime.sh node) when its own Node is older, and
// prints its table. 10,000 distinct keys (first sight) and the same 10,000 again (duplicates),
// median of runs, the scenarios taking turns within each round, in one process:
// - baseline: INSERT OR IGNORE of the keys, one prepared statement per key, one transaction;
// - ledger.claim in mode seen and lease;
// - the Dedupe Gate node's execute() on the Built-in ledger, and on PostgreSQL (the target: the
//   Built-in gate at least as fast as the PostgreSQL gate), in the same rounds.
const fs = require('fs');
const os = require('os');
const path = require('path');

const { DEFAULT_RUNS, roundRobin, time, ledgerCredentials, dropLedgerTables } = require('./util');
const { deliveryAndRepeat } = require('./context');

const N = Number(process.env.BENCH_KEYS || 10_000);
const RUNS = Number(process.env.BENCH_RUNS || DEFAULT_RUNS);
const url = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test';

async function builtinSection() {
	const { SqliteLedger, postgresLedger, closeAllPostgresLedgers, closeAllSqliteLedgers } = require('../dist/lib/ledger');
	const { DedupeGate } = require('../dist/nodes/DedupeGate/DedupeGate.node');
	const { DatabaseSync } = require('node:sqlite');
	const suffix = Date.now().toString(36);
	const home = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-builtin-'));
	process.env.N8N_USER_FOLDER = home;
	const file = path.join(home, '.n8n', 'bench.sqlite');
	const ledger = new SqliteLedger({ file: path.join(home, 'ledger.sqlite') });
	await ledger.ensureSchema();
	const raw = new DatabaseSync(path.join(home, 'raw.sqlite'));
	raw.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; CREATE TABLE seen (namespace TEXT, key TEXT, step TEXT, PRIMARY KEY (namespace, key, step))');
	const insert = raw.prepare('INSERT OR IGNORE INTO seen (namespace, key, step) VALUES (?, ?, ?)');
	const pgCredentials = ledgerCredentials(url, `bench_builtin_${suffix}`);
	const pg = postgresLedger(pgCredentials);
	await pg.ensureSchema();
	const gate = new DedupeGate();
	const keys = (ns) => Array.from({ length: N }, (_, i) => `evt_${ns}_${i}`);
	const gateRun = (backend, credentials) => (ns) => deliveryAndRepeat(gate, { parameters: { backend, mode: 'lease' }, credentials, namespace: ns, n: N });
	const scenarios = {
		'baseline: INSERT OR IGNORE per key, one transaction (SQLite)': async (ns) => {
			const k = keys(ns);
			const once = () => {
				raw.exec('BEGIN IMMEDIATE');
				for (const key of k) insert.run(ns, key, '');
				raw.exec('COMMIT');
			};
			return { first: await time(once), dup: await time(once) };
		},
		'ledger.claim (mark seen), Built-in': async (ns) => {
			const requests = keys(ns).map((key) => ({ namespace: ns, key, step: '', fingerprint: null }));
			const opts = { mode: 'seen', holder: 'bench', leaseMs: 0, ttlMs: 86_400_000 };
			return { first: await time(() => ledger.claim(requests, opts)), dup: await time(() => ledger.claim(requests, opts)) };
		},
		'ledger.claim (lease), Built-in': async (ns) => {
			const requests = keys(ns).map((key) => ({ namespace: ns, key, step: '', fingerprint: null }));
			const opts = { mode: 'lease', holder: 'bench', leaseMs: 600_000, ttlMs: 86_400_000 };
			return { first: await time(() => ledger.claim(requests, opts)), dup: await time(() => ledger.claim(requests, opts)) };
		},
		'Dedupe Gate execute() (field "id", lease), Built-in': gateRun('builtin', { file }),
		'Dedupe Gate execute() (field "id", lease), PostgreSQL': gateRun('postgres', pgCredentials),
	};
	// Ratios to the PostgreSQL gate, the last scenario.
	const rows = await roundRobin(Object.entries(scenarios), RUNS, Object.keys(scenarios).length - 1);
	const fmt = (ms) => `${Math.round(N / (ms / 1000)).toLocaleString('en-US')}/s (${ms.toFixed(1)} ms)`;
	const sqliteVersion = raw.prepare('SELECT sqlite_version() AS v').get().v;
	const lines = [
		`Built-in ledger (SQLite ${sqliteVersion}, node:sqlite, WAL, synchronous FULL), Node ${process.version}; keys per run: ${N}; median of ${RUNS} runs; ratios to the PostgreSQL gate of the same rounds, median of each round's (higher: faster):`,
		'',
		'| scenario | first sight | ratio to PostgreSQL gate | all duplicates | ratio to PostgreSQL gate |',
		'|---|---|---|---|---|',
		...rows.map((r) => `| ${r.name} | ${fmt(r.first)} | ${r.firstRatio.toFixed(2)} | ${fmt(r.dup)} | ${r.dupRatio.toFixed(2)} |`),
	];
	raw.close();
	await ledger.close();
	await closeAllSqliteLedgers();
	await pg.purgeExpired(0);
	const { Pool } = require('pg');
	const pool = new Pool({ connectionString: url, max: 1 });
	await dropLedgerTables(pool, `bench_builtin_${suffix}`);
	await pool.end();
	await closeAllPostgresLedgers();
	fs.rmSync(home, { recursive: true, force: true });
	return lines;
}

module.exports = { builtinSection };

if (require.main === module) {
	builtinSection().then(
		(lines) => console.log(lines.join('\n')),
		(error) => {
			console.error(error);
			process.exit(1);
		},
	);
}
