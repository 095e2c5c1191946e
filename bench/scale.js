// npm run bench:scale: does the ledger slow down as it fills? In one run, a ledger holding
// SCALE_ROWS live rows (10 million on PostgreSQL and Redis, 1 million on the Built-in file) beside
// an empty one of the same backend, the two taking turns round by round (median of SCALE_ROUNDS):
//   - a claim of 10,000 new keys, and of the same 10,000 again (all duplicates), one call each;
//   - one-key claims of new keys, p50 and p99 of 1,000;
//   - a Prompt Cache hit's read (the one-row peek Lookup and the Chat Model make), p50 and p99 of 1,000;
// and the bytes each live row costs: table and indexes (PostgreSQL), the file (Built-in), used
// memory (Redis, a throwaway redis-server so that nothing else is counted). On Redis also its own
// cost of 10,000 new keys that expire (pipelined SET NX PX) on the same two servers: what a full
// keyspace costs any client, against which the claim's own slowdown is read.
//
//   SCALE_BACKENDS postgres,redis,builtin (default all three)
//   SCALE_ROWS     rows in the full ledger (default 10,000,000; the Built-in file 1,000,000)
//   SCALE_ROUNDS   rounds (default 5)
const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync, spawnSync } = require('child_process');

const BACKENDS = (process.env.SCALE_BACKENDS || 'postgres,redis,builtin').split(',');
const ROWS = process.env.SCALE_ROWS ? Number(process.env.SCALE_ROWS) : null;
const ROUNDS = Number(process.env.SCALE_ROUNDS || 5);
const N = 10_000;
const ONE_KEY = 1_000;
const DAY = 86_400_000;
const { dropLedgerTables, hasSqlite, median, nodeWithSqlite, percentile: pct, time: ms } = require('./util');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const fillRows = (backend) => ROWS ?? (backend === 'builtin' ? 1_000_000 : 10_000_000);

/** The figures of one round on one ledger (and its server's own `baselines`); `tag` keeps each round's keys new. */
async function round(ledger, tag, baselines) {
	const seen = { mode: 'seen', holder: 'b', leaseMs: 0, ttlMs: DAY };
	const batch = Array.from({ length: N }, (_, i) => ({ namespace: 'bench', key: `${tag}-${i}`, step: '', fingerprint: null }));
	const first = await ms(() => ledger.claim(batch, seen));
	const dup = await ms(() => ledger.claim(batch, seen));
	const one = [];
	for (let i = 0; i < ONE_KEY; i++) one.push(await ms(() => ledger.claim([{ namespace: 'bench', key: `${tag}-one-${i}`, step: '', fingerprint: null }], seen)));
	const hit = [];
	for (let i = 0; i < ONE_KEY; i++) hit.push(await ms(() => ledger.peek([{ namespace: 'bench', key: `${tag}-${i}`, step: '' }])));
	const base = [];
	for (const run of baselines ?? []) base.push(await ms(() => run(tag)));
	return { base, first, dup, oneP50: pct(one, 50), oneP99: pct(one, 99), hitP50: pct(hit, 50), hitP99: pct(hit, 99) };
}

/** `baselines`, where given: [{ label, empty, full }], the server's own work on each, by round tag. */
async function compare(name, empty, full, rows, bytesPerRow, baselines = []) {
	const results = { empty: [], full: [] };
	for (let r = 0; r < ROUNDS; r++) {
		const order = r % 2 ? ['full', 'empty'] : ['empty', 'full'];
		for (const which of order) results[which].push(await round(which === 'empty' ? empty : full, `r${r}-${which}`, baselines.map((b) => b[which])));
	}
	const m = (which, f) => median(results[which].map((x) => (typeof f === 'number' ? x.base[f] : x[f])));
	const line = (label, f, unit, better) => {
		const e = m('empty', f);
		const fu = m('full', f);
		// Throughput ratios: empty time over full time (1 = as fast); latency ratios: full over empty.
		const ratio = better === 'throughput' ? e / fu : fu / e;
		return `| ${label} | ${e.toFixed(2)} ${unit} | ${fu.toFixed(2)} ${unit} | ${ratio.toFixed(2)}${better === 'throughput' ? ' of empty' : '× empty'} |`;
	};
	console.log(`\n### ${name}: ${rows.toLocaleString('en')} live rows against an empty ledger, median of ${ROUNDS} rounds`);
	console.log(`| measure | empty | ${rows.toLocaleString('en')} rows | ratio |\n|---|---|---|---|`);
	baselines.forEach((b, i) => console.log(line(b.label, i, 'ms', 'throughput')));
	console.log(line(`claim of ${N.toLocaleString('en')} new keys`, 'first', 'ms', 'throughput'));
	console.log(line(`claim of ${N.toLocaleString('en')} duplicates`, 'dup', 'ms', 'throughput'));
	console.log(line('one-key claim p50', 'oneP50', 'ms', 'latency'));
	console.log(line('one-key claim p99', 'oneP99', 'ms', 'latency'));
	console.log(line('cache hit read p50', 'hitP50', 'ms', 'latency'));
	console.log(line('cache hit read p99', 'hitP99', 'ms', 'latency'));
	console.log(`bytes per live row: ${bytesPerRow.toFixed(0)}`);
}

