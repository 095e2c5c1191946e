#!/usr/bin/env node
/**
 * Issue 29's choice between the two Built-in ledger candidates, measured: PGlite
 * (@electric-sql/pglite, PostgreSQL in WASM) running the PostgreSQL backend's own SQL (the
 * PostgresLedger class over a PGlite adapter), against the SQLite backend (node:sqlite), on
 * claims of 10,000 keys: first sight, then all duplicates, in one process. Then: can a second
 * process open the same PGlite data directory while the first holds it (as `n8n execute` beside
 * a running n8n must)?
 *
 * PGlite is not a dependency of this package: install it beside, outside the repository,
 *   mkdir -p /tmp/pglite-eval && (cd /tmp/pglite-eval && npm i @electric-sql/pglite)
 * then run on Node 22.13+ (node:sqlite):
 *   PGLITE_DIR=/tmp/pglite-eval "$(bash scripts/n8n-runtime.sh node | sed -n 's/^N8N_RUNTIME_NODE=//p')" bench/pgliteVsSqlite.js
 */
const { spawnSync } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { performance } = require('perf_hooks');

require('../test/support/ts-require');
const { PostgresLedger } = require('../lib/ledger/postgres/PostgresLedger');
const { SqliteLedger } = require('../lib/ledger/sqlite/SqliteLedger');

const PGLITE = path.join(process.env.PGLITE_DIR || '/tmp/pglite-eval', 'node_modules', '@electric-sql', 'pglite', 'dist', 'index.cjs');
const N = 10_000;
const ROUNDS = Number(process.env.ROUNDS || 3);
const lease = { mode: 'lease', holder: 'bench', leaseMs: 60_000, ttlMs: 86_400_000 };
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

/** What PostgresLedger needs of a pg Pool, over one PGlite instance (one connection: PGlite is single-user). */
function pgliteAsPool(db) {
	const query = async (text, values = []) => {
		// Migrations are several statements in one text: the simple protocol (exec) runs those.
		if (values.length === 0) {
			const results = await db.exec(text);
			return { rows: results[results.length - 1]?.rows ?? [] };
		}
		const res = await db.query(text, values);
		return { rows: res.rows };
	};
	return { query, connect: async () => ({ query, release() {} }), options: {}, end: () => db.close() };
}

async function time(ledger, round) {
	const requests = Array.from({ length: N }, (_, i) => ({ namespace: `bench-${round}`, key: `k${i}`, step: '', fingerprint: null }));
	let t = performance.now();
	const first = await ledger.claim(requests, lease);
	const firstMs = performance.now() - t;
	t = performance.now();
	const again = await ledger.claim(requests, lease);
	const dupMs = performance.now() - t;
	if (first.some((o) => o.kind !== 'claimed') || again.some((o) => o.kind !== 'in_progress')) throw new Error('unexpected outcomes');
	return { firstMs, dupMs };
}

async function measure(name, ledger) {
	await ledger.ensureSchema();
	await time(ledger, 'warm');
	const runs = [];
	for (let r = 0; r < ROUNDS; r++) runs.push(await time(ledger, r));
	const line = `${name.padEnd(34)} 10,000 new keys ${median(runs.map((x) => x.firstMs)).toFixed(0).padStart(6)} ms   10,000 duplicates ${median(runs.map((x) => x.dupMs)).toFixed(0).padStart(6)} ms`;
	console.log(line);
}

(async () => {
	console.log(`Node ${process.versions.node}; median of ${ROUNDS} rounds after a warm-up; machine shared with other work`);
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pglite-vs-sqlite-'));
	const { PGlite } = require(PGLITE);
	const pgDir = path.join(dir, 'pglite');
	const db = new PGlite(pgDir);
	await db.waitReady;
	await measure('PGlite (PostgreSQL backend SQL)', new PostgresLedger({ pool: pgliteAsPool(db) }));

	// A second process on the same data directory while this one holds it open, both writing:
	// 2,000 rows each, 20 at a time. PGlite is single-user PostgreSQL: nothing stops the second
	// process, and each keeps its own view of the files. Afterwards a fresh instance counts.
	await db.exec('CREATE TABLE IF NOT EXISTS two_writers (who text, n int)');
	const childCode = `const { PGlite } = require(${JSON.stringify(PGLITE)});
(async () => {
	try {
		const db = new PGlite(${JSON.stringify(pgDir)});
		await Promise.race([db.waitReady, new Promise((_, no) => setTimeout(() => no(new Error('not ready after 20 s')), 20000))]);
		for (let i = 0; i < 100; i++) await db.query("INSERT INTO two_writers SELECT 'child', g FROM generate_series(1, 20) g");
		console.log('opened and wrote 2000 rows');
		await db.close();
	} catch (e) { console.log('refused: ' + String(e && e.message).slice(0, 200)); }
	process.exit(0);
})();`;
	const { spawn } = require('child_process');
	const second = spawn(process.execPath, ['-e', childCode], { stdio: ['ignore', 'pipe', 'pipe'] });
	let said = '';
	second.stdout.on('data', (d) => (said += d));
	for (let i = 0; i < 100; i++) {
		await db.query("INSERT INTO two_writers SELECT 'parent', g FROM generate_series(1, 20) g");
		await new Promise((r) => setTimeout(r, 5));
	}
	await new Promise((r) => second.on('close', r));
	await db.close();
	let after;
	try {
		const fresh = new PGlite(pgDir);
		await fresh.waitReady;
		const rows = (await fresh.query("SELECT who, count(*)::int AS n FROM two_writers GROUP BY who ORDER BY who")).rows;
		after = rows.map((r) => `${r.who} ${r.n}`).join(', ') || 'no rows';
		await fresh.close();
	} catch (e) {
		after = `the directory no longer opens: ${String(e && e.message).slice(0, 200)}`;
	}
	console.log(`PGlite, a second process on the same data directory while the first holds it: ${said.trim() || 'no answer'}; reopened afterwards: ${after} (of parent 2000, child 2000)`);

	await measure('node:sqlite (Built-in backend)', new SqliteLedger({ file: path.join(dir, 'ledger.sqlite') }));
	fs.rmSync(dir, { recursive: true, force: true });
})().catch((error) => {
	console.error(error);
	process.exit(1);
});
