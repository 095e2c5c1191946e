// How fast can a Redis claim of new keys be, done in a script? The ledger's claim script for
// 10,000 new keys beside pipelined SET NX PX (the `npm run bench` baseline), beside the least
// script that claims them all at once (one SET NX PX per key, in one script call), and beside the
// claim script without its read of the existing rows (MGET), which is not a correct claim, only a
// floor. (Before key layout 3 the claim also wrote two index entries per new row; this bench,
// with a variant without them, is how layout 3 was chosen: docs/benchmarks.md.) Alternating
// rounds, one fresh namespace each; wall time at the client, and the server's own time from INFO
// commandstats (the EVAL or the SETs, without reading the request). Then the claim script and the
// variant as the ledger's claim script, measured as `npm run bench` measures the claim
// (bench/redis.js: first sight only, since a claim without its MGET does not see duplicates).
// Run: `node bench/redisScriptFloor.js` (after `npm run build`), on Node 20 or 24.
const { Redis } = require('ioredis');
const { SCRIPTS } = require('../dist/lib/ledger/redis/scripts');
const { namespaceKeys, member } = require('../dist/lib/ledger/redis/keys');
const { redisSection } = require('./redis');
const { median } = require('./util');

const N = Number(process.env.BENCH_KEYS || 10_000);
const ROUNDS = Number(process.env.BENCH_RUNS || 11);
const RUNS_IN_BENCH = 7;
const url = process.env.REDIS_URL || 'redis://127.0.0.1:6379';

/** The script with `pattern` replaced; fails if the script no longer has what it takes out. */
function without(script, pattern, replacement) {
	const out = script.replace(pattern, replacement);
	if (out === script) throw new Error(`the claim script no longer matches ${pattern}: update this bench`);
	return out;
}
const claim = SCRIPTS.idemLedgerClaim;
const MGET = /local got = redis\.call\('MGET'[^\n]*\n[^\n]*\n/;
const LEAST = `for i = 1, #KEYS do redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2], 'NX') end`;
const scripts = {
	'least script: SET NX PX per key': null,
	'claim script, as shipped': claim,
	'without its MGET': without(claim, MGET, ''),
};

async function serverMs(redis, command) {
	const stats = await redis.info('commandstats');
	return Number((stats.match(new RegExp(`cmdstat_${command}:calls=\\d+,usec=(\\d+)`)) || [0, 0])[1]) / 1000;
}

(async () => {
	const redis = new Redis(url, { maxRetriesPerRequest: 1 });
	const prefix = `floor-${Date.now().toString(36)}`;
	const runs = { 'baseline: SET NX PX, pipelined': [] };
	for (const name of Object.keys(scripts)) runs[name] = [];
	for (let round = -1; round < ROUNDS; round++) {
		const pipeline = redis.pipeline();
		for (let i = 0; i < N; i++) pipeline.set(`${prefix}:raw${round}:evt_${i}`, '1', 'PX', 3_600_000, 'NX');
		await redis.config('RESETSTAT');
		let started = performance.now();
		await pipeline.exec();
		const baseline = [performance.now() - started, await serverMs(redis, 'set')];
		if (round >= 0) runs['baseline: SET NX PX, pipelined'].push(baseline);
		for (const [v, [name, script]] of Object.entries(scripts).entries()) {
			const k = namespaceKeys(prefix, `v${v}-${round}`);
			const keys = [...k.fixed];
			const heads = [];
			for (let i = 0; i < N; i++) {
				keys.push(k.row(member(`evt_${i}`, '')));
				heads.push(`{"k":"evt_${i}","s":""`);
			}
			await redis.config('RESETSTAT');
			started = performance.now();
			if (script === null) await redis.eval(LEAST, N, ...keys.slice(k.fixed.length), '1', 3_600_000);
			else await redis.eval(script, keys.length, ...keys, 'seen', 'bench', 0, 3_600_000, '', N, ...heads);
			if (round >= 0) runs[name].push([performance.now() - started, await serverMs(redis, 'eval')]);
		}
	}
	const base = runs['baseline: SET NX PX, pipelined'];
	console.log(`Redis claim of ${N} new keys in one script call, Node ${process.version}, median of ${ROUNDS} alternating rounds:\n`);
	console.log('| | wall | of it, in Redis | ratio to pipelined SET NX (wall) |');
	console.log('|---|---|---|---|');
	for (const [name, xs] of Object.entries(runs)) {
		const ratio = median(xs.map(([ms], r) => base[r][0] / ms));
		console.log(`| ${name} | ${median(xs.map((x) => x[0])).toFixed(1)} ms | ${median(xs.map((x) => x[1])).toFixed(1)} ms | ${ratio.toFixed(2)} |`);
	}
	// The claim script and the variant as the ledger's claim script (each RedisLedger defines its scripts on
	// its own new client), as `npm run bench` times them.
	console.log(`\nThe same scripts as the ledger's claim script, in \`npm run bench\`'s Redis part (${RUNS_IN_BENCH} runs), first sight, ratio to pipelined SET NX:\n`);
	console.log('| claim script | mark seen | lease |');
	console.log('|---|---|---|');
	for (const [name, script] of Object.entries(scripts)) {
		if (script === null) continue;
		SCRIPTS.idemLedgerClaim = script;
		const { rows } = await redisSection({ N, RUNS: RUNS_IN_BENCH, url });
		const ratio = (mode) => rows.find((r) => r.name.includes(mode)).firstRatio.toFixed(2);
		console.log(`| ${name.replace('claim script, ', '')} | ${ratio('mark seen')} | ${ratio('lease')} |`);
	}
	SCRIPTS.idemLedgerClaim = claim;
	for (const pattern of [`${prefix}:*`, `{${prefix}:*`]) {
		let cursor = '0';
		do {
			const [next, found] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
			if (found.length) await redis.unlink(...found);
			cursor = next;
		} while (cursor !== '0');
	}
	redis.disconnect();
})().catch((error) => {
	console.error(error);
	process.exit(1);
});
