// npm run bench, the allocation part: how many bytes the Dedupe Gate's execute() and the bare
// ledger.claim allocate for 10,000 items, first sight and duplicates, on PostgreSQL. Time moves
// with the machine; bytes allocated hardly do, so this is the steady measure of our own
// JavaScript (every byte allocated is later collected, and each object alive at a collection is
// copied). bench/run.js runs this file in a child with a young generation large enough that no
// collection falls inside a measured call (--max-semi-space-size=128) and --expose-gc, so that
// the heap's growth over a call is what the call allocated.
const { Pool } = require('pg');
const { nodeContext, endExecution } = require('./context');
const { ledgerCredentials, dropLedgerTables } = require('./util');

const N = Number(process.env.BENCH_KEYS || 10_000);
const RUNS = 6;
const WARM_UP = 3;
const url = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test';

async function main() {
	const { postgresLedger, closeAllPostgresLedgers } = require('../dist/lib/ledger');
	const { DedupeGate } = require('../dist/nodes/DedupeGate/DedupeGate.node');
	const table = `bench_alloc_${Date.now().toString(36)}`;
	const credentials = ledgerCredentials(url, table);
	const ledger = postgresLedger(credentials);
	await ledger.ensureSchema();
	const gate = new DedupeGate();
	const allocated = async (fn) => {
		global.gc();
		const before = process.memoryUsage().heapUsed;
		await fn();
		return process.memoryUsage().heapUsed - before;
	};
	const bytes = { claim: [], claimDup: [], gate: [], gateDup: [] };
	// The first runs warm up (optimised code, pool connections, the statement's plan) and are not counted.
	for (let run = 0; run < WARM_UP + RUNS; run++) {
		const ns = `a${run}`;
		const requests = Array.from({ length: N }, (_, i) => ({ namespace: `${ns}_claim`, key: `evt_${ns}_${i}`, step: '', fingerprint: null, version: null }));
		const options = (holder) => ({ mode: 'lease', holder, leaseMs: 30_000, ttlMs: 86_400_000 });
		const claim = await allocated(() => ledger.claim(requests, options('execution:first')));
		const claimDup = await allocated(() => ledger.claim(requests, options('execution:repeat')));
		const items = Array.from({ length: N }, (_, i) => ({ json: { id: `evt_${ns}_${i}`, amount: i, customer: { email: `c${i}@example.com` } } }));
		const execution = async (id) => {
			const ctx = nodeContext(gate, { parameters: { mode: 'lease', keySource: 'field', keyField: 'id', options: { namespace: ns } }, items, credentials, executionId: `${ns}-${id}`, executionEnds: true });
			let out;
			const used = await allocated(async () => (out = await gate.execute.call(ctx)));
			if (out[id === 'first' ? 0 : 2].length !== N) throw new Error(`allocation bench: the gate's ${id} run sent ${out[0].length} items to New and ${out[2].length} to In Progress`);
			await endExecution(ctx);
			return used;
		};
		const first = await execution('first');
		const repeat = await execution('repeat');
		if (run < WARM_UP) continue;
		bytes.claim.push(claim);
		bytes.claimDup.push(claimDup);
		bytes.gate.push(first);
		bytes.gateDup.push(repeat);
	}
	await closeAllPostgresLedgers();
	const pool = new Pool({ connectionString: url });
	await dropLedgerTables(pool, table);
	await pool.end();
	const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
	const mb = (xs) => `${(median(xs) / 1e6).toFixed(2)} MB (${Math.round(median(xs) / N)} B per item)`;
	console.log(
		[
			`Allocation per call, ${N} items, median of ${RUNS} runs (heap growth with no collection inside the call; Node ${process.version}):`,
			'',
			'| call | first sight | all duplicates |',
			'|---|---|---|',
			`| ledger.claim (lease) | ${mb(bytes.claim)} | ${mb(bytes.claimDup)} |`,
			`| Dedupe Gate execute() (field "id", lease) | ${mb(bytes.gate)} | ${mb(bytes.gateDup)} |`,
			`| the gate's own (its execute() less the claim) | ${mb([median(bytes.gate) - median(bytes.claim)])} | ${mb([median(bytes.gateDup) - median(bytes.claimDup)])} |`,
		].join('\n'),
	);
}

main().catch((error) => {
	console.error(error);
	process.exit(1);
});
