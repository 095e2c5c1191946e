// npm run bench:drain: what draining a backlog costs the claims that go on meanwhile. Through the
// ledgers as the nodes open them (postgresLedger, redisLedger: their own background purge), in one
// run: one-key claims at a steady pace on a ledger with nothing to purge (before), then the same
// while the ledger drains a backlog of expired rows an older version left (on Redis: the
// bookkeeping of rows that expired), then again once it is gone (after). Prints p50 / p99 of each
// phase, how long the drain took, and p99 during the drain over p99 before and after.
//
//   DRAIN_BACKENDS postgres,redis  (default both)
//   DRAIN_BACKLOG  expired rows    (default 1,000,000)
//   DRAIN_PACE     claims a second (default 200)
const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync, spawnSync } = require('child_process');
const { Pool } = require('pg');
const { Redis } = require('ioredis');
const { postgresLedger, redisLedger, RedisLedger, closeAllPostgresLedgers, closeAllRedisLedgers } = require('../dist/lib/ledger');
const { namespaceKeys } = require('../dist/lib/ledger/redis/keys');
const { serverPort } = require('../test/support/ports');

const BACKENDS = (process.env.DRAIN_BACKENDS || 'postgres,redis').split(',');
const BACKLOG = Number(process.env.DRAIN_BACKLOG || 1_000_000);
const PACE = Number(process.env.DRAIN_PACE || 200);
const PHASE_CLAIMS = 3000;
const { dropLedgerTables, percentile: pct } = require('./util');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** One-key claims of new keys at PACE a second until `done()` (or `count` claims); their latencies. */
async function claimsAtPace(ledger, label, { count = Infinity, done = () => false } = {}) {
	const latencies = [];
	const started = Date.now();
	for (let i = 0; i < count && !(await done()); i++) {
		const t = process.hrtime.bigint();
		await ledger.claim([{ namespace: 'drain', key: `${label}-${i}`, step: '', fingerprint: null }], { mode: 'seen', holder: 'b', leaseMs: 0, ttlMs: 3_600_000 });
		latencies.push(Number(process.hrtime.bigint() - t) / 1e6);
		const due = started + ((i + 1) * 1000) / PACE;
		if (due > Date.now()) await sleep(due - Date.now());
	}
	return latencies;
}

