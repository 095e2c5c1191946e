// Redis claim throughput beside its own baseline: pipelined SET NX, in the same process; on one
// Redis server, or on a Redis Cluster (`clusterNodes`), where both keep one namespace's keys on
// one slot: the ledger by its hash tag, the baseline by the same tag.
const { Cluster, Redis } = require('ioredis');
const { RedisLedger } = require('../dist/lib/ledger/redis');
const { roundRobin, time } = require('./util');

const QUIET = { maxRetriesPerRequest: 1, connectTimeout: 2000 };

async function redisSection({ N, RUNS, url, clusterNodes }) {
	const client = clusterNodes
		? new Cluster(clusterNodes, { lazyConnect: true, redisOptions: QUIET, clusterRetryStrategy: () => null })
		: new Redis(url, { lazyConnect: true, ...QUIET, retryStrategy: () => null });
	client.on('error', () => undefined);
	try {
		await client.connect();
		await client.ping();
	} catch (error) {
		client.disconnect();
		return [`Redis ${clusterNodes ? 'Cluster ' : ''}section SKIPPED: no Redis answered at ${clusterNodes ? clusterNodes.map((n) => `${n.host}:${n.port}`).join(',') : url} (${error.message}).`];
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
				const at = clusterNodes ? `{${prefix}:${ns}}:raw:` : `${prefix}:raw:`;
				for (const key of k) p.set(at + key, '1', 'PX', 3_600_000, 'NX');
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
	// Clean up every key under the prefix, on every node.
	const servers = clusterNodes ? client.nodes('master') : [client];
	for (const server of servers) {
		let cursor = '0';
		do {
			const [next, found] = await server.scan(cursor, 'MATCH', `*${prefix}*`, 'COUNT', 1000);
			// One command per key: in a cluster, even one node refuses a multi-key command across slots.
			if (found.length) await found.reduce((p, key) => p.unlink(key), server.pipeline()).exec();
			cursor = next;
		} while (cursor !== '0');
	}
	const version = ((await servers[0].info('server')).match(/redis_version:(\S+)/) || [])[1];
	client.disconnect();
	return { rows, version };
}

module.exports = { redisSection };
