/**
 * npm run bench:n8n — Dedupe Gate against n8n's built-in Remove Duplicates v2, in ONE real n8n
 * (N8N_VERSION, default 2.41.1, on the Node it supports; its default expression engine), in one run, on this machine:
 *
 * 1. Throughput: Code node (10,000 items) → the node under test, run twice with
 *    `n8n execute --rawOutput` (first sight, then all duplicates); each node's own
 *    executionTime from the run data; three rounds with fresh state, medians. Ratios against
 *    Remove Duplicates from the same run. Before
 *    every timed run PostgreSQL is checkpointed and the ledger table vacuumed (see quiesce).
 * 2. Correctness under concurrency: 8 webhook executions at once, each with 1,200 keys out of
 *    4,000, overlapping (every key is in 3 executions, most in 3); then one more execution with
 *    all 4,000 keys. A correct gate lets each key through exactly once in the 8, and none in the
 *    replay.
 * 3. Round trips: one-item webhook executions through Dedupe Gate, the ledger credential
 *    pointed at a counting proxy in front of PostgreSQL.
 *
 * The package is installed the user's way (npm pack into <user folder>/.n8n/nodes) by the e2e
 * harness, test/e2e/support/n8n.ts. BENCH_ITEMS changes the 10,000; BENCH_ROUNDS the 5 throughput rounds; BENCH_PARTS picks parts;
 * BENCH_ROWS picks throughput rows; BENCH_BREAKDOWN_LEDGER=redis puts the breakdown's gate on the Redis ledger.
 */
import { execFileSync } from 'child_process';
import { createHash, randomUUID } from 'crypto';
import * as fs from 'fs';
import * as os from 'os';
import { Redis } from 'ioredis';
import { Client, Pool } from 'pg';

import { PostgresLedger } from '../../lib/ledger';

import { ensureRuntime, nodeExecutionTime, nodeOutput, startN8n, type N8nInstance, type WorkflowJson } from '../../test/e2e/support/n8n';
import { workflowNode } from '../../test/e2e/support/standIns';
import { dropLedgerTables } from '../../test/support/db';
import { countingPostgresProxy } from './pgRoundTrips';
const { safeRedisFor } = require('../safeRedis') as { safeRedisFor: (client: Redis, url: string, part: string) => Promise<{ url: string; note: string | null; stop: () => void } | null> };

const ITEMS = Number(process.env.BENCH_ITEMS ?? 10_000);
const CONCURRENT = 8;
const PER_EXECUTION = 1_200;
const STRIDE = 400;
const UNIVERSE = STRIDE * (CONCURRENT - 1) + PER_EXECUTION; // 4,000 keys
const ROUND_TRIP_RUNS = 20;
/**
 * Throughput rounds (BENCH_ROUNDS); the table shows medians and every round. Five: one gate's first
 * sight ranged from 106 to 162 ms across the rounds of one run (docs/benchmarks.md), so a median
 * of three could rest on one slow spell.
 */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
/** BENCH_PARTS=throughput,concurrency,roundtrips,breakdown (all by default). */
const parts = new Set((process.env.BENCH_PARTS ?? 'throughput,concurrency,roundtrips,breakdown').split(',').map((p) => p.trim()));
/** BENCH_ROWS=rd,field,… picks throughput rows by id (all by default); Remove Duplicates (`rd`) always runs, as the baseline. */
const ROWS = process.env.BENCH_ROWS ? new Set(['rd', ...process.env.BENCH_ROWS.split(',').map((r) => r.trim())]) : null;
/** BENCH_BREAKDOWN_LEDGER=redis: the breakdown's gate on the Redis ledger (the `redis` row's) instead of PostgreSQL. */
const BREAKDOWN_ON_REDIS = process.env.BENCH_BREAKDOWN_LEDGER === 'redis';
/**
 * BENCH_QUIESCE=0 skips the CHECKPOINT and VACUUM before each timed run (see quiesce): users do
 * not vacuum before each execution, so the report gives the figures both ways.
 */
const QUIESCE = process.env.BENCH_QUIESCE !== '0';
/**
 * BENCH_N8N_RUNNERS=true|false sets N8N_RUNNERS_ENABLED for the n8n under test (n8n's default
 * otherwise: off on 1.x, on from 2.0). With them off, n8n 1.x runs the Code node that makes the
 * items in vm2 in its own process, and every node after it reads them through vm2's proxies
 * (docs/benchmarks.md, "n8n 1.x: where the time goes").
 */