async function postgres() {
	const { Pool } = require('pg');
	const { PostgresLedger } = require('../dist/lib/ledger');
	const url = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test';
	const stamp = Date.now().toString(36);
	const admin = new Pool({ connectionString: url, max: 2 });
	const open = (table) => new PostgresLedger({ pool: new Pool({ connectionString: url, max: 10 }), table });
	const empty = open(`scale_empty_${stamp}`);
	const full = open(`scale_full_${stamp}`);
	const rows = fillRows('postgres');
	try {
		await empty.ensureSchema();
		await full.ensureSchema();
		const t = `public.scale_full_${stamp}`;
		const started = Date.now();
		for (let from = 0; from < rows; from += 1_000_000) {
			await admin.query(
				`INSERT INTO ${t} (namespace, key, step, status, fingerprint, expires_at, fence)
				 SELECT 'ns-' || (g % 50), 'evt_' || md5(g::text), CASE WHEN g % 3 = 0 THEN 'send' ELSE '' END, 'completed', NULL, now() + interval '30 days', g
				 FROM generate_series($1::bigint, $2::bigint) g`,
				[from + 1, Math.min(rows, from + 1_000_000)],
			);
		}
		await admin.query(`VACUUM ANALYZE ${t}`);
		const bytes = Number((await admin.query(`SELECT pg_total_relation_size('${t}') AS b`)).rows[0].b);
		console.log(`PostgreSQL: filled ${rows.toLocaleString('en')} rows in ${((Date.now() - started) / 1000).toFixed(0)} s, ${(bytes / 1e9).toFixed(2)} GB with indexes`);
		await compare('PostgreSQL', empty, full, rows, bytes / rows);
	} finally {
		for (const table of [`scale_empty_${stamp}`, `scale_full_${stamp}`]) await dropLedgerTables(admin, table);
		await empty.close();
		await full.close();
		await admin.end();
	}
}

async function redis() {
	const { Redis } = require('ioredis');
	const { RedisLedger } = require('../dist/lib/ledger');
	const { serverPort } = require('../test/support/ports');
	const servers = [];
	const start = async () => {
		const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'idem-scale-redis-'));
		const port = await serverPort({ taken: servers.map((s) => s.port) });
		// No AOF: the fill writes gigabytes, and what is measured here is memory and time in Redis.
		execFileSync('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--daemonize', 'yes', '--dir', dir, '--logfile', path.join(dir, 'redis.log'), '--save', '', '--appendonly', 'no']);
		const cli = (...args) => spawnSync('redis-cli', ['-p', String(port), ...args], { encoding: 'utf8' }).stdout.trim();
		for (let i = 0; i < 100 && cli('PING') !== 'PONG'; i++) await sleep(100);
		const server = { port, cli, dir };
		servers.push(server);
		return server;
	};
	const memory = (server) => Number(/used_memory:(\d+)/.exec(server.cli('INFO', 'memory'))[1]);
	try {
		const [a, b] = [await start(), await start()];
		const empty = new RedisLedger({ client: new Redis({ port: a.port }), prefix: 'scale' });
		const full = new RedisLedger({ client: new Redis({ port: b.port }), prefix: 'scale' });
		await empty.ensureSchema();
		await full.ensureSchema();
		const rows = fillRows('redis');
		const before = memory(b);
		const started = Date.now();
		const seen = { mode: 'seen', holder: 'fill', leaseMs: 0, ttlMs: 30 * DAY };
		for (let from = 0; from < rows; from += 5_000) {
			const batch = Array.from({ length: Math.min(5_000, rows - from) }, (_, i) => ({ namespace: `ns-${(from / 5_000) % 50}`, key: `evt_${from + i}`, step: '', fingerprint: null }));
			await full.claim(batch, seen);
		}
		// Index what the fill left pending, as the background turns do.
		await full.purgeExpired(1);
		const bytes = memory(b) - before;
		console.log(`Redis: filled ${rows.toLocaleString('en')} rows in ${((Date.now() - started) / 1000).toFixed(0)} s, used memory +${(bytes / 1e9).toFixed(2)} GB`);
		// Where a row's bytes are, from namespace ns-0: its own key and value, and its share of the
		// namespace's sorted sets; the rest is the server's dictionaries (keys, expiries) and allocator.
		const usage = (key) => Number(b.cli('MEMORY', 'USAGE', key, 'SAMPLES', '0')) || 0;
		const perMember = (key) => {
			const n = Number(b.cli('ZCARD', key));
			return n > 0 ? usage(key) / n : 0;
		};
		const parts = { 'row key and value': usage('{scale:ns-0}:r:evt_0:'), idx: perMember('{scale:ns-0}:idx'), 'st:completed': perMember('{scale:ns-0}:st:completed'), members: perMember('{scale:ns-0}:members') };
		const named = Object.values(parts).reduce((x, y) => x + y, 0);
		console.log(`Redis bytes per row: ${Object.entries(parts).map(([k, v]) => `${k} ${v.toFixed(0)}`).join(', ')}; the rest ${(bytes / rows - named).toFixed(0)} of ${(bytes / rows).toFixed(0)}`);
		// The server's own cost of new keys with an expiry, about a row's size: in one pipeline (the
		// baseline of npm run bench), and in one script call, the least script a claim could be.
		const value = 'x'.repeat(120);
		const keys = (tag, kind) => Array.from({ length: N }, (_, i) => `${kind}:${tag}-${i}`);
		const setNx = (client) => (tag) => {
			const pipeline = client.pipeline();
			for (const key of keys(tag, 'setnx')) pipeline.set(key, value, 'PX', DAY, 'NX');
			return pipeline.exec();
		};
		const LEAST = `for i = 1, #KEYS do redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2], 'NX') end`;
		const least = (client) => (tag) => client.eval(LEAST, N, ...keys(tag, 'least'), value, DAY);
		const [emptyClient, fullClient] = [new Redis({ port: a.port }), new Redis({ port: b.port })];
		await compare('Redis', empty, full, rows, bytes / rows, [
			{ label: `pipelined SET NX PX of ${N.toLocaleString('en')} new keys (Redis's own)`, empty: setNx(emptyClient), full: setNx(fullClient) },
			{ label: `one script of ${N.toLocaleString('en')} SET NX PX (Redis's own, the least claim)`, empty: least(emptyClient), full: least(fullClient) },
		]);
		emptyClient.disconnect();
		fullClient.disconnect();
		await empty.close();
		await full.close();
	} finally {
		for (const s of servers) {
			s.cli('SHUTDOWN', 'NOSAVE');
			fs.rmSync(s.dir, { recursive: true, force: true });
		}
	}
}

