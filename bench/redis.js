// Redis claim throughput beside its own baseline: pipelined SET NX, in the same process.
const { Redis } = require('ioredis');
const { RedisLedger } = require('../dist/lib/ledger/redis');
const { roundRobin, time } = require('./util');

async function redisSection({ N, RUNS, url }) {
	const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, connectTimeout: 2000, retryStrategy: () => null });
	client.on('error', () => undefined);
	try {
		await client.connect();
		await client.ping();
	} catch (error) {
		return [`Redis section SKIPPED: no Redis answered at ${url} (${error.message}).`];
	}
	const prefix = `bench-${Date.now().toString(36)}`;
	const ledger = new RedisLedger({ client, prefix });
	await ledger.ensureSchema();
	const keys = (ns) => Array.from({ length: N }, (_, i) => `evt_${ns}_${i}`);
	const scenarios = {
		'Redis baseline: SET NX PX, pipelined': async (ns) => {
			const k = keys(ns);
			const once = async () => {
				const p = client.pipeline();
				for (const key of k) p.set(`${prefix}:raw:${key}`, '1', 'PX', 3_600_000, 'NX');
				await p.exec();
			};
			return { first: await time(once), dup: await time(once), trips: 1 };
		},
		'RedisLedger.claim (mark seen)': async (ns) => {
			const requests = keys(ns).map((key) => ({ namespace: ns, key, step: '', fingerprint: null }));
			const opts = { mode: 'seen', holder: 'bench', leaseMs: 0, ttlMs: 3_600_000 };
			const before = ledger.roundTrips;
			const first = await time(() => ledger.claim(requests, opts));
			const trips = ledger.roundTrips - before;
			return { first, dup: await time(() => ledger.claim(requests, opts)), trips };
		},
		'RedisLedger.claim (lease)': async (ns) => {
			const requests = keys(ns).map((key) => ({ namespace: ns, key, step: '', fingerprint: null }));
			const opts = { mode: 'lease', holder: 'bench', leaseMs: 600_000, ttlMs: 3_600_000 };
			const before = ledger.roundTrips;
			const first = await time(() => ledger.claim(requests, opts));
			const trips = ledger.roundTrips - before;
			return { first, dup: await time(() => ledger.claim(requests, opts)), trips };
		},
	};
	const rows = await roundRobin(Object.entries(scenarios), RUNS);
	// Clean up every key under the prefix.
	let cursor = '0';
	do {
		const [next, found] = await client.scan(cursor, 'MATCH', `*${prefix}*`, 'COUNT', 1000);
		if (found.length) await client.del(...found);
		cursor = next;
	} while (cursor !== '0');
	const version = ((await client.info('server')).match(/redis_version:(\S+)/) || [])[1];
	client.disconnect();
	return { rows, version };
}

module.exports = { redisSection };