const RUNNERS = process.env.BENCH_N8N_RUNNERS;
/**
 * The Redis of the Redis row: REDIS_URL, or (when that Redis can lose keys, as a dev or CI box's
 * often can, and the gate refuses it) a throwaway redis-server with AOF on (bench/safeRedis.js).
 */
let redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const table = `bench_h2h_${Date.now().toString(36)}`;
/**
 * A key expression that is not a plain `$json` path, so n8n's expression engine evaluates it; it
 * reads the item only through `$json`, so the gate has the engine evaluate it for many items per call.
 */
const ENGINE_KEY = "={{ 'k-' + $json.id }}";
/**
 * A field of an earlier node's item, as n8n's editor writes it when the field is dragged in: read
 * from the item n8n pairs with each input item, without the expression engine.
 */
const PAIRED_PATH_KEY = "={{ $('Items').item.json.id }}";
/** The same key as ENGINE_KEY, read through the earlier node: batched, through n8n's `$getPairedItem`. */
const PAIRED_KEY = "={{ 'k-' + $('Items').item.json.id }}";
/** A key written as a template literal, which the gate leaves to n8n per item. */
const PER_ITEM_KEY = '={{ `k-${$json.id}` }}';

const node = (name: string, type: string, typeVersion: number, position: [number, number], parameters: object, extra: object = {}) =>
	workflowNode(name, type, typeVersion, position, parameters as Record<string, unknown>, extra as Record<string, unknown>);

const removeDuplicates = (extra: object = {}, dedupeValue = '={{ $json.id }}') =>
	node(
		'Under Test',
		'n8n-nodes-base.removeDuplicates',
		2,
		[440, 0],
		// The default history size (10,000) makes the second run of 10,000 items fail outright
		// ("exceeds the maximum history size"); a user has to raise it, so we do.
		{ operation: 'removeItemsSeenInPreviousExecutions', dedupeValue, options: { historySize: 100_000 } },
		extra,
	);

const CREDENTIAL_TYPE = { postgres: 'idempotencyPostgresApi', redis: 'idempotencyRedisApi', builtin: 'idempotencyBuiltinApi' } as const;

const dedupeGate = (namespace: string, key: object, credentialId: string, mode: 'seen' | 'lease' = 'seen', backend: keyof typeof CREDENTIAL_TYPE = 'postgres') =>
	node(
		'Under Test',
		'n8n-nodes-idempotency.dedupeGate',
		1,
		[440, 0],
		{ ...(backend !== 'postgres' ? { backend } : {}), mode, options: { namespace }, ...key },
		{ credentials: { [CREDENTIAL_TYPE[backend]]: { id: credentialId, name: 'Ledger' } } },
	);

function manualWorkflow(name: string, underTest: object): WorkflowJson {
	return {
		name,
		nodes: [
			node('Start', 'n8n-nodes-base.manualTrigger', 1, [0, 0], {}),
			node('Items', 'n8n-nodes-base.code', 2, [220, 0], {
				jsCode: `return Array.from({ length: ${ITEMS} }, (_, i) => ({ json: { id: 'evt_' + i, amount: i } }));`,
			}),
			underTest,
		],
		connections: {
			Start: { main: [[{ node: 'Items', type: 'main', index: 0 }]] },
			Items: { main: [[{ node: 'Under Test', type: 'main', index: 0 }]] },
		},
		settings: { executionOrder: 'v1' },
	};
}

/** Webhook (body.ids) → one item per id → node under test → one item listing the ids let through. */
function webhookWorkflow(name: string, path: string, underTest: object): WorkflowJson {
	return {
		name,
		nodes: [
			node('Webhook', 'n8n-nodes-base.webhook', 2, [0, 0], { httpMethod: 'POST', path, responseMode: 'lastNode', responseData: 'firstEntryJson', options: {} }, { webhookId: randomUUID() }),
			node('Items', 'n8n-nodes-base.code', 2, [220, 0], { jsCode: 'return $input.first().json.body.ids.map((id) => ({ json: { id } }));' }),
			{ ...underTest, alwaysOutputData: true },
			node('Through', 'n8n-nodes-base.code', 2, [660, 0], {
				jsCode: 'return [{ json: { ids: $input.all().map((item) => item.json.id).filter((id) => id !== undefined) } }];',
			}),
		],
		connections: {
			Webhook: { main: [[{ node: 'Items', type: 'main', index: 0 }]] },
			Items: { main: [[{ node: 'Under Test', type: 'main', index: 0 }]] },
			'Under Test': { main: [[{ node: 'Through', type: 'main', index: 0 }]] },
		},
		settings: { executionOrder: 'v1' },
	};
}

