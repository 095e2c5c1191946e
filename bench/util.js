/**
 * Rounds per scenario when BENCH_RUNS is not set. One round's ratio to its baseline ranges from
 * about 0.5 to 2.6 on these 2-core machines, with no trend over 40 rounds (docs/benchmarks.md), so
 * a median of 7 rounds moved by up to 0.48 between runs of one build (0.72 to 1.20): more than
 * the margins the targets judge. A median of 21 is steadier (the spread of a median shrinks with
 * the square root of the rounds).
 */
const DEFAULT_RUNS = 21;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const percentile = (xs, p) => {
	const s = [...xs].sort((a, b) => a - b);
	return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const time = async (fn) => {
	const t0 = process.hrtime.bigint();
	await fn();
	return Number(process.hrtime.bigint() - t0) / 1e6;
};

/**
 * Times scenarios against a baseline. `entries` are [name, run] pairs; `run(namespace)` answers
 * `{ first, dup, trips? }`, in ms, for a namespace nobody used. After one warm-up run each, every
 * round runs each scenario once, starting with a different one each round, so a checkpoint, an
 * autovacuum or a noisy neighbour slows all of them alike.
 *
 * Per scenario: the median of its times, and its ratio to the baseline (`entries[baseAt]`; the
 * baseline's time divided by the scenario's, higher is faster) as the median of each round's
 * ratio. The two ran within a second of each other, so a machine that slows down or speeds up
 * while the bench runs (seen here: the raw SQL from 106 to 57 ms within one run) moves both
 * alike; a ratio of the two medians would mix rounds run a minute apart.
 */
async function roundRobin(entries, runs, baseAt = 0) {
	for (const [s, [, run]] of entries.entries()) await run(`warm_${s}`);
	const results = entries.map(() => ({ firsts: [], dups: [], trips: 0 }));
	for (let r = 0; r < runs; r++) {
		for (let j = 0; j < entries.length; j++) {
			const s = (r + j) % entries.length;
			const res = await entries[s][1](`r${r}_${s}`);
			results[s].firsts.push(res.first);
			results[s].dups.push(res.dup);
			results[s].trips = res.trips;
		}
	}
	const base = results[baseAt];
	const ratio = (of, own) => median(own.map((ms, r) => of[r] / ms));
	return entries.map(([name], s) => ({
		name,
		first: median(results[s].firsts),
		dup: median(results[s].dups),
		firstRatio: ratio(base.firsts, results[s].firsts),
		dupRatio: ratio(base.dups, results[s].dups),
		trips: results[s].trips,
	}));
}

/** The ledger credential of the PostgreSQL at `url` (a connection string), on ledger table `table`. */
function ledgerCredentials(url, table) {
	const u = new URL(url);
	return { host: u.hostname, port: Number(u.port || 5432), database: u.pathname.slice(1), user: decodeURIComponent(u.username), password: decodeURIComponent(u.password), ssl: 'disable', schema: 'public', table, poolSize: 10 };
}

/** Drops the ledger on `table` whole: its tables and functions (dropLedgerSql). */
async function dropLedgerTables(pool, table) {
	const { dropLedgerSql } = require('../dist/lib/ledger/postgres/schema');
	for (const sql of dropLedgerSql('public', table)) await pool.query(sql);
}

/** Whether this Node has node:sqlite (Node.js 22.13 and later), which the Built-in ledger needs. */
const hasSqlite = () => {
	const [major, minor] = process.versions.node.split('.').map(Number);
	return major > 23 || (major === 23 && minor >= 4) || (major === 22 && minor >= 13);
};

/** The path of a Node that has node:sqlite: this one, or the Node 24 scripts/n8n-runtime.sh installs; null if none. */
function nodeWithSqlite() {
	if (hasSqlite()) return process.execPath;
	const { execFileSync } = require('child_process');
	const path = require('path');
	const printed = execFileSync('bash', [path.join(__dirname, '..', 'scripts', 'n8n-runtime.sh'), 'node'], {
		env: { ...process.env, N8N_VERSION: '2.41.1' },
		encoding: 'utf8',
		stdio: ['ignore', 'pipe', 'inherit'],
	});
	return /^N8N_RUNTIME_NODE=(.*)$/m.exec(printed)?.[1] ?? null;
}

module.exports = { DEFAULT_RUNS, median, percentile, time, roundRobin, ledgerCredentials, dropLedgerTables, hasSqlite, nodeWithSqlite };
