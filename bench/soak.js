// npm run bench:soak: weeks of traffic in minutes. A steady stream of new rows with a short
// retention, through the ledgers as the nodes open them (postgresLedger, redisLedger,
// sqliteLedger: their own background purge, nobody running Purge Expired), for as long as you
// set. Each execution carries SOAK_BATCH items, as a trigger that hands over several items does;
// for its items it makes a Dedupe Gate claim of new keys (a row per item), a step claim and a
// record of those steps done (a row per item) and Prompt Cache entries: a read, a claim and the
// answers stored (a row per item). So rows/s is three times items/s, and each execution makes six
// ledger calls whatever its size. Every sample it prints live rows, expired rows waiting (the most
// seen in the sample, read every second; on Redis: claim notes not yet indexed and index entries of
// rows gone), size (table and indexes, the file, or Redis used memory) and the p50 / p99 of the
// gate's claim (of SOAK_BATCH keys); at the end it writes a chart of those figures to
// docs/soak-<backend>.svg and prints the table.
//
//   SOAK_BACKEND   postgres | redis | builtin        (default postgres)
//   SOAK_RATE      new rows per second, all processes (default 1000)
//   SOAK_MINUTES   how long                          (default 30)
//   SOAK_RETENTION seconds a row is kept             (default 60)
//   SOAK_PROCESSES processes sharing the ledger      (default 1; 2 is queue mode's case)
//   SOAK_SAMPLE    seconds between samples           (default 60)
//   SOAK_BATCH     items per execution               (default 10; 1 is the one-item webhook)
//
// PostgreSQL: a throwaway cluster of the machine's PostgreSQL binaries with their stock settings
// (autovacuum on, fsync on), as a real install has them; SOAK_DATABASE_URL uses a server you give
// instead. (The CI machine's own server runs with autovacuum off, and on such a server no
// PostgreSQL table that rows are deleted from reuses the space: the size would grow whatever the
// ledger deletes.) Redis: a throwaway redis-server with AOF on and no eviction (what the nodes
// require), so its used memory is the ledger's alone. The Built-in part needs node:sqlite (Node 22.13+).
const { fork } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const env = (name, fallback) => (process.env[name] === undefined || process.env[name] === '' ? fallback : process.env[name]);
const BACKEND = env('SOAK_BACKEND', 'postgres');
const RATE = Number(env('SOAK_RATE', 1000));
const MINUTES = Number(env('SOAK_MINUTES', 30));
const RETENTION_S = Number(env('SOAK_RETENTION', 60));
const PROCESSES = Number(env('SOAK_PROCESSES', 1));
const SAMPLE_S = Number(env('SOAK_SAMPLE', 60));
const BATCH = Number(env('SOAK_BATCH', 10));
/**
 * Seconds between readings of what waits to be purged; a sample reports the most it saw. Once a
 * second, not every 5 s: a turn comes every 10 s and a few ms more, so 5-s readings drift through
 * the sawtooth and land near its top for minutes, then near its middle (a 30-minute Built-in run
 * read about 5,500 for 17 minutes, then 9,800, with nothing else changed).
 */
const PEEK_S = 1;
const ROWS_PER_EVENT = 3;
const TICK_MS = 50;
/** Executions one process keeps in flight at most; past it one is skipped and counted as behind. */
const MAX_IN_FLIGHT = 200;

const { dropLedgerTables, hasSqlite, nodeWithSqlite, percentile: sortedPercentile } = require('./util');

const percentile = (xs, p) => (xs.length ? sortedPercentile(xs, p) : NaN);

// ---------------------------------------------------------------- worker: one n8n process's traffic

