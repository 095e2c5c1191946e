import { createServer, type AddressInfo } from 'net';

import { COUNTS_KEPT_DAYS, LedgerUnavailableError, type ClaimOptions, type ClaimRequest } from '../../lib/ledger';
import { RedisLedger, closeAllRedisLedgers, redisLedger } from '../../lib/ledger/redis';
import { member, namespaceKeys, registryKey } from '../../lib/ledger/redis/keys';
import { describeLedgerContract } from './ledger.contract';
import {
	deletePrefix,
	describeIfRedis,
	freshRedisClusterLedger,
	freshRedisLedger,
	monitorRedis,
	newRedisClient,
	redisClusterReachable,
	redisUrl,
} from '../support/redis';

const DAY = 86_400_000;
/** The part of a key Redis Cluster hashes to pick a slot (the cluster spec's hash tag rule). */
function hashTag(key: string): string {
	const open = key.indexOf('{');
	const close = open < 0 ? -1 : key.indexOf('}', open + 1);
	return close > open + 1 ? key.slice(open + 1, close) : key;
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const seen: ClaimOptions = { mode: 'seen', holder: 'h', leaseMs: 0, ttlMs: DAY };
const req = (namespace: string, key: string, extra: Partial<ClaimRequest> = {}): ClaimRequest => ({
	namespace,
	key,
	step: '',
	fingerprint: null,
	...extra,
});

describeIfRedis('Redis ledger contract')('Redis', () => {
	describeLedgerContract('Redis', () => freshRedisLedger());
});

describeIfRedis('Redis Cluster ledger contract', redisClusterReachable)('Redis Cluster', () => {
	describeLedgerContract('Redis Cluster', () => freshRedisClusterLedger());

	test('daily counters over many namespaces (many slots): one script call per namespace, nothing lost', async () => {
		const fx = await freshRedisClusterLedger();
		try {
			const names = Array.from({ length: 8 }, (_, i) => `spread-${i}`);
			const before = fx.ledger.roundTrips;
			await fx.ledger.addCounts([...names, ...names].map((namespace, i) => ({ namespace, counts: { hits: 1, [`n${i % 8}`]: 0.5 } })));
			expect(fx.ledger.roundTrips - before).toBe(8);
			for (const [i, namespace] of names.entries()) {
				expect((await fx.ledger.readCounts(namespace, 1))[0].counts).toEqual({ hits: 2, [`n${i}`]: 1 });
			}
		} finally {
			await fx.dispose();
		}
	});

	test('a batch over many namespaces (many slots) is split per namespace', async () => {
		const fx = await freshRedisClusterLedger();
		try {
			const requests = Array.from({ length: 40 }, (_, i) => req(`spread-${i % 8}`, `k${i}`));
			const out = await fx.ledger.claim(requests, seen);
			expect(out.every((o) => o.kind === 'claimed')).toBe(true);
			expect((await fx.ledger.claim(requests, seen)).every((o) => o.kind === 'duplicate')).toBe(true);
			const page = await fx.ledger.list({ limit: 100 });
			expect(page.records).toHaveLength(40);
		} finally {
			await fx.dispose();
		}
	});
});

describeIfRedis('Redis ledger specifics')('Redis ledger specifics', () => {
	let fx: Awaited<ReturnType<typeof freshRedisLedger>>;
	beforeAll(async () => {
		fx = await freshRedisLedger(undefined, 1000);
	});
	afterAll(async () => fx && (await fx.dispose()));

	test('10,000 keys in 1,000-key chunks cost one pipeline of ten script calls', async () => {
		const keys = Array.from({ length: 10_000 }, (_, i) => req('bulk', `k${i}`));
		const before = fx.ledger.roundTrips;
		const out = await fx.ledger.claim(keys, seen);
		expect(out.every((o) => o.kind === 'claimed')).toBe(true);
		expect(fx.ledger.roundTrips - before).toBe(1);
		const again = await fx.ledger.claim(keys, seen);
		expect(again.every((o) => o.kind === 'duplicate')).toBe(true);
		expect((await fx.ledger.stats('bulk')).duplicatesBlocked).toBe(10_000);
	});

	test('every key of a namespace has one hash tag (one cluster slot), whatever the names contain', () => {
		const ns = 'we{ird}:name%';
		const k = namespaceKeys(fx.prefix, ns);
		const keys = [...k.fixed, k.row(member('a}b{', 'st:ep')), k.steps('x:y'), k.checkpoint('c{}'), k.audit];
		const tags = new Set(keys.map(hashTag));
		expect(tags.size).toBe(1);
		expect(hashTag(namespaceKeys(fx.prefix, 'other').fixed[0])).not.toBe([...tags][0]);
	});

	test('names with braces, colons and percent signs stay separate rows', async () => {
		const out = await fx.ledger.claim(
			[req('n{1}', 'a:b', { step: 'c' }), req('n{1}', 'a', { step: 'b:c' }), req('n{1}:x', 'a'), req('n%7B1}', 'a:b', { step: 'c' })],
			seen,
		);
		expect(out.map((o) => o.kind)).toEqual(['claimed', 'claimed', 'claimed', 'claimed']);
		expect((await fx.ledger.get('n{1}', 'a:b')).map((r) => [r.key, r.step])).toEqual([['a:b', 'c']]);
	});

	test('numeric versions compare exactly, beyond float precision', async () => {
		const newer: ClaimOptions = { ...seen, mode: 'newer' };
		const ns = 'versions';
		expect((await fx.ledger.claim([req(ns, 'v', { version: '100000000000000000000' })], newer))[0].kind).toBe('claimed');
		expect((await fx.ledger.claim([req(ns, 'v', { version: '100000000000000000001' })], newer))[0].kind).toBe('claimed');
		expect((await fx.ledger.claim([req(ns, 'v', { version: '100000000000000000000.5' })], newer))[0].kind).toBe('duplicate');
		expect((await fx.ledger.claim([req(ns, 'w', { version: '-2.50' })], newer))[0].kind).toBe('claimed');
		expect((await fx.ledger.claim([req(ns, 'w', { version: '-2.5' })], newer))[0].kind).toBe('duplicate');
		expect((await fx.ledger.claim([req(ns, 'w', { version: '-2.4' })], newer))[0].kind).toBe('claimed');
	});

	test('secondary indexes do not outlive expired rows: purge cleans them and forgets empty namespaces', async () => {
		const ns = 'short-lived';
		await fx.ledger.claim(Array.from({ length: 30 }, (_, i) => req(ns, `s${i}`)), { ...seen, ttlMs: 200 });
		const k = namespaceKeys(fx.prefix, ns);
		// Layout 3: the claim noted its 30 new rows once, for indexing before the indexes are read.
		expect(await fx.client.zcard(k.fixed[0])).toBe(0);
		const noted = await fx.client.lrange(k.unindexed, 0, -1);
		expect(noted.map((text) => JSON.parse(text).m.length)).toEqual([30]);
		expect(await fx.client.zscore(registryKey(fx.prefix), ns)).not.toBeNull();
		await sleep(400);
		expect((await fx.ledger.stats(ns)).byStatus.completed).toBe(0);
		let purged = 0;
		for (let n = -1; n !== 0; ) {
			n = await fx.ledger.purgeExpired(7);
			expect(n).toBeLessThanOrEqual(7);
			purged += n;
		}
		expect(purged).toBeGreaterThanOrEqual(30);
		for (const key of [...k.fixed, k.unindexed]) expect(await fx.client.exists(key) === 0 || key.endsWith('meta')).toBe(true);
		expect(await fx.client.zscore(registryKey(fx.prefix), ns)).toBeNull();
	});

	test('stats work in bounded slices and still count exactly', async () => {
		const ns = 'sliced-stats';
		const lease = (leaseMs: number, ttlMs: number): ClaimOptions => ({ mode: 'lease', holder: 'r', leaseMs, ttlMs });
		// 1,500 rows that expire with their lease (dead index entries, skipped: stats read only the
		// rows still live at the cutoff), 1,200 lapsed leases, one live: 1,201 rows read, in slices.
		await fx.ledger.claim(Array.from({ length: 1_500 }, (_, i) => req(ns, `dead${i}`)), lease(100, 100));
		const [stuckFirst] = await fx.ledger.claim(Array.from({ length: 1_200 }, (_, i) => req(ns, `stuck${i}`)), lease(100, DAY));
		await fx.ledger.claim([req(ns, 'live')], lease(60_000, DAY));
		await sleep(300);
		const before = fx.ledger.roundTrips;
		const stats = await fx.ledger.stats(ns);
		expect(fx.ledger.roundTrips - before).toBeGreaterThanOrEqual(2);
		expect(stats.byStatus.in_progress).toBe(1_201);
		expect(stats.stuck).toBe(1_200);
		expect(stats.oldestInProgressAt).toEqual(stuckFirst.kind === 'claimed' ? stuckFirst.record.firstSeenAt : null);
		// Layout 2 writes no lease or first-seen index: the in-progress status index alone.
		const k = namespaceKeys(fx.prefix, ns);
		expect(await fx.client.exists(k.fixed[2], k.fixed[3])).toBe(0);
	});

	test('list reads dead index entries as absent and removes them', async () => {
		const ns = 'lazy';
		await fx.ledger.claim([req(ns, 'gone')], { ...seen, ttlMs: 150 });
		await fx.ledger.claim([req(ns, 'stays')], seen);
		await sleep(300);
		const page = await fx.ledger.list({ namespace: ns, limit: 10 });
		expect(page.records.map((r) => r.key)).toEqual(['stays']);
		expect(await fx.client.zcard(namespaceKeys(fx.prefix, ns).fixed[0])).toBe(1);
	});

	test('list without a namespace pages through every namespace', async () => {
		const names = ['all-a', 'all-b', 'all-c'];
		for (const ns of names) await fx.ledger.claim([req(ns, '1'), req(ns, '2')], { ...seen, mode: 'lease', leaseMs: 60_000 });
		const got: string[] = [];
		let cursor: string | null = null;
		do {
			const page = await fx.ledger.list({ status: 'in_progress', limit: 4, cursor });
			got.push(...page.records.filter((r) => names.includes(r.namespace)).map((r) => `${r.namespace}/${r.key}`));
			cursor = page.nextCursor;
		} while (cursor);
		expect(got.sort()).toEqual(names.flatMap((ns) => [`${ns}/1`, `${ns}/2`]));
	});

	test('release writes an audit entry saying who and when', async () => {
		const ns = 'audited';
		await fx.ledger.claim([req(ns, 'x')], seen);
		expect(await fx.ledger.release({ namespace: ns, key: 'x', step: '', releasedBy: 'alice', ttlMs: DAY })).toEqual([
			{ step: '', status: 'completed', phase: null, action: 'released' },
		]);
		const entries = await fx.client.xrange(namespaceKeys(fx.prefix, ns).audit, '-', '+');
		expect(entries).toHaveLength(1);
		const fields = Object.fromEntries(
			entries[0][1].reduce<string[][]>((pairs, v, i, all) => (i % 2 ? pairs : [...pairs, [v, all[i + 1]]]), []),
		);
		expect(fields).toMatchObject({ action: 'release', key: 'x', step: '', status: 'completed', actor: 'alice' });
		expect(Math.abs(Number(fields.at) - Date.now())).toBeLessThan(60_000);

		// A step that may have been sent, recorded as sent: the entry keeps what the row was.
		const [claimed] = await fx.ledger.claim([req(ns, 'y', { step: 'mail' })], { ...seen, mode: 'lease', holder: 'run-1', leaseMs: 60_000 });
		const fence = claimed.kind === 'claimed' ? claimed.record.fence! : -1;
		expect(await fx.ledger.markPhase([{ namespace: ns, key: 'y', step: 'mail', fence }], 'sending')).toEqual([true]);
		await fx.ledger.release({ namespace: ns, key: 'y', step: 'mail', releasedBy: 'bob', ttlMs: DAY, evenIfHeld: true, resolution: 'sent' });
		const all = await fx.client.xrange(namespaceKeys(fx.prefix, ns).audit, '-', '+');
		const sent = Object.fromEntries(all[1][1].reduce<string[][]>((pairs, v, i, xs) => (i % 2 ? pairs : [...pairs, [v, xs[i + 1]]]), []));
		expect(sent).toMatchObject({
			action: 'resolve_sent', key: 'y', step: 'mail', status: 'in_progress', phase: 'sending',
			leaseHolder: 'run-1', fence: String(fence), resolution: 'sent', actor: 'bob',
		});
		const [row] = await fx.ledger.get(ns, 'y');
		expect(row).toMatchObject({ status: 'completed', leaseHolder: null, fence: null, phase: null });
		const result = row.result as { resolvedAt: string; before: unknown };
		expect(result).toMatchObject({ resolution: 'sent', resolvedBy: 'bob', before: null });
		expect(Math.abs(Date.parse(result.resolvedAt) - row.updatedAt.getTime())).toBeLessThan(1_000);
		expect(result.resolvedAt).toBe(row.updatedAt.toISOString());
	});

	test('a day of counters is one hash under the namespace\'s hash tag, expiring COUNTS_KEPT_DAYS days after its day', async () => {
		const ns = 'counted{x}:y';
		await fx.ledger.addCounts([{ namespace: ns, counts: { hits: 2, costUsd: 0.25 } }]);
		const [seconds] = await fx.client.time();
		const dayNumber = Math.floor(Number(seconds) / 86_400);
		const key = `${namespaceKeys(fx.prefix, ns).days}${new Date(dayNumber * DAY).toISOString().slice(0, 10)}`;
		expect(hashTag(key)).toBe(hashTag(namespaceKeys(fx.prefix, ns).fixed[0]));
		expect(await fx.client.hgetall(key)).toEqual({ hits: '2', costUsd: '0.25' });
		// Readable through the last kept day, gone at the start of the next: the same instant whoever adds.
		const expireAt = (dayNumber + COUNTS_KEPT_DAYS + 1) * 86_400;
		expect(await fx.client.ttl(key)).toBeGreaterThan(expireAt - Number(seconds) - 5);
		expect(await fx.client.ttl(key)).toBeLessThanOrEqual(expireAt - Number(seconds));
	});

	test('an add over several namespaces is one script call on the server (MONITOR), a read is one', async () => {
		const names = ['mon-a', 'mon-b', 'mon-c'];
		const add = () => fx.ledger.addCounts(names.map((namespace, i) => ({ namespace, counts: { hits: i + 1 } })));
		// ioredis loads a script on its first use on a connection (SCRIPT LOAD, or EVAL instead of EVALSHA).
		await add();
		await fx.ledger.readCounts('mon-b', 7);
		const seen: string[][] = [];
		// Commands a client sent; the scripts' own commands are reported with the source "lua".
		const monitor = await monitorRedis((args, source) => {
			if (source !== 'lua' && args.some((a) => a.includes(fx.prefix))) seen.push(args);
		});
		try {
			const before = fx.ledger.roundTrips;
			await add();
			await fx.ledger.readCounts('mon-b', 7);
			expect(fx.ledger.roundTrips - before).toBe(2);
			// MONITOR reports asynchronously: wait for a marker sent after the calls.
			const marker = `${fx.prefix}-marker`;
			await fx.client.echo(marker);
			for (let i = 0; i < 100 && !seen.some((a) => a.includes(marker)); i++) await sleep(10);
			// Two script calls and the marker, nothing else; the add's call names the three namespaces' day keys.
			expect(seen.map((a) => (/^eval(sha)?$/i.test(a[0]) ? 'script' : a[0].toLowerCase()))).toEqual(['script', 'script', 'echo']);
			expect(seen[0].slice(3, 3 + Number(seen[0][2]))).toEqual(names.map((ns) => namespaceKeys(fx.prefix, ns).days));
		} finally {
			monitor.stop();
		}
		expect((await fx.ledger.readCounts('mon-c', 1))[0].counts).toEqual({ hits: 6 });
	});

	test('a ledger with another prefix does not see these rows', async () => {
		const client = newRedisClient();
		const other = new RedisLedger({ client, prefix: `${fx.prefix}-other` });
		try {
			expect((await other.claim([req('bulk', 'k1')], seen))[0].kind).toBe('claimed');
		} finally {
			await deletePrefix(client, other.prefix);
			await other.close();
		}
	});
});

describe('Redis connection errors fail closed with readable messages', () => {
	afterAll(() => closeAllRedisLedgers());
	const base = { host: '127.0.0.1', port: 1, db: 0, tls: false, prefix: 'idem', cluster: false };

	test('a refused port says so, fast, without the password', async () => {
		const ledger = redisLedger({ ...base, password: 'hunter2-secret' });
		const started = Date.now();
		const error = await ledger.claim([req('ns', 'k')], seen).catch((e) => e);
		expect(error).toBeInstanceOf(LedgerUnavailableError);
		expect(error.message).toMatch(/refused the connection/);
		expect(error.hint).toMatch(/host and port/);
		expect(error.code).toBe('ECONNREFUSED');
		expect(`${error.message} ${error.hint}`).not.toContain('hunter2');
		// A hang guard only (a reconnect loop would run into the 60 s command timeout), generous for a busy machine.
		expect(Date.now() - started).toBeLessThan(15_000);
		// The failed client has ended (no reconnect loop in the background); the next call starts afresh.
		expect(redisLedger({ ...base, password: 'hunter2-secret' })).not.toBe(ledger);
	});

	test('an unknown host name says so', async () => {
		const ledger = redisLedger({ ...base, host: 'no-such-host.invalid', port: 6379 });
		const error = await ledger.ensureSchema().catch((e) => e);
		expect(error).toBeInstanceOf(LedgerUnavailableError);
		expect(error.message).toMatch(/host name could not be found/);
	});

	test('a server that is not Redis (here an HTTP-like reply) says so', async () => {
		const server = createServer((socket) => socket.end('HTTP/1.1 400 Bad Request\r\n\r\n', () => socket.destroy()));
		await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
		try {
			const ledger = redisLedger({ ...base, port: (server.address() as AddressInfo).port });
			const error = await ledger.ensureSchema().catch((e) => e);
			expect(error).toBeInstanceOf(LedgerUnavailableError);
			expect(error.message).toMatch(/does not speak the Redis protocol/);
			expect(error.hint).toMatch(/TLS/);
		} finally {
			await closeAllRedisLedgers();
			await new Promise((resolve) => server.close(resolve));
		}
	});

	describeIfRedis('Redis authentication errors')('against the real Redis', () => {
		test('TLS against a plain Redis fails within the connect timeout and mentions TLS', async () => {
			const u = new URL(redisUrl());
			const ledger = redisLedger({ ...base, host: u.hostname, port: Number(u.port || 6379), tls: true, connectTimeoutMs: 1_000 });
			const started = Date.now();
			const error = await ledger.ensureSchema().catch((e) => e);
			expect(error).toBeInstanceOf(LedgerUnavailableError);
			expect(`${error.message} ${error.hint}`).toMatch(/TLS/);
			// The 1 s connect timeout plus a margin that holds on a busy machine.
			expect(Date.now() - started).toBeLessThan(1_000 + 5_000);
		});

		test('a wrong user or password says so', async () => {
			const u = new URL(redisUrl());
			const ledger = redisLedger({ ...base, host: u.hostname, port: Number(u.port || 6379), user: 'no-such-user', password: 'wrong' });
			const error = await ledger.ensureSchema().catch((e) => e);
			expect(error).toBeInstanceOf(LedgerUnavailableError);
			expect(error.message).toMatch(/rejected the user name or password/);
			expect(`${error.message} ${error.hint}`).not.toContain('wrong');
		});
	});
});