const fmt = (n: number) => n.toLocaleString('en-US');

/**
 * Before each timed run: write out dirty pages and vacuum the ledger table, so that neither a
 * checkpoint nor autovacuum (woken by the previous run's 10,000 rows) lands inside the next
 * node's timing. Done before every run, Remove Duplicates' included.
 */
async function quiesce() {
	if (!QUIESCE) return;
	const db = new Client({ connectionString: DATABASE_URL });
	await db.connect();
	try {
		await db.query('CHECKPOINT');
		await db.query(`VACUUM (ANALYZE) ${table}`);
	} finally {
		await db.end();
	}
}

async function throughput(n8n: N8nInstance, credentialId: string, redisCredentialId: string, builtinCredentialId: string) {
	const variants = (
		[
			['rd', 'Remove Duplicates v2, `={{ $json.id }}` (baseline)', () => removeDuplicates()],
			// n8n's own floor: a node that does nothing still pays for what n8n does to its input
			// items before any node runs (on n8n 1.x with task runners off, a copy of every vm2-proxied
			// item), inside its executionTime. No node can beat this row.
			['noop', "No Operation, do nothing (n8n's own cost of handing a node these items)", () => node('Under Test', 'n8n-nodes-base.noOp', 1, [440, 0], {})],
			['field', 'Dedupe Gate, Key From: Field Name `id`', (r) => dedupeGate(`h2h-field-${r}`, { keySource: 'field', keyField: 'id' }, credentialId)],
			['redis', 'Dedupe Gate on Redis, Key From: Field Name `id`', (r) => dedupeGate(`h2h-redis-${r}`, { keySource: 'field', keyField: 'id' }, redisCredentialId, 'seen', 'redis')],
			['builtin', 'Dedupe Gate on the Built-in ledger (SQLite file), Key From: Field Name `id`', (r) => dedupeGate(`h2h-builtin-${r}`, { keySource: 'field', keyField: 'id' }, builtinCredentialId, 'seen', 'builtin')],
			['fast', 'Dedupe Gate, `={{ $json.id }}` (fast path)', (r) => dedupeGate(`h2h-fast-${r}`, { keySource: 'expression', keyExpression: '={{ $json.id }}' }, credentialId)],
			['paired', "Dedupe Gate, `={{ $('Items').item.json.id }}` (read from the paired item)", (r) => dedupeGate(`h2h-paired-${r}`, { keySource: 'expression', keyExpression: PAIRED_PATH_KEY }, credentialId)],
			['batched', "Dedupe Gate, `={{ 'k-' + $json.id }}` (engine path, batched)", (r) => dedupeGate(`h2h-engine-${r}`, { keySource: 'expression', keyExpression: ENGINE_KEY }, credentialId)],
			['paired-batched', "Dedupe Gate, `={{ 'k-' + $('Items').item.json.id }}` (engine path, batched)", (r) => dedupeGate(`h2h-paired-batched-${r}`, { keySource: 'expression', keyExpression: PAIRED_KEY }, credentialId)],
			['rd-paired', "Remove Duplicates v2, `={{ 'k-' + $('Items').item.json.id }}` (control)", () => removeDuplicates({}, PAIRED_KEY)],
			['per-item', "Dedupe Gate, `` ={{ `k-${$json.id}` }} `` (engine path, per item)", (r) => dedupeGate(`h2h-per-item-${r}`, { keySource: 'expression', keyExpression: PER_ITEM_KEY }, credentialId)],
			// Control: the per-item engine path's time is n8n evaluating its expression; this is the
			// built-in node paying for the very same expression.
			['rd-per-item', "Remove Duplicates v2, `` ={{ `k-${$json.id}` }} `` (control for the per-item path)", () => removeDuplicates({}, PER_ITEM_KEY)],
		] as Array<[string, string, (round: number) => object]>
	)
		.filter(([id]) => !ROWS || ROWS.has(id))
		.map(([, label, make]) => [label, make] as const);
	const rows = variants.map(([label]) => ({ label, first: [] as number[], dup: [] as number[], out: new Set<string>() }));
	// Rounds, each with fresh state (a new workflow: Remove Duplicates' history is per workflow; a
	// new namespace for the gate), variants interleaved so that a slow spell of the machine hits
	// all of them alike.
	for (let round = 1; round <= ROUNDS; round++) {
		for (const [v, [label, make]] of variants.entries()) {
			const { id } = await n8n.createWorkflow(manualWorkflow(`${label} #${round}`, make(round)));
			const outs: number[] = [];
			for (const times of [rows[v].first, rows[v].dup]) {
				await quiesce();
				const { run: result } = await n8n.executeCli(id, { env: { N8N_LOG_LEVEL: 'info' } });
				times.push(nodeExecutionTime(result, 'Under Test'));
				outs.push(nodeOutput(result, 'Under Test', 0).length);
			}
			rows[v].out.add(outs.map(fmt).join(' / '));
			process.stderr.write(`[bench:n8n] round ${round}, ${label}: ${rows[v].first.at(-1)} ms, then ${rows[v].dup.at(-1)} ms; ${outs.join(' / ')} items out\n`);
		}
	}
	const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
	const [base] = rows;
	console.log(
		`\n### Throughput: ${fmt(ITEMS)} items, each node's own executionTime, median of ${ROUNDS} rounds, ${QUIESCE ? 'CHECKPOINT and VACUUM before each timed run' : 'no CHECKPOINT or VACUUM between runs (BENCH_QUIESCE=0)'}\n`,
	);
	console.log('| node | first sight | × Remove Duplicates | all duplicates | × Remove Duplicates | every round, first / duplicates (ms) | items let through (run 1 / run 2) |');
	console.log('|---|---:|---:|---:|---:|---|---|');
	for (const r of rows) {
		const [first, dup] = [median(r.first), median(r.dup)];
		console.log(
			`| ${r.label} | ${fmt(first)} ms | ${(median(base.first) / first).toFixed(1)}× | ${fmt(dup)} ms | ${(median(base.dup) / dup).toFixed(1)}× | ${r.first.map((f, i) => `${fmt(f)} / ${fmt(r.dup[i])}`).join('; ')} | ${[...r.out].join('; ')} |`,
		);
	}
}