async function worker(config) {
	const ledger = openLedger(config);
	await ledger.ensureSchema();
	const ttlMs = config.retentionS * 1000;
	const seen = { mode: 'seen', holder: `soak-${process.pid}`, leaseMs: 0, ttlMs };
	const lease = { mode: 'lease', holder: `soak-${process.pid}`, leaseMs: 30_000, ttlMs };
	const answer = { v: 1, response: { text: 'x'.repeat(400) }, tokens: 120, model: 'gpt-4o-mini' };
	let n = 0;
	let inFlight = 0;
	let behind = 0;
	let rows = 0;
	let errors = 0;
	let latencies = [];
	const fenced = (outcomes, rows) => rows.flatMap((row, i) => (outcomes[i].kind === 'claimed' ? [{ ...row, fence: outcomes[i].record.fence }] : []));
	const execution = async () => {
		const ids = Array.from({ length: config.batch }, () => `${process.pid}-${n++}`);
		const started = process.hrtime.bigint();
		await ledger.claim(ids.map((id) => ({ namespace: 'soak-gate', key: `evt-${id}`, step: '', fingerprint: null })), seen);
		latencies.push(Number(process.hrtime.bigint() - started) / 1e6);
		const steps = ids.map((id) => ({ namespace: 'soak-steps', key: `evt-${id}`, step: 'send' }));
		const claimedSteps = fenced(await ledger.claim(steps.map((r) => ({ ...r, fingerprint: null })), lease), steps);
		await ledger.record(claimedSteps.map((r) => ({ ...r, status: 'completed' })), { ttlMs });
		const entries = ids.map((id) => ({ namespace: 'soak-cache', key: `prompt-${id}`, step: 'prompt-cache' }));
		await ledger.peek(entries);
		const claimedEntries = fenced(await ledger.claim(entries.map((r) => ({ ...r, fingerprint: null })), lease), entries);
		await ledger.record(claimedEntries.map((r) => ({ ...r, status: 'completed', result: answer })), { ttlMs });
		rows += ROWS_PER_EVENT * config.batch;
	};
	const perMs = config.rate / config.processes / ROWS_PER_EVENT / config.batch / 1000;
	let owed = 0;
	let last = Date.now();
	// Owed by the clock, not by ticks: a tick that comes late (the event loop busy, as it is with
	// the Built-in ledger's synchronous calls) must not lower the rate.
	const ticker = setInterval(() => {
		const now = Date.now();
		owed += perMs * (now - last);
		last = now;
		while (owed >= 1) {
			owed -= 1;
			if (inFlight >= MAX_IN_FLIGHT) {
				behind++;
				continue;
			}
			inFlight++;
			execution()
				.catch(() => errors++)
				.finally(() => inFlight--);
		}
	}, TICK_MS);
	const reporter = setInterval(() => {
		process.send({ latencies, rows, behind, errors });
		latencies = [];
		rows = 0;
		behind = 0;
		errors = 0;
	}, 1000);
	process.on('message', async (message) => {
		if (message !== 'stop') return;
		clearInterval(ticker);
		clearInterval(reporter);
		process.send({ latencies, rows, behind, errors });
		await ledger.close().catch(() => undefined);
		process.exit(0);
	});
}

function openLedger(config) {
	const ledgers = require('../dist/lib/ledger');
	if (config.backend === 'postgres') return ledgers.postgresLedger(config.postgres);
	if (config.backend === 'redis') return ledgers.redisLedger(config.redis);
	return ledgers.sqliteLedger({ file: config.file });
}

// ---------------------------------------------------------------- parent: the storage, sampled

async function storage(config) {
	if (config.backend === 'postgres') {
		const { Pool } = require('pg');
		const pool = new Pool({ connectionString: config.url, max: 1 });
		const table = config.postgres.table;
		return {
			async sample() {
				const { rows } = await pool.query(
					`SELECT count(*) FILTER (WHERE expires_at > now())::int AS live, count(*) FILTER (WHERE expires_at <= now())::int AS waiting,
					 pg_total_relation_size('public.${table}')::bigint AS bytes FROM public.${table}`,
				);
				return { live: rows[0].live, waiting: rows[0].waiting, bytes: Number(rows[0].bytes) };
			},
			async close() {
				await dropLedgerTables(pool, table);
				await pool.end();
			},
		};
	}
	if (config.backend === 'redis') {
		const { Redis } = require('ioredis');
		const { namespaceKeys } = require('../dist/lib/ledger/redis/keys');
		const client = new Redis({ port: config.redis.port, host: '127.0.0.1' });
		const namespaces = ['soak-gate', 'soak-steps', 'soak-cache'].map((ns) => namespaceKeys(config.redis.prefix, ns));
		const countRows = async (base) => {
			let n = 0;
			let cursor = '0';
			do {
				const [next, keys] = await client.scan(cursor, 'MATCH', `${base}r:*`, 'COUNT', 5000);
				n += keys.length;
				cursor = next;
			} while (cursor !== '0');
			return n;
		};
		return {
			async sample() {
				let live = 0;
				let waiting = 0;
				for (const k of namespaces) {
					const [rows, notes, listed] = await Promise.all([countRows(k.base), client.llen(k.unindexed), client.zcard(k.fixed[0])]);
					live += rows;
					waiting += notes + Math.max(0, listed - rows);
				}
				const info = await client.info('memory');
				return { live, waiting, bytes: Number(/used_memory:(\d+)/.exec(info)[1]) };
			},
			async close() {
				client.disconnect();
			},
		};
	}
	const { DatabaseSync } = require('node:sqlite');
	const db = new DatabaseSync(config.file, { timeout: 10_000, readOnly: true });
	const size = (f) => (fs.existsSync(f) ? fs.statSync(f).size : 0);
	return {
		async sample() {
			const now = Date.now();
			const row = db.prepare('SELECT sum(expires_at > ?) AS live, sum(expires_at <= ?) AS waiting FROM ledger').get(now, now);
			return { live: Number(row.live ?? 0), waiting: Number(row.waiting ?? 0), bytes: size(config.file) + size(`${config.file}-wal`) };
		},
		async close() {
			db.close();
		},
	};
}

