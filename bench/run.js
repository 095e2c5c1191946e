// npm run bench — in one process, against the real PostgreSQL and Redis:
// 1. claim throughput on PostgreSQL: raw SQL baseline (INSERT ... ON CONFLICT DO NOTHING over
//    unnest, one statement), the ledger's claim, and the Dedupe Gate node's execute(), for 10,000
//    distinct keys (first sight) and the same 10,000 again (all duplicates); median of runs,
//    the scenarios taking turns within each round;
// 1b. one-key claims, new and duplicate, beside a one-row INSERT … ON CONFLICT and SELECT 1 (bench/oneKey.js);
// 2. the same claim on Redis beside pipelined SET NX, then on a Redis Cluster (REDIS_CLUSTER_NODES,
//    else three throwaway nodes of this machine's redis-server, as the test setup starts them);
// 3. Prompt Cache lookup latency (p50, p99 over 10,000 one-item lookups) on both backends (on a
//    throwaway AOF redis-server when the Redis given can lose keys: bench/safeRedis.js),
//    beside a primary-key SELECT / a GET;
// 2b. the Built-in ledger (SQLite) beside the PostgreSQL gate of the same rounds (bench/builtin.js,
//    on Node 24 in a child when this Node has no node:sqlite);
// 2c. bytes allocated by the gate's execute() and the bare claim (bench/allocation.js, in a child);
// 4. a cache hit through Prompt Cache Chat Model (p50, p99 over 2,000 model.invoke() calls),
//    beside the model's own call to an OpenAI-compatible stand-in on loopback.
const { Pool } = require('pg');
const { Redis } = require('ioredis');
const { redisSection } = require('./redis');
const { startRedisCluster, stopRedisCluster } = require('../test/support/redisCluster');
const { parseClusterNodes } = require('../dist/lib/ledger/redis/connect');
const { safeRedisFor } = require('./safeRedis');
const { lookupLatency, latencyRows } = require('./promptCache');
const { chatModelLatency } = require('./chatModelCache');
const { DEFAULT_RUNS, roundRobin, time, ledgerCredentials, dropLedgerTables, hasSqlite, nodeWithSqlite } = require('./util');
const { PostgresLedger, postgresLedger, closeAllPostgresLedgers } = require('../dist/lib/ledger');
const { DedupeGate } = require('../dist/nodes/DedupeGate/DedupeGate.node');

const N = Number(process.env.BENCH_KEYS || 10_000);
const RUNS = Number(process.env.BENCH_RUNS || DEFAULT_RUNS);
const url = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test';
const suffix = Date.now().toString(36);
const table = `bench_${suffix}`;

const LOOKUPS = Number(process.env.BENCH_LOOKUPS || 10_000);
const redisUrl = process.env.REDIS_URL || 'redis://127.0.0.1:6379';

const fmt = (ms) => `${Math.round(N / (ms / 1000)).toLocaleString('en-US')}/s (${ms.toFixed(1)} ms)`;
const fmtRow = (r) => `| ${r.name} | ${fmt(r.first)} | ${r.firstRatio.toFixed(2)} | ${fmt(r.dup)} | ${r.dupRatio.toFixed(2)} | ${r.trips} |`;

function printRedis(section, what) {
	if (Array.isArray(section)) return console.log(`\n${section.join('\n')}`);
	console.log(
		[
			'',
			`${what} ${section.version}, same keys and runs; ratios to pipelined SET NX:`,
			'',
			'| scenario | first sight | ratio to SET NX | all duplicates | ratio to SET NX | round trips (10k) |',
			'|---|---|---|---|---|---|',
			...section.rows.map(fmtRow),
		].join('\n'),
	);
}