async function concurrency(n8n: N8nInstance, credentialId: string) {
	const suffix = Date.now().toString(36);
	const variants: Array<[string, string, object]> = [
		['Remove Duplicates v2 (previous executions)', `h2h-rd-${suffix}`, removeDuplicates()],
		['Dedupe Gate (As Soon As It Passes)', `h2h-gate-${suffix}`, dedupeGate(`h2h-conc-${suffix}`, { keySource: 'field', keyField: 'id' }, credentialId)],
		['Dedupe Gate (When Mark Step Done Records It)', `h2h-lease-${suffix}`, dedupeGate(`h2h-lease-${suffix}`, { keySource: 'field', keyField: 'id' }, credentialId, 'lease')],
	];
	const keys = Array.from({ length: UNIVERSE }, (_, i) => `key_${i}`);
	console.log(
		`\n### Correctness under concurrency: ${CONCURRENT} webhook executions at once, ${fmt(PER_EXECUTION)} keys each out of ${fmt(UNIVERSE)} (overlapping), then one replay of all ${fmt(UNIVERSE)}\n`,
	);
	console.log('| node | keys let through more than once | keys never let through | let through again on replay | executions failed |');
	console.log('|---|---:|---:|---:|---:|');
	const errors: string[] = [];
	for (const [label, path, underTest] of variants) {
		const workflowId = await n8n.deploy(webhookWorkflow(label, path, underTest));
		const batches = Array.from({ length: CONCURRENT }, (_, j) => keys.slice(j * STRIDE, j * STRIDE + PER_EXECUTION));
		const responses = await Promise.all(batches.map((ids) => n8n.post(path, { ids }, { timeoutMs: 10 * 60_000 })));
		const passes = new Map<string, number>();
		let failed = 0;
		for (const res of responses) {
			if (res.status !== 200 || !Array.isArray(res.body?.ids)) {
				failed++;
				process.stderr.write(`[bench:n8n] ${label}: HTTP ${res.status} ${res.text.slice(0, 300)}\n`);
				continue;
			}
			for (const id of res.body.ids as string[]) passes.set(id, (passes.get(id) ?? 0) + 1);
		}
		const replay = await n8n.post(path, { ids: keys }, { timeoutMs: 10 * 60_000 });
		if (replay.status !== 200 || !Array.isArray(replay.body?.ids)) failed++;
		const twice = keys.filter((k) => (passes.get(k) ?? 0) > 1).length;
		const never = keys.filter((k) => !passes.has(k)).length;
		const again = Array.isArray(replay.body?.ids) ? replay.body.ids.length : NaN;
		console.log(`| ${label} | ${fmt(twice)} | ${fmt(never)} | ${fmt(again)} | ${failed} |`);
		for (const execution of await n8n.executions(workflowId, { status: 'error', includeData: true })) {
			const error = execution.data?.resultData?.error;
			errors.push(`${label}, execution ${execution.id}: ${error?.message ?? 'failed'}${error?.description ? ` (${error.description})` : ''}`);
		}
	}
	if (errors.length) console.log(`\nFailed executions, as n8n recorded them:\n\n${errors.map((e) => `- ${e}`).join('\n')}`);
}