async function setUp() {
	const stamp = Date.now().toString(36);
	const config = { backend: BACKEND, rate: RATE, retentionS: RETENTION_S, processes: PROCESSES, batch: BATCH };
	let stop = () => undefined;
	if (BACKEND === 'postgres') {
		const server = process.env.SOAK_DATABASE_URL ? null : await stockPostgres();
		if (server) stop = server.stop;
		const url = new URL(process.env.SOAK_DATABASE_URL || server.url);
		config.url = url.toString();
		config.postgres = {
			host: url.hostname,
			port: Number(url.port || 5432),
			database: url.pathname.slice(1),
			user: decodeURIComponent(url.username),
			password: decodeURIComponent(url.password),
			ssl: 'disable',
			schema: 'public',
			table: `soak_${stamp}`,
			poolSize: 10,
		};
	} else if (BACKEND === 'redis') {
		const { execFileSync, spawnSync } = require('child_process');
		const { serverPort } = require('../test/support/ports');
		const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'idem-soak-redis-'));
		const port = await serverPort();
		execFileSync('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--daemonize', 'yes', '--dir', dir, '--logfile', path.join(dir, 'redis.log'), '--appendonly', 'yes', '--maxmemory-policy', 'noeviction']);
		const cli = (...args) => spawnSync('redis-cli', ['-p', String(port), ...args], { encoding: 'utf8' }).stdout.trim();
		for (let i = 0; i < 100 && cli('PING') !== 'PONG'; i++) await new Promise((r) => setTimeout(r, 100));
		config.redis = { host: '127.0.0.1', port, db: 0, tls: false, prefix: `soak-${stamp}`, cluster: false };
		stop = () => {
			cli('SHUTDOWN', 'NOSAVE');
			fs.rmSync(dir, { recursive: true, force: true });
		};
	} else if (BACKEND === 'builtin') {
		const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'idem-soak-builtin-'));
		config.file = path.join(dir, 'ledger.sqlite');
		stop = () => fs.rmSync(dir, { recursive: true, force: true });
	} else {
		throw new Error(`SOAK_BACKEND must be postgres, redis or builtin, not ${BACKEND}`);
	}
	return { config, stop };
}