async function postgresSubject() {
	const url = new URL(process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test');
	const table = `drain_${Date.now().toString(36)}`;
	const settings = { host: url.hostname, port: Number(url.port || 5432), database: url.pathname.slice(1), user: decodeURIComponent(url.username), password: decodeURIComponent(url.password), ssl: 'disable', schema: 'public', table, poolSize: 10 };
	const pool = new Pool({ connectionString: url.toString(), max: 2 });
	const ledger = postgresLedger(settings);
	await ledger.ensureSchema();
	return {
		ledger,
		async seed() {
			await pool.query(`INSERT INTO public.${table} (namespace, key, step, status, expires_at, first_seen_at, updated_at)
				SELECT 'backlog', 'old-' || g, '', 'completed', now() - interval '1 minute', now() - interval '2 minutes', now() - interval '2 minutes' FROM generate_series(1, $1) g`, [BACKLOG]);
			await pool.query(`VACUUM ANALYZE public.${table}`);
		},
		async waiting() {
			return (await pool.query(`SELECT count(*)::int AS n FROM public.${table} WHERE expires_at <= now()`)).rows[0].n;
		},
		async close() {
			await closeAllPostgresLedgers();
			await dropLedgerTables(pool, table);
			await pool.end();
		},
	};
}

async function redisSubject() {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'idem-drain-redis-'));
	const port = await serverPort();
	execFileSync('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--daemonize', 'yes', '--dir', dir, '--logfile', path.join(dir, 'redis.log'), '--appendonly', 'yes', '--maxmemory-policy', 'noeviction']);
	const cli = (...args) => spawnSync('redis-cli', ['-p', String(port), ...args], { encoding: 'utf8' }).stdout.trim();
	for (let i = 0; i < 100 && cli('PING') !== 'PONG'; i++) await sleep(100);
	const prefix = 'drain';
	const ledger = redisLedger({ host: '127.0.0.1', port, db: 0, tls: false, prefix, cluster: false });
	await ledger.ensureSchema();
	const client = new Redis({ port });
	const k = namespaceKeys(prefix, 'backlog');
	return {
		ledger,
		async seed() {
			// Through a ledger with no background purge, as an older version wrote: a note per claim call.
			const old = new RedisLedger({ client: new Redis({ port }), prefix });
			for (let call = 0; call < BACKLOG / 100; call++) {
				await old.claim(Array.from({ length: 100 }, (_, i) => ({ namespace: 'backlog', key: `old-${call}-${i}`, step: '', fingerprint: null })), { mode: 'seen', holder: 'b', leaseMs: 0, ttlMs: 1 });
			}
			await old.close();
			// The rows expired at once; Redis deletes such keys itself in its own expiry cycles, which
			// cost claims their own pauses. Those are Redis's, not the ledger's: wait until they are done.
			for (let i = 0; i < 600 && Number(/db0:keys=(\d+)/.exec(cli('INFO', 'keyspace'))?.[1] ?? 0) > 3 * PHASE_CLAIMS + 100; i++) await sleep(500);
		},
		// Claim notes still to index, and index entries whose row is gone.
		async waiting() {
			const [notes, listed] = await Promise.all([client.llen(k.unindexed), client.zcard(k.fixed[0])]);
			return notes + listed;
		},
		async close() {
			client.disconnect();
			await closeAllRedisLedgers();
			cli('SHUTDOWN', 'NOSAVE');
			fs.rmSync(dir, { recursive: true, force: true });
		},
	};
}

async function measure(name, open) {
	const s = await open();
	try {
		const before = await claimsAtPace(s.ledger, 'before', { count: PHASE_CLAIMS });
		await s.seed();
		const backlog = await s.waiting();
		const started = Date.now();
		let lastCheck = 0;
		let left = backlog;
		const during = await claimsAtPace(s.ledger, 'during', {
			done: async () => {
				if (Date.now() - lastCheck < 1000) return false;
				lastCheck = Date.now();
				left = await s.waiting();
				return left === 0 || Date.now() - started > 10 * 60_000;
			},
		});
		const drainS = (Date.now() - started) / 1000;
		const after = await claimsAtPace(s.ledger, 'after', { count: PHASE_CLAIMS });
		const row = (label, xs) => `| ${label} | ${xs.length} | ${pct(xs, 50).toFixed(2)} ms | ${pct(xs, 99).toFixed(2)} ms |`;
		const what = name === 'Redis' ? `${BACKLOG.toLocaleString('en')} expired rows' bookkeeping (${backlog.toLocaleString('en')} claim notes and index entries)` : `${backlog.toLocaleString('en')} expired rows`;
		console.log(`\n### ${name}: a backlog of ${what}, one-key claims at ${PACE}/s`);
		console.log('| phase | claims | p50 | p99 |\n|---|---|---|---|');
		console.log(row('before (nothing to purge)', before));
		console.log(row(`during the drain (${drainS.toFixed(0)} s${left ? `, ${left} left when it stopped` : ''})`, during));
		console.log(row('after', after));
		const quiet = Math.max(pct(before, 99), pct(after, 99));
		console.log(`p99 during the drain / the larger of before and after: ${(pct(during, 99) / quiet).toFixed(2)}`);
	} finally {
		await s.close();
	}
}

(async () => {
	console.log(`bench:drain on Node ${process.versions.node}, ${os.cpus().length} cores, ${new Date().toISOString()}`);
	if (BACKENDS.includes('postgres')) await measure('PostgreSQL', postgresSubject);
	if (BACKENDS.includes('redis')) await measure('Redis', redisSubject);
})().catch((error) => {
	console.error(error);
	process.exit(1);
});
