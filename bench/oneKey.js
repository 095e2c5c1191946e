// One-key claims on PostgreSQL, the webhook case: one item an execution, so each call is one
// statement and its cost is latency, not throughput. Beside the floor of what a claim must do on
// the same server and the same pool: a one-row INSERT … ON CONFLICT DO NOTHING commit (a new key)
// and SELECT 1 (a round trip). The four take turns call by call, so the machine's moods touch all
// alike; p50 and p99 of ONE_KEY_CALLS each, and the ratio of each claim to its floor.
//
//   npm run bench:onekey            (DATABASE_URL, ONE_KEY_CALLS=1000)
// `npm run bench` runs it too (section 1b).
const { Pool } = require('pg');
const { PostgresLedger } = require('../dist/lib/ledger');
const { percentile, time } = require('./util');

/** Rows of the report, for a pool and a ledger on the same server. */
async function oneKeyRows({ pool, ledger, calls = Number(process.env.ONE_KEY_CALLS || 1000) }) {
	const floorTable = `onekey_floor_${Date.now().toString(36)}`;
	await pool.query(`CREATE TABLE ${floorTable} (namespace text, key text, step text, PRIMARY KEY (namespace, key, step))`);
	const seen = { mode: 'seen', holder: 'bench', leaseMs: 0, ttlMs: 86_400_000 };
	const ns = `onekey_${Date.now().toString(36)}`;
	const request = (key) => [{ namespace: ns, key, step: '', fingerprint: null }];
	await ledger.claim(request('held'), seen);
	const calls4 = {
		'INSERT … ON CONFLICT DO NOTHING, one new row (floor)': (i) =>
			pool.query(`INSERT INTO ${floorTable} (namespace, key, step) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, [ns, `k${i}`, '']),
		'ledger.claim of a new key': (i) => ledger.claim(request(`k${i}`), seen),
		'SELECT 1 (floor)': () => pool.query('SELECT 1'),
		'ledger.claim of a duplicate': () => ledger.claim(request('held'), seen),
	};
	const entries = Object.entries(calls4);
	for (let i = 0; i < 50; i++) for (const [, call] of entries) await call(`warm${i}`);
	const times = entries.map(() => []);
	for (let i = 0; i < calls; i++) {
		for (let j = 0; j < entries.length; j++) {
			const s = (i + j) % entries.length;
			times[s].push(await time(() => entries[s][1](i)));
		}
	}
	await pool.query(`DROP TABLE ${floorTable}`);
	const p = (s, q) => percentile(times[s], q);
	const row = (s, floor) => {
		const ratio = floor === undefined ? '' : `${(p(s, 50) / p(floor, 50)).toFixed(2)} · ${(p(s, 99) / p(floor, 99)).toFixed(2)}`;
		return `| ${entries[s][0]} | ${p(s, 50).toFixed(2)} ms | ${p(s, 99).toFixed(2)} ms | ${ratio} |`;
	};
	return [
		`One-key calls on PostgreSQL, ${calls} each, taking turns call by call (the webhook case):`,
		'',
		'| call | p50 | p99 | p50 · p99 of its floor |',
		'|---|---|---|---|',
		row(0),
		row(1, 0),
		row(2),
		row(3, 2),
	];
}

module.exports = { oneKeyRows };

if (require.main === module) {
	(async () => {
		const pool = new Pool({ connectionString: process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test', max: 4 });
		const table = `onekey_${Date.now().toString(36)}`;
		const ledger = new PostgresLedger({ pool, table });
		await ledger.ensureSchema();
		console.log((await oneKeyRows({ pool, ledger })).join('\n'));
		const { dropLedgerTables } = require('./util');
		await dropLedgerTables(pool, table);
		await pool.end();
	})().catch((error) => {
		console.error(error);
		process.exit(1);
	});
}