async function builtin() {
	const { SqliteLedger } = require('../dist/lib/ledger');
	const { DatabaseSync } = require('node:sqlite');
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'idem-scale-builtin-'));
	try {
		const empty = new SqliteLedger({ file: path.join(dir, 'empty.sqlite') });
		const fullFile = path.join(dir, 'full.sqlite');
		const full = new SqliteLedger({ file: fullFile });
		await empty.ensureSchema();
		await full.ensureSchema();
		const rows = fillRows('builtin');
		const db = new DatabaseSync(fullFile, { timeout: 10_000 });
		const started = Date.now();
		const columns = db.prepare('PRAGMA table_info(ledger)').all().map((c) => c.name);
		const valueOf = { namespace: "'ns-' || (g % 50)", key: "'evt_' || g", step: "CASE WHEN g % 3 = 0 THEN 'send' ELSE '' END", status: "'completed'", expires_at: `${Date.now() + 30 * DAY}`, first_seen_at: `${Date.now()}`, updated_at: `${Date.now()}`, attempts: '1', fence: 'g' };
		const used = columns.filter((c) => c in valueOf);
		db.exec(`WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < ${rows}) INSERT INTO ledger (${used.join(', ')}) SELECT ${used.map((c) => valueOf[c]).join(', ')} FROM s`);
		db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
		db.close();
		const bytes = fs.statSync(fullFile).size;
		console.log(`Built-in: filled ${rows.toLocaleString('en')} rows in ${((Date.now() - started) / 1000).toFixed(0)} s, file ${(bytes / 1e6).toFixed(0)} MB`);
		await compare('Built-in (SQLite)', empty, full, rows, bytes / rows);
		await empty.close();
		await full.close();
	} finally {
		fs.rmSync(dir, { recursive: true, force: true });
	}
}

(async () => {
	console.log(`bench:scale on Node ${process.versions.node}, ${os.cpus().length} cores, ${new Date().toISOString()}`);
	if (BACKENDS.includes('postgres')) await postgres();
	if (BACKENDS.includes('redis')) await redis();
	if (BACKENDS.includes('builtin')) {
		if (hasSqlite()) await builtin();
		// node:sqlite is in Node 22.13 and later: the Built-in part reruns on Node 24.
		else spawnSync(nodeWithSqlite(), [__filename], { stdio: 'inherit', env: { ...process.env, SCALE_BACKENDS: 'builtin' } });
	}
})().catch((error) => {
	console.error(error);
	process.exit(1);
});