async function main() {
	const pool = new Pool({ connectionString: url, max: 4 });
	const baselineTable = `${table}_raw`;
	await pool.query(`CREATE TABLE ${baselineTable} (namespace text, key text, step text, PRIMARY KEY (namespace, key, step))`);
	const credentials = ledgerCredentials(url, table);
	const gateLedger = postgresLedger(credentials);
	await gateLedger.ensureSchema();
	const ledger = new PostgresLedger({ pool, table });
	await ledger.ensureSchema();
	const gate = new DedupeGate();

	const keys = (ns) => Array.from({ length: N }, (_, i) => `evt_${ns}_${i}`);
	const scenarios = {
		'raw SQL: INSERT ... ON CONFLICT DO NOTHING (unnest)': async (ns) => {
			const k = keys(ns);
			const trips = [];
			const once = () => pool.query(
				`INSERT INTO ${baselineTable} (namespace, key, step) SELECT * FROM unnest($1::text[], $2::text[], $3::text[]) ON CONFLICT DO NOTHING`,
				[k.map(() => ns), k, k.map(() => '')],
			);
			return { first: await time(once), dup: await time(once), trips: 1 };
		},
		'ledger.claim (mark seen)': async (ns) => {
			const requests = keys(ns).map((key) => ({ namespace: ns, key, step: '', fingerprint: null }));
			const opts = { mode: 'seen', holder: 'bench', leaseMs: 0, ttlMs: 86_400_000 };
			const before = ledger.roundTrips;
			const first = await time(() => ledger.claim(requests, opts));
			const trips = ledger.roundTrips - before;
			return { first, dup: await time(() => ledger.claim(requests, opts)), trips };
		},
		'ledger.claim (lease)': async (ns) => {
			const requests = keys(ns).map((key) => ({ namespace: ns, key, step: '', fingerprint: null }));
			const opts = { mode: 'lease', holder: 'bench', leaseMs: 600_000, ttlMs: 86_400_000 };
			const before = ledger.roundTrips;
			const first = await time(() => ledger.claim(requests, opts));
			const trips = ledger.roundTrips - before;
			return { first, dup: await time(() => ledger.claim(requests, opts)), trips };
		},
		'Dedupe Gate execute() (field "id", lease)': async (ns) => {
			const before = gateLedger.roundTrips;
			let trips = 0;
			const times = await deliveryAndRepeat(gate, { parameters: { mode: 'lease' }, credentials, namespace: ns, n: N, afterFirst: () => (trips = gateLedger.roundTrips - before) });
			return { ...times, trips };
		},
	};

	const rows = await roundRobin(Object.entries(scenarios), RUNS);

	// The webhook case: one item, after warm-up. How many ledger round trips does it add?
	const one = nodeContext(gate, { parameters: { keySource: 'field', keyField: 'id', mode: 'lease', options: { namespace: `one_${suffix}` } }, items: [{ json: { id: 'evt_single' } }], credentials, executionEnds: true });
	const before = gateLedger.roundTrips;
	await gate.execute.call(one);
	const oneItemTrips = gateLedger.roundTrips - before;
	await endExecution(one);

	const lines = [
		`Keys per run: ${N}; median of ${RUNS} runs (ratios: median of each round's ratio); PostgreSQL ${(await pool.query('SHOW server_version')).rows[0].server_version}; Node ${process.version}`,
		'',
		'| scenario | first sight | ratio to raw SQL | all duplicates | ratio to raw SQL | round trips (10k) |',
		'|---|---|---|---|---|---|',
		...rows.map(fmtRow),
		'',
		`One-item execution (the webhook case), warm: the gate made ${oneItemTrips} ledger round trip(s).`,
	];
	console.log(lines.join('\n'));
	console.log(`\n${(await oneKeyRows({ pool, ledger })).join('\n')}`);

	printRedis(await redisSection({ N, RUNS, url: redisUrl }), 'Redis');

	// The same on a Redis Cluster: REDIS_CLUSTER_NODES, else three throwaway nodes of this machine's redis-server.
	const cluster = await startRedisCluster();
	try {
		const nodes = parseClusterNodes(process.env.REDIS_CLUSTER_NODES);
		if (nodes.length === 0) console.log('\nRedis Cluster section SKIPPED: no REDIS_CLUSTER_NODES, and no redis-server here to start one.');
		else printRedis(await redisSection({ N, RUNS, clusterNodes: nodes }), `Redis Cluster (${cluster ? 'three throwaway nodes' : 'REDIS_CLUSTER_NODES'}; one namespace's keys on one slot)`);
	} finally {
		stopRedisCluster(cluster);
	}

	console.log(`\n${builtinRows().join('\n')}`);

	// Bytes allocated by the gate and the bare claim: steadier than time (bench/allocation.js).
	console.log(`\n${require('child_process').execFileSync(process.execPath, ['--expose-gc', '--max-semi-space-size=128', require('path').join(__dirname, 'allocation.js')], { env: { ...process.env, DATABASE_URL: url }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim()}`);

	// Prompt Cache lookup latency.
	const latency = ['', `Prompt Cache Lookup, ${LOOKUPS} one-item executions that hit (${100} distinct prompts; key receipts on, savings counted with prices set; counters written off the answer path, batched), latency per execution:`, '', '| scenario | p50 | p99 | p50 vs baseline | p99 vs baseline |', '|---|---|---|---|---|'];
	const pgLookups = await lookupLatency({
		backend: 'postgres',
		credentials,
		lookups: LOOKUPS,
		baseline: (p) => pool.query(`SELECT result FROM ${table} WHERE namespace = $1 AND key = $2 AND step = $3`, ['x', `k${p}`, 'prompt-cache']),
	});
	latency.push(...latencyRows('Prompt Cache Lookup (PostgreSQL)', 'baseline: SELECT by primary key', pgLookups));
	const rc = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
	rc.on('error', () => undefined);
	const redisUp = await rc.connect().then(() => true, () => false);
	const safe = redisUp ? await safeRedisFor(rc, redisUrl) : null;
	if (safe) {
		const u = new URL(safe.url);
		const sc = safe.url === redisUrl ? rc : new Redis(safe.url);
		const prefix = `benchpc-${suffix}`;
		const redisLookups = await lookupLatency({
			backend: 'redis',
			credentials: { host: u.hostname, port: Number(u.port || 6379), password: decodeURIComponent(u.password), database: 0, prefix },
			lookups: LOOKUPS,
			baseline: (p) => sc.get(`${prefix}:bench:${p}`),
		});
		latency.push(...latencyRows('Prompt Cache Lookup (Redis)', 'baseline: GET', redisLookups));
		let cursor = '0';
		do {
			const [next, found] = await sc.scan(cursor, 'MATCH', `*${prefix}*`, 'COUNT', 1000);
			if (found.length) await sc.del(...found);
			cursor = next;
		} while (cursor !== '0');
		const { closeAllRedisLedgers } = require('../dist/lib/ledger');
		await closeAllRedisLedgers();
		if (sc !== rc) sc.disconnect();
		safe.stop();
		if (safe.note) latency.push('', `Note: ${safe.note}.`);
	} else latency.push(`| Prompt Cache Lookup (Redis) | SKIPPED: ${redisUp ? 'the Redis can lose keys and no redis-server is installed to start one that cannot' : 'no Redis reachable'} | | | |`);
	rc.disconnect();
	console.log(latency.join('\n'));

	// A cache hit through the Chat Model sub-node, beside the model itself on loopback.
	const CHAT_HITS = Number(process.env.BENCH_CHAT_HITS || 2000);
	const chat = await chatModelLatency({ backend: 'postgres', credentials, hits: CHAT_HITS });
	console.log(
		[
			'',
			`Prompt Cache Chat Model, ${CHAT_HITS} hits (${100} distinct prompts, one supplyData() per hit as per agent execution, savings counted): model.invoke() of one message, latency per call:`,
			'',
			'| scenario | p50 | p99 | p50 vs baseline | p99 vs baseline |',
			'|---|---|---|---|---|',
			...latencyRows('cache hit through Prompt Cache Chat Model (PostgreSQL)', 'baseline: the model itself, OpenAI-compatible stand-in on loopback', chat),
		].join('\n'),
	);

	await pool.query(`DROP TABLE IF EXISTS ${baselineTable}`);
	await dropLedgerTables(pool, table);
	await pool.end();
	await closeAllPostgresLedgers();
}

const { nodeContext, endExecution, deliveryAndRepeat } = require('./context');
const { oneKeyRows } = require('./oneKey');

/**
 * The Built-in ledger's table (bench/builtin.js). It needs node:sqlite (Node.js 22.13+): on an
 * older Node it runs in a child on the Node 24 that scripts/n8n-runtime.sh installs, and says so.
 */
function builtinRows() {
	const { execFileSync } = require('child_process');
	const path = require('path');
	const node = nodeWithSqlite();
	if (!node) return ['Built-in ledger: SKIPPED, no Node 22.13+ (scripts/n8n-runtime.sh node printed none)'];
	const note = hasSqlite() ? '' : `(run in a child on Node 24: this bench runs on Node ${process.versions.node}, which has no node:sqlite)`;
	const out = execFileSync(node, [path.join(__dirname, 'builtin.js')], { env: { ...process.env, DATABASE_URL: url }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
	return [...(note ? [note] : []), ...out.trim().split('\n')];
}
main().catch((error) => {
	console.error(error);
	process.exit(1);
});
