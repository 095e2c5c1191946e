import { spawnSync } from 'child_process';
import { randomBytes } from 'crypto';
import { once } from 'events';
import { connect } from 'net';
import { Cluster, Redis } from 'ioredis';

import { RedisLedger } from '../../lib/ledger/redis';
import { member, namespaceKeys } from '../../lib/ledger/redis/keys';

/** The Redis the suite runs against: REDIS_URL, else 127.0.0.1:6379. */
export const redisUrl = () => process.env.REDIS_URL || 'redis://127.0.0.1:6379';

let reachable: { ok: boolean; reason: string } | null = null;

/**
 * Whether Redis answers PING, decided synchronously (a child process) so that a test file can
 * choose `describe` or `describe.skip` at load time. Cached per test file.
 */
export function redisReachable(): { ok: boolean; reason: string } {
	if (reachable) return reachable;
	const probe = `
		const { Redis } = require('ioredis');
		const r = new Redis(process.argv[1], { lazyConnect: true, maxRetriesPerRequest: 0, connectTimeout: 2000, retryStrategy: () => null });
		let last = null;
		r.on('error', (e) => (last = e));
		r.ping().then(() => { r.disconnect(); process.exit(0); }, (e) => { console.log((last || e).message); r.disconnect(); process.exit(1); });`;
	const out = spawnSync(process.execPath, ['-e', probe, redisUrl()], { cwd: __dirname, timeout: 8_000, encoding: 'utf8' });
	const where = redisUrl().replace(/\/\/[^@/]*@/, '//***@');
	reachable =
		out.status === 0
			? { ok: true, reason: '' }
			: {
					ok: false,
					reason: `no Redis answered at ${where} (${(out.stdout || out.stderr || 'timeout').trim()}); start Redis or set REDIS_URL to run it`,
				};
	return reachable;
}

/**
 * Prints one line saying what is skipped and why, straight to stderr. Not console.warn: jest keeps
 * the console output of a test file in a buffer and drops it when every test of the file was
 * skipped, so a file skipped whole (redis.race.test.ts without Redis) said nothing.
 */
export function skipNotice(what: string, reason: string): void {
	process.stderr.write(`SKIPPED ${what}: ${reason}.\n`);
}

/**
 * `describe` when what a suite needs is there (`missing` null). Otherwise `describe.skip` with one
 * line on stderr saying why, except under CI (CI=true), where a missing service is a failure: the
 * suite gets one failing test that says what is missing, instead of silently not testing it.
 */
export function describeIfAvailable(what: string, service: string, missing: string | null): jest.Describe {
	if (missing === null) return describe;
	if (process.env.CI === 'true') {
		return ((name: string) =>
			describe(name, () => {
				test(`${what} needs ${service}`, () => {
					throw new Error(`${what}: ${missing}. Under CI a missing ${service} fails the run.`);
				});
			})) as unknown as jest.Describe;
	}
	skipNotice(what, missing);
	return describe.skip;
}

/** `describe` when Redis answers (see describeIfAvailable). */
export function describeIfRedis(what: string, probe = redisReachable): jest.Describe {
	const { ok, reason } = probe();
	return describeIfAvailable(what, 'Redis', ok ? null : reason);
}

/**
 * Credential fields for the suite's Redis in tests that are not about its settings: that Redis is a
 * test server and may run without persistence (127.0.0.1:6379 on the dev machine has no AOF and no
 * save rules), which the nodes refuse unless the credential accepts it. redis.safety.test.ts and
 * redisSafety.engine.test.ts check the rule on servers of their own.
 */
export const SUITE_REDIS_ACCEPTS_LOSS = { acceptKeyLoss: true } as const;

/** The node credential `idempotencyRedisApi` for the suite's Redis (REDIS_URL) under a key prefix, accepting key loss. */
export function suiteRedisCredential(prefix: string) {
	const u = new URL(redisUrl());
	return {
		host: u.hostname,
		port: Number(u.port || 6379),
		password: decodeURIComponent(u.password),
		database: Number(u.pathname.slice(1) || 0),
		prefix,
		...SUITE_REDIS_ACCEPTS_LOSS,
	};
}

export const uniquePrefix = (p = 't') => `${p}-${randomBytes(5).toString('hex')}`;

export function newRedisClient(): Redis {
	const client = new Redis(redisUrl(), { lazyConnect: true, maxRetriesPerRequest: 1 });
	client.on('error', () => undefined);
	return client;
}