/**
 * BENCH_PARTS=profile: one `n8n execute` per row (first sight, then all duplicates) under
 * `node --cpu-prof`, with n8n's task runners off and on (N8N_RUNNERS_ENABLED), the profiles in
 * BENCH_PROFILE_DIR (default a temp folder). Summarise one with `node bench/n8n/cpuprofile.js <file>`.
 */
async function profile(n8n: N8nInstance, credentialId: string) {
	const dir = process.env.BENCH_PROFILE_DIR ?? fs.mkdtempSync(`${os.tmpdir()}/h2h-profile-`);
	fs.mkdirSync(dir, { recursive: true });
	const suffix = Date.now().toString(36);
	const rows = (runners: string): Array<[string, object]> => [
		['rd', removeDuplicates()],
		['field', dedupeGate(`h2h-prof-field-${runners}-${suffix}`, { keySource: 'field', keyField: 'id' }, credentialId)],
	];
	console.log(`\n### CPU profiles (\`n8n execute\` under --cpu-prof), in ${dir}\n`);
	console.log('| row | task runners | first sight (ms) | all duplicates (ms) | profiles |');
	console.log('|---|---|---:|---:|---|');
	for (const runners of (process.env.BENCH_PROFILE_RUNNERS ?? 'false,true').split(',')) {
		for (const [row, underTest] of rows(runners)) {
			const { id } = await n8n.createWorkflow(manualWorkflow(`profile ${row} runners=${runners}`, underTest));
			const out: string[] = [];
			const files: string[] = [];
			for (const run of ['first', 'dup']) {
				const runDir = `${dir}/${row}-runners-${runners}-${run}`;
				fs.mkdirSync(runDir, { recursive: true });
				await quiesce();
				const { run: result } = await n8n.executeCli(id, { env: { N8N_LOG_LEVEL: 'info', N8N_RUNNERS_ENABLED: runners, NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${runDir}` } });
				out.push(fmt(nodeExecutionTime(result, 'Under Test')));
				files.push(runDir);
			}
			console.log(`| ${row} | ${runners} | ${out[0]} | ${out[1]} | ${files.join(', ')} |`);
		}
	}
}

/** The gate's own account of its time (its debug log line, see nodes/DedupeGate/execute.ts). */
const GATE_TIMES = /Dedupe Gate "Under Test": (\d+) items in ([\d.]+) ms: keys and fingerprints ([\d.]+) ms, ledger open ([\d.]+) ms, claim ([\d.]+) ms, routing ([\d.]+) ms/g;
const PHASES = ['total', 'keys and fingerprints', 'ledger open', 'claim', 'routing'];
const lastGateTimes = (log: string): number[] => {
	const all = [...log.matchAll(GATE_TIMES)];
	if (all.length === 0) throw new Error('the gate logged no timings: is N8N_LOG_LEVEL=debug reaching it?');
	return all[all.length - 1].slice(2).map(Number);
};

/**
 * Where the gate's time goes, on a fresh `n8n execute` (a new process each run, as in the
 * throughput part) and in a warm n8n answering webhooks (the main process, second and later
 * executions). Each run is the Field Name row on 10,000 items, first sight then all duplicates.
 * Beside it: the claim statement alone on the server (EXPLAIN ANALYZE of one 5,000-key chunk),
 * and loading the package's modules in a fresh Node.
 */
async function breakdown(n8n: N8nInstance, credentialId: string) {
	const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
	const rows: Array<{ label: string; runs: number[][] }> = [];
	const cold = { first: [] as number[][], dup: [] as number[][] };
	for (let round = 1; round <= ROUNDS; round++) {
		const { id } = await n8n.createWorkflow(manualWorkflow(`breakdown #${round}`, dedupeGate(`h2h-breakdown-${round}`, { keySource: 'field', keyField: 'id' }, credentialId, 'seen', BREAKDOWN_ON_REDIS ? 'redis' : 'postgres')));
		for (const times of [cold.first, cold.dup]) {
			await quiesce();
			// At debug level n8n prints the run as a log line, not raw JSON: only the exit code counts here.
			const cli = await n8n.executeCli(id, { env: { N8N_LOG_LEVEL: 'debug' }, allowFailure: true });
			if (cli.exitCode !== 0) throw new Error(`n8n execute failed (exit ${cli.exitCode}): ${cli.stderr.slice(-500)}`);
			times.push([...lastGateTimes(cli.stdout + cli.stderr), cli.ms]);
		}
	}
	rows.push({ label: 'fresh `n8n execute`, first sight', runs: cold.first }, { label: 'fresh `n8n execute`, all duplicates', runs: cold.dup });
	const warm = { first: [] as number[][], dup: [] as number[][] };
	const path = `h2h-breakdown-${Date.now().toString(36)}`;
	await n8n.deploy(webhookWorkflow('breakdown, warm', path, dedupeGate(`h2h-breakdown-warm-${Date.now().toString(36)}`, { keySource: 'field', keyField: 'id' }, credentialId, 'seen', BREAKDOWN_ON_REDIS ? 'redis' : 'postgres')));
	// One execution first, so that the timed ones find the package loaded and the pool open.
	await n8n.post(path, { ids: ['warm-up'] });
	for (let round = 1; round <= ROUNDS; round++) {
		const ids = Array.from({ length: ITEMS }, (_, i) => `warm_${round}_${i}`);
		for (const times of [warm.first, warm.dup]) {
			await quiesce();
			const res = await n8n.post(path, { ids }, { timeoutMs: 5 * 60_000 });
			if (res.status !== 200) throw new Error(`warm breakdown run failed: HTTP ${res.status} ${res.text.slice(0, 300)}`);
			times.push(lastGateTimes(fs.readFileSync(n8n.logFile, 'utf8')));
		}
	}
	rows.push({ label: 'warm webhook process, first sight', runs: warm.first }, { label: 'warm webhook process, all duplicates', runs: warm.dup });
	console.log(`\n### Where the gate's time goes: Field Name \`id\`${BREAKDOWN_ON_REDIS ? ' on the Redis ledger' : ''}, ${fmt(ITEMS)} items, the gate's debug log, median of ${ROUNDS} rounds (ms)\n`);
	console.log(`| run | ${PHASES.join(' | ')} | \`n8n execute\` process, start to exit |`);
	console.log(`|---|${PHASES.map(() => '---:|').join('')}---:|`);
	for (const { label, runs } of rows) {
		const cells = PHASES.map((_, i) => median(runs.map((r) => r[i])).toFixed(1));
		const wall = runs[0].length > PHASES.length ? fmt(Math.round(median(runs.map((r) => r[PHASES.length])))) : '';
		console.log(`| ${label} | ${cells.join(' | ')} | ${wall} |`);
	}
	await serverSide();
	moduleLoad(n8n);
}

/** The claim statement alone on the server: EXPLAIN ANALYZE of one 5,000-key chunk, new keys, then the same keys again. */
async function serverSide() {
	const pool = new Pool({ connectionString: DATABASE_URL, max: 1 });
	try {
		const ledger = new PostgresLedger({ pool, table });
		const statement = (ledger as unknown as { sql: { claim: string } }).sql.claim;
		const keys = JSON.stringify(Array.from({ length: 5_000 }, (_, i) => `server_${i}`).sort());
		const fingerprints = JSON.stringify(Array.from({ length: 5_000 }, (_, i) => createHash('sha256').update(String(i)).digest('hex')));
		const times: number[] = [];
		for (const namespace of ['h2h-server', 'h2h-server']) {
			await quiesce();
			const plan = await pool.query(`EXPLAIN (ANALYZE, TIMING OFF) ${statement}`, ['[]', keys, '[]', fingerprints, '[]', 'in_progress', 'bench', 600_000, 86_400_000, 'lease', false, namespace, '', true]);
			times.push(Number(/Execution Time: ([\d.]+)/.exec(plan.rows.map((r) => r['QUERY PLAN']).join('\n'))![1]));
		}
		console.log(`\nThe claim statement on the server, one 5,000-key chunk (EXPLAIN ANALYZE): ${times[0].toFixed(1)} ms new keys, ${times[1].toFixed(1)} ms the same keys again. The gate sends 10,000 keys as two such statements side by side.`);
	} finally {
		await pool.end();
	}
}

/** Loading the package's Dedupe Gate module (and the drivers it requires) in a fresh Node, as n8n's Node runs it. */
function moduleLoad(n8n: N8nInstance) {
	const installed = `${n8n.userFolder}/.n8n/nodes/node_modules/n8n-nodes-idempotency/dist/nodes/DedupeGate/DedupeGate.node.js`;
	// n8n has loaded n8n-workflow before any node: time it apart from what the package adds.
	const script = `const t0 = performance.now(); require('n8n-workflow'); const t1 = performance.now(); require(${JSON.stringify(installed)}); process.stdout.write(JSON.stringify([t1 - t0, performance.now() - t1]));`;
	// n8n-workflow is n8n's own copy, as n8n resolves it for community packages.
	const n8nModules = n8n.runtime.n8nBin.slice(0, n8n.runtime.n8nBin.lastIndexOf('/node_modules/') + '/node_modules'.length);
	const env = { ...process.env, NODE_PATH: n8nModules };
	const runs = Array.from({ length: 5 }, () => JSON.parse(execFileSync(n8n.runtime.nodeBin, ['-e', script], { cwd: `${n8n.userFolder}/.n8n/nodes`, encoding: 'utf8', env })) as number[]);
	const median = (i: number) => runs.map((r) => r[i]).sort((a, b) => a - b)[2].toFixed(0);
	console.log(
		`Loading modules in a fresh Node (median of 5): n8n-workflow ${median(0)} ms (n8n loads it anyway), then the Dedupe Gate module and what it adds (pg, the ledger) ${median(1)} ms.`,
	);
}

async function roundTrips(n8n: N8nInstance) {
	const proxy = await countingPostgresProxy();
	try {
		const u = new URL(DATABASE_URL);
		const credential = await n8n.createCredential({
			name: 'Ledger via counting proxy',
			type: 'idempotencyPostgresApi',
			data: { host: '127.0.0.1', port: proxy.port, database: u.pathname.slice(1), user: decodeURIComponent(u.username), password: '', ssl: 'disable', schema: 'public', table, poolSize: 5 },
		});
		const path = `h2h-one-${Date.now().toString(36)}`;
		await n8n.deploy(webhookWorkflow('one item', path, dedupeGate(`h2h-one-${Date.now().toString(36)}`, { keySource: 'field', keyField: 'id' }, credential.id)));
		await n8n.post(path, { ids: ['warm-up'] }); // opens the pool and checks the schema once
		const before = proxy.count;
		for (let i = 0; i < ROUND_TRIP_RUNS; i++) {
			const res = await n8n.post(path, { ids: [`one-${i}`] });
			if (res.body?.ids?.[0] !== `one-${i}`) throw new Error(`one-item execution ${i} did not let its key through: ${res.text}`);
		}
		const firstSight = (proxy.count - before) / ROUND_TRIP_RUNS;
		const beforeDup = proxy.count;
		for (let i = 0; i < ROUND_TRIP_RUNS; i++) await n8n.post(path, { ids: [`one-${i}`] });
		const duplicate = (proxy.count - beforeDup) / ROUND_TRIP_RUNS;
		console.log(`\n### Ledger round trips per one-item webhook execution (counting proxy, ${ROUND_TRIP_RUNS} executions each, after one warm-up)\n`);
		console.log('| item | PostgreSQL round trips per execution |');
		console.log('|---|---:|');
		console.log(`| new key | ${firstSight} |`);
		console.log(`| duplicate key | ${duplicate} |`);
	} finally {
		await proxy.close();
	}
}

async function main() {
	const runtime = await ensureRuntime();
	const probe = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
	probe.on('error', () => undefined);
	const safe = (await probe.connect().then(() => true, () => false)) ? await safeRedisFor(probe, redisUrl, 'the Redis row') : null;
	probe.disconnect();
	if (safe) redisUrl = safe.url;
	// The warm part of the breakdown reads the gate's debug line from the main process's log.
	const n8n = await startN8n({
		withPackage: true,
		env: { ...(parts.has('breakdown') ? { N8N_LOG_LEVEL: 'debug' } : {}), ...(RUNNERS ? { N8N_RUNNERS_ENABLED: RUNNERS } : {}) },
	});
	try {
		await n8n.setupOwner();
		await n8n.createApiKey();
		const u = new URL(DATABASE_URL);
		const credential = await n8n.createCredential({
			name: 'Ledger',
			type: 'idempotencyPostgresApi',
			data: { host: u.hostname, port: Number(u.port || 5432), database: u.pathname.slice(1), user: decodeURIComponent(u.username), password: decodeURIComponent(u.password), ssl: 'disable', schema: 'public', table, poolSize: 5 },
		});
		// The ledger's tables exist in any deployment after its first run; create them now so that
		// no timed execution pays for CREATE TABLE.
		const setup = new Pool({ connectionString: DATABASE_URL, max: 1 });
		await new PostgresLedger({ pool: setup, table }).ensureSchema();
		await setup.end();
		console.log(`## npm run bench:n8n — n8n ${runtime.version} on Node ${execFileSync(n8n.runtime.nodeBin, ["-v"], { encoding: "utf8" }).trim()} (${n8n.runtime.nodeBin}), expression engine: ${process.env.N8N_EXPRESSION_ENGINE ?? "n8n's default"}, task runners: ${RUNNERS ?? "n8n's default"}, ${new Date().toISOString()}`);
		if (safe?.note) console.log(`Note: ${safe.note}.`);
		const redis = new URL(redisUrl);
		const redisCredential = await n8n.createCredential({
			name: 'Ledger on Redis',
			type: 'idempotencyRedisApi',
			data: { host: redis.hostname, port: Number(redis.port || 6379), password: decodeURIComponent(redis.password), database: 0, prefix: table },
		});
		const builtinCredential = await n8n.createCredential({ name: 'Built-in Ledger', type: 'idempotencyBuiltinApi', data: { file: `${table}.sqlite` } });
		if (parts.has('throughput')) await throughput(n8n, credential.id, redisCredential.id, builtinCredential.id);
		if (parts.has('concurrency')) await concurrency(n8n, credential.id);
		if (parts.has('roundtrips')) await roundTrips(n8n);
		if (parts.has('breakdown')) await breakdown(n8n, BREAKDOWN_ON_REDIS ? redisCredential.id : credential.id);
		if (parts.has('profile')) await profile(n8n, credential.id);
	} finally {
		await n8n.stop();
		await dropRedisKeys();
		safe?.stop();
		const db = new Pool({ connectionString: DATABASE_URL, max: 1 });
		await dropLedgerTables(db, table);
		await db.end();
	}
}

/** The Redis row's keys all start with this run's prefix (the table name). */
async function dropRedisKeys() {
	const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
	try {
		await redis.connect();
		let cursor = '0';
		do {
			const [next, found] = await redis.scan(cursor, 'MATCH', `*${table}*`, 'COUNT', 1000);
			if (found.length) await redis.del(...found);
			cursor = next;
		} while (cursor !== '0');
	} finally {
		redis.disconnect();
	}
}

main().then(
	() => process.exit(0),
	(error) => {
		console.error(error);
		process.exit(1);
	},
);