/** A PostgreSQL cluster of its own with the machine's binaries and their default settings; as root, run as the postgres user. */
async function stockPostgres() {
	const { execFileSync, spawn } = require('child_process');
	const { serverPort } = require('../test/support/ports');
	const versions = fs.existsSync('/usr/lib/postgresql') ? fs.readdirSync('/usr/lib/postgresql').sort((a, b) => Number(b) - Number(a)) : [];
	if (!versions.length) throw new Error('no PostgreSQL binaries in /usr/lib/postgresql: set SOAK_DATABASE_URL');
	const bin = `/usr/lib/postgresql/${versions[0]}/bin`;
	const asRoot = process.getuid?.() === 0;
	const ids = asRoot ? { uid: Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' })), gid: Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' })) } : {};
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'idem-soak-pg-'));
	if (asRoot) fs.chownSync(dir, ids.uid, ids.gid);
	execFileSync(`${bin}/initdb`, ['-D', dir, '--auth=trust', '--username=postgres', '--encoding=UTF8', '--locale=C'], { ...ids, stdio: 'ignore' });
	const port = await serverPort();
	const postmaster = spawn(`${bin}/postgres`, ['-D', dir, '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1'], { ...ids, stdio: 'ignore' });
	const { Client } = require('pg');
	for (let i = 0; i < 100; i++) {
		const client = new Client({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres' });
		try {
			await client.connect();
			await client.end();
			break;
		} catch {
			await new Promise((r) => setTimeout(r, 100));
		}
	}
	return {
		url: `postgres://postgres@127.0.0.1:${port}/postgres`,
		stop: async () => {
			const exited = new Promise((r) => postmaster.once('exit', r));
			postmaster.kill('SIGINT');
			await exited;
			fs.rmSync(dir, { recursive: true, force: true });
		},
	};
}

const mb = (bytes) => `${(bytes / 1048576).toFixed(1)} MB`;

async function main() {
	const { config, stop } = await setUp();
	const label = `${BACKEND}${PROCESSES > 1 ? ` × ${PROCESSES} processes` : ''}`;
	console.log(`soak: ${label}, ${RATE} new rows/s in executions of ${BATCH} items, retention ${RETENTION_S} s, ${MINUTES} min, a sample every ${SAMPLE_S} s (Node ${process.versions.node}, ${os.cpus().length} cores)`);
	const children = Array.from({ length: PROCESSES }, () => fork(__filename, ['--worker', JSON.stringify(config)], { stdio: 'inherit' }));
	let window = { latencies: [], rows: 0, behind: 0, errors: 0 };
	for (const child of children) {
		child.on('message', (m) => {
			for (const l of m.latencies) window.latencies.push(l);
			window.rows += m.rows;
			window.behind += m.behind;
			window.errors += m.errors;
		});
	}
	await new Promise((r) => setTimeout(r, 2000));
	const store = await storage(config);
	const samples = [];
	const started = Date.now();
	console.log('| minute | rows/s | live rows | expired waiting (most) | size | gate claim p50 | gate claim p99 | behind | errors |\n|---|---|---|---|---|---|---|---|---|');
	while (Date.now() - started < MINUTES * 60_000) {
		// Expired rows come and go in a sawtooth with the purge turns (one every 10 s): one reading a
		// sample would say where in the tooth it fell. Read every PEEK_S and keep the highest.
		const end = Date.now() + SAMPLE_S * 1000;
		let reading = await store.sample();
		let waiting = reading.waiting;
		while (Date.now() < end) {
			await new Promise((r) => setTimeout(r, Math.min(PEEK_S * 1000, Math.max(0, end - Date.now()))));
			reading = await store.sample();
			waiting = Math.max(waiting, reading.waiting);
		}
		const { latencies, rows, behind, errors } = window;
		window = { latencies: [], rows: 0, behind: 0, errors: 0 };
		latencies.sort((a, b) => a - b);
		const s = { minute: (Date.now() - started) / 60_000, rate: rows / SAMPLE_S, ...reading, waiting, p50: percentile(latencies, 50), p99: percentile(latencies, 99), behind, errors };
		samples.push(s);
		console.log(`| ${s.minute.toFixed(1)} | ${Math.round(s.rate)} | ${s.live} | ${s.waiting} | ${mb(s.bytes)} | ${s.p50.toFixed(2)} ms | ${s.p99.toFixed(2)} ms | ${behind} | ${errors} |`);
	}
	for (const child of children) child.send('stop');
	await Promise.all(children.map((c) => new Promise((r) => c.once('exit', r))));
	await store.close();
	await stop();
	const file = path.join(__dirname, '..', 'docs', `soak-${BACKEND}${PROCESSES > 1 ? `-x${PROCESSES}` : ''}.svg`);
	fs.writeFileSync(file, chart(samples, `${label}: ${RATE} rows/s, retention ${RETENTION_S} s`));
	console.log(`chart: ${path.relative(process.cwd(), file)}`);
	console.log(verdict(samples));
}

/** The issue's checks, when the run is long enough to have them: second third against the last, and p99 at the end against minute 5. */
function verdict(samples) {
	const third = Math.floor(samples.length / 3);
	if (third < 1) return 'too short for a verdict (needs 3 samples)';
	const mean = (xs, f) => xs.reduce((a, s) => a + f(s), 0) / xs.length;
	const middle = samples.slice(third, 2 * third);
	const last = samples.slice(2 * third);
	const grow = (f) => mean(last, f) / Math.max(1, mean(middle, f));
	const early = samples[Math.min(samples.length - 1, Math.max(0, Math.round(5 * 60 / SAMPLE_S) - 1))];
	const end = samples[samples.length - 1];
	return `last third against the middle third: expired waiting ×${grow((s) => s.waiting).toFixed(2)}, size ×${grow((s) => s.bytes).toFixed(2)}; claim p99 at the end ${end.p99.toFixed(2)} ms against ${early.p99.toFixed(2)} ms at minute ${early.minute.toFixed(0)} (×${(end.p99 / early.p99).toFixed(2)})`;
}

/** Four small line charts, one per figure, as a self-contained SVG. */
function chart(samples, title) {
	const panels = [
		['live rows', (s) => s.live, (v) => Math.round(v).toLocaleString('en')],
		['expired rows waiting', (s) => s.waiting, (v) => Math.round(v).toLocaleString('en')],
		['size (MB)', (s) => s.bytes / 1048576, (v) => v.toFixed(1)],
		['gate claim p99 (red), p50 (blue), ms', (s) => s.p99, (v) => v.toFixed(1), (s) => s.p50],
	];
	const W = 360;
	const H = 150;
	const pad = 40;
	const maxMinute = Math.max(1, ...samples.map((s) => s.minute));
	const parts = [`<svg xmlns="http://www.w3.org/2000/svg" width="${2 * W + 20}" height="${2 * H + 60}" font-family="sans-serif" font-size="11">`, `<text x="10" y="18" font-size="13" font-weight="bold">${title}</text>`];
	panels.forEach(([name, f, fmt, g], i) => {
		const x0 = 10 + (i % 2) * (W + 10);
		const y0 = 30 + Math.floor(i / 2) * (H + 15);
		const max = Math.max(1e-9, ...samples.map(f), ...(g ? samples.map(g) : []));
		const px = (s) => x0 + pad + ((s.minute / maxMinute) * (W - pad - 10));
		const py = (v) => y0 + H - 20 - (v / max) * (H - 40);
		const line = (fn, colour) => `<polyline fill="none" stroke="${colour}" stroke-width="1.5" points="${samples.map((s) => `${px(s).toFixed(1)},${py(fn(s)).toFixed(1)}`).join(' ')}"/>`;
		parts.push(
			`<rect x="${x0}" y="${y0}" width="${W}" height="${H}" fill="#fafafa" stroke="#ccc"/>`,
			`<text x="${x0 + 6}" y="${y0 + 14}">${name}</text>`,
			`<text x="${x0 + 4}" y="${py(max) + 4}" fill="#666">${fmt(max)}</text>`,
			`<text x="${x0 + 4}" y="${py(0)}" fill="#666">0</text>`,
			`<text x="${x0 + W - 60}" y="${y0 + H - 5}" fill="#666">${maxMinute.toFixed(0)} min</text>`,
			`<line x1="${x0 + pad}" y1="${py(0)}" x2="${x0 + W - 10}" y2="${py(0)}" stroke="#999"/>`,
			line(f, '#c0392b'),
			...(g ? [line(g, '#2471a3')] : []),
		);
	});
	parts.push('</svg>');
	return parts.join('\n');
}

if (BACKEND === 'builtin' && !hasSqlite()) {
	// node:sqlite is in Node 22.13 and later: on an older Node the Built-in soak reruns itself on Node 24.
	const node = nodeWithSqlite();
	if (!node) throw new Error('the Built-in soak needs Node 22.13+ (scripts/n8n-runtime.sh node printed none)');
	process.exit(require('child_process').spawnSync(node, [__filename, ...process.argv.slice(2)], { stdio: 'inherit' }).status ?? 1);
} else if (process.argv[2] === '--worker') {
	worker(JSON.parse(process.argv[3])).catch((error) => {
		console.error(error);
		process.exit(1);
	});
} else {
	main().catch((error) => {
		console.error(error);
		process.exit(1);
	});
}