/**
 * MONITOR on a plain socket to the suite's Redis: `seen` gets each command the server runs, as its
 * arguments and its source (`lua` for a script's own commands, else the client's address).
 * ioredis's monitor() switches its connection to monitor mode one tick after MONITOR's `+OK`, so
 * another client's command that arrives in the same packet fails it with "Command queue state
 * error" (ioredis issue #1981; seen in a CI run of this suite beside the other test files).
 */
export async function monitorRedis(seen: (args: string[], source: string) => void): Promise<{ stop: () => void }> {
	const url = new URL(redisUrl());
	const socket = connect(Number(url.port || 6379), url.hostname);
	await once(socket, 'connect');
	socket.setEncoding('utf8');
	const password = decodeURIComponent(url.password);
	const user = decodeURIComponent(url.username);
	const command = (...args: string[]) => `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;
	socket.write((password ? command('AUTH', ...(user ? [user, password] : [password])) : '') + command('MONITOR'));
	let oks = password ? 2 : 1;
	let pending = '';
	let started: () => void;
	let failed: (error: Error) => void;
	const ready = new Promise<void>((resolve, reject) => ((started = resolve), (failed = reject)));
	socket.on('data', (chunk: string) => {
		pending += chunk;
		let end: number;
		while ((end = pending.indexOf('\r\n')) >= 0) {
			const line = pending.slice(0, end);
			pending = pending.slice(end + 2);
			if (line.startsWith('-')) failed(new Error(`Redis refused MONITOR: ${line.slice(1)}`));
			else if (oks > 0 && line === '+OK') {
				if (--oks === 0) started();
			} else {
				// +<time> [<db> <source>] "arg" "arg" ...: each argument quoted, escaped as Redis's sdscatrepr does.
				const head = /^\+[\d.]+ \[\d+ ([^\]]+)\] /.exec(line);
				if (head) seen(monitorArgs(line.slice(head[0].length)), head[1]);
			}
		}
	});
	await ready;
	return { stop: () => socket.destroy() };
}

function monitorArgs(text: string): string[] {
	const args: string[] = [];
	const escapes: Record<string, string> = { n: '\n', r: '\r', t: '\t', a: '\x07', b: '\b', '"': '"', '\\': '\\' };
	for (let i = 0; i < text.length; i++) {
		if (text[i] !== '"') continue;
		let arg = '';
		for (i++; i < text.length && text[i] !== '"'; i++) {
			if (text[i] !== '\\') arg += text[i];
			else if (text[i + 1] === 'x') {
				arg += String.fromCharCode(parseInt(text.slice(i + 2, i + 4), 16));
				i += 3;
			} else arg += escapes[text[++i]] ?? text[i];
		}
		args.push(arg);
	}
	return args;
}

/** Deletes every key of a ledger prefix (its namespaces' keys and its own). */
export async function deletePrefix(client: Redis, prefix: string): Promise<number> {
	let deleted = 0;
	let cursor = '0';
	do {
		const [next, keys] = await client.scan(cursor, 'MATCH', `{${prefix}[:}]*`, 'COUNT', 1000);
		cursor = next;
		if (keys.length > 0) deleted += await client.unlink(...keys);
	} while (cursor !== '0');
	return deleted;
}

/** Today, the UTC day by the Redis server's clock (TIME), as 'YYYY-MM-DD', and its day number. */
async function serverDay(client: Redis | Cluster): Promise<{ day: string; number: number }> {
	const [seconds] = await client.time();
	const number = Math.floor(Number(seconds) / 86_400);
	return { day: new Date(number * 86_400_000).toISOString().slice(0, 10), number };
}

/** The contract fixture's helpers for daily counters and the audit stream, on any client of a ledger's prefix. */
function countHelpers(client: Redis | Cluster, prefix: string) {
	return {
		/** A namespace's audit entries, oldest first, in the contract's shape. */
		async audit(namespace: string) {
			const entries = await client.xrange(namespaceKeys(prefix, namespace).audit, '-', '+');
			return entries.map(([, flat]) => {
				const f: Record<string, string> = {};
				for (let i = 0; i < flat.length; i += 2) f[flat[i]] = flat[i + 1];
				return {
					key: f.key,
					step: f.step,
					action: f.action,
					actor: f.actor ?? null,
					status: f.status,
					leaseHolder: f.leaseHolder ?? null,
					fence: f.fence === undefined ? null : Number(f.fence),
				};
			});
		},
		/** Deletes one row's key straight from Redis, as eviction does (its index entries stay). */
		async vanish(namespace: string, key: string, step: string) {
			await client.del(namespaceKeys(prefix, namespace).row(member(key, step)));
		},
		/** Today, the UTC day by the server's clock. */
		ledgerToday: async () => (await serverDay(client)).day,
		/** A namespace's counters of a past day (by the server's clock), written straight into its hash. */
		async putPastCounts(namespace: string, daysAgo: number, counts: Record<string, number>) {
			const { number } = await serverDay(client);
			const day = new Date((number - daysAgo) * 86_400_000).toISOString().slice(0, 10);
			await client.hset(`${namespaceKeys(prefix, namespace).days}${day}`, counts);
		},
	};
}

/**
 * A ledger on `newClient()`'s Redis (a server or a cluster) under `prefix`, its schema ensured,
 * with the contract fixture's helpers (countHelpers).
 */
async function redisFixture<C extends Redis | Cluster>(newClient: () => C, prefix: string, chunkSize?: number) {
	const client = newClient();
	const ledger = new RedisLedger({ client, prefix, chunkSize });
	await ledger.ensureSchema();
	return {
		ledger,
		client,
		prefix,
		...countHelpers(client, prefix),
		/** Another ledger on the same prefix with connections of its own, as a second n8n process has; close it. */
		async another() {
			return new RedisLedger({ client: newClient(), prefix });
		},
	};
}

/** A ledger under its own fresh prefix, and a cleanup that deletes its keys. */
export async function freshRedisLedger(prefix = uniquePrefix(), chunkSize?: number) {
	const fx = await redisFixture(newRedisClient, prefix, chunkSize);
	return {
		...fx,
		async dispose() {
			await deletePrefix(fx.client, prefix);
			await fx.ledger.close();
		},
	};
}

/** Redis Cluster nodes for the cluster suite: REDIS_CLUSTER_NODES="host:port, host:port". */
export const redisClusterNodes = () =>
	(process.env.REDIS_CLUSTER_NODES ?? '')
		.split(/[,\s]+/)
		.filter(Boolean)
		.map((entry) => ({ host: entry.replace(/:\d+$/, ''), port: Number(/:(\d+)$/.exec(entry)?.[1] ?? 6379) }));

export function redisClusterReachable(): { ok: boolean; reason: string } {
	const nodes = redisClusterNodes();
	if (nodes.length === 0) return { ok: false, reason: 'REDIS_CLUSTER_NODES is not set (e.g. "127.0.0.1:7000,127.0.0.1:7001")' };
	const probe = `
		const { Cluster } = require('ioredis');
		const c = new Cluster(JSON.parse(process.argv[1]), { lazyConnect: true, clusterRetryStrategy: () => null, redisOptions: { connectTimeout: 2000, maxRetriesPerRequest: 0 } });
		c.on('error', () => undefined);
		c.ping().then(() => { c.disconnect(); process.exit(0); }, (e) => { console.log(e && e.message); c.disconnect(); process.exit(1); });`;
	const out = spawnSync(process.execPath, ['-e', probe, JSON.stringify(nodes)], { cwd: __dirname, timeout: 8_000, encoding: 'utf8' });
	return out.status === 0
		? { ok: true, reason: '' }
		: { ok: false, reason: `no Redis Cluster answered at ${process.env.REDIS_CLUSTER_NODES} (${(out.stdout || 'timeout').trim()})` };
}

function newRedisClusterClient(): Cluster {
	const client = new Cluster(redisClusterNodes(), { lazyConnect: true, redisOptions: { maxRetriesPerRequest: 1 } });
	client.on('error', () => undefined);
	return client;
}

/** A ledger on a Redis Cluster under its own fresh prefix; the cleanup deletes its keys on every master. */
export async function freshRedisClusterLedger(prefix = uniquePrefix('c')) {
	const fx = await redisFixture(newRedisClusterClient, prefix);
	return {
		...fx,
		/** One script call per namespace: the keys of one call must share a slot. */
		addCountsTrips: (namespaces: number) => namespaces,
		async dispose() {
			for (const node of fx.client.nodes('master')) {
				let cursor = '0';
				do {
					const [next, keys] = await node.scan(cursor, 'MATCH', `{${prefix}[:}]*`, 'COUNT', 1000);
					cursor = next;
					const p = node.pipeline();
					for (const key of keys) p.unlink(key);
					await p.exec();
				} while (cursor !== '0');
			}
			await fx.ledger.close();
		},
	};
}
