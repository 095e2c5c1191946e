/**
 * A Redis that can lose the ledger must not pass as fine. Each case is a real throwaway
 * redis-server started here with the settings under test: eviction (allkeys-lru under maxmemory),
 * no persistence, CONFIG renamed away, an ACL user without +config, and a safe one. Under CI a
 * missing redis-server fails instead of skipping.
 */
import { Redis } from 'ioredis';
import type { IExecuteFunctions } from 'n8n-workflow';

import { closeAllRedisLedgers, createRedisClient, redisLedger, redisSafety, type RedisSettings } from '../../lib/ledger/redis';
import { closeClient } from '../../lib/ledger/redis/RedisLedger';
import { checkRedisSafety } from '../../lib/ledger/redis/safety';
import { testRedisCredential } from '../../lib/n8n/redisCredential';
import { UnsafeRedisError, checkRedisForRun } from '../../lib/n8n/redisSafety';
import { skipNotice } from '../support/redis';
import { SAFE_REDIS, describeIfRedisServer, startRedis, type ThrowawayRedis } from '../support/throwawayRedis';

const EVICTING = ['--maxmemory', '5mb', '--maxmemory-policy', 'allkeys-lru', '--appendonly', 'yes'];
const NO_PERSISTENCE = ['--save', '', '--appendonly', 'no', '--maxmemory-policy', 'noeviction'];
const NO_CONFIG = ['--rename-command', 'CONFIG', '', '--save', '', '--appendonly', 'no'];

describeIfRedisServer('Redis eviction and persistence checks')('Redis: settings that can lose the ledger', () => {
	const servers: Record<string, ThrowawayRedis> = {};
	beforeAll(async () => {
		[servers.evicting, servers.volatile, servers.noPersistence, servers.noConfig, servers.safe, servers.rdbOnly] = await Promise.all([
			startRedis(EVICTING),
			startRedis(['--maxmemory', '5mb', '--maxmemory-policy', 'volatile-lru', '--appendonly', 'yes']),
			startRedis(NO_PERSISTENCE),
			startRedis(NO_CONFIG),
			startRedis(SAFE_REDIS),
			startRedis(['--appendonly', 'no', '--save', '60 1']),
		]);
	});
	afterEach(() => closeAllRedisLedgers());
	afterAll(() => Object.values(servers).forEach((s) => s.stop()));

	const settings = (server: ThrowawayRedis, extra: Partial<RedisSettings> = {}): RedisSettings => ({
		host: '127.0.0.1',
		port: server.port,
		db: 0,
		tls: false,
		prefix: 'idem',
		cluster: false,
		...extra,
	});
	async function check(s: RedisSettings) {
		const client = createRedisClient(s);
		client.on('error', () => undefined);
		try {
			await client.connect();
			return await checkRedisSafety(client);
		} finally {
			await closeClient(client);
		}
	}

	test('eviction under maxmemory (allkeys-lru, volatile-lru) is a risk named with its fix; noeviction is not', async () => {
		const evicting = await check(settings(servers.evicting));
		expect(evicting.unknown).toEqual([]);
		expect(evicting.risks).toEqual([
			expect.objectContaining({ setting: 'maxmemory-policy', found: 'maxmemory-policy allkeys-lru with maxmemory 5242880', fix: expect.stringContaining('CONFIG SET maxmemory-policy noeviction') }),
		]);
		// Every ledger row has an expiry, so volatile-* policies evict them too.
		expect((await check(settings(servers.volatile))).risks.map((r) => r.found)).toEqual(['maxmemory-policy volatile-lru with maxmemory 5242880']);
		expect(await check(settings(servers.safe))).toEqual({ risks: [], unknown: [] });
	});

	test('no persistence (no AOF, no save rules) is a risk; AOF or RDB save rules are not', async () => {
		const none = await check(settings(servers.noPersistence));
		expect(none.risks).toEqual([
			expect.objectContaining({ setting: 'persistence', found: 'appendonly no and no save rules', fix: expect.stringContaining('CONFIG SET appendonly yes') }),
		]);
		expect(await check(settings(servers.rdbOnly))).toEqual({ risks: [], unknown: [] });
	});

	test('CONFIG renamed away: not failed for that alone; eviction read from INFO, persistence reported as unknown with what to check', async () => {
		const report = await check(settings(servers.noConfig));
		expect(report.risks).toEqual([]);
		expect(report.unknown).toEqual([expect.stringMatching(/did not say whether it persists its data \(CONFIG GET was refused; AOF is off\): make sure it has AOF \(appendonly yes\) or RDB snapshots on/)]);
	});

	test('an ACL user without +config: INFO still answers (safe server: nothing unknown); without +info either, both settings are unknown', async () => {
		servers.safe.cli('ACL', 'SETUSER', 'noconfig', 'on', '>pw', '~*', '&*', '+@all', '-config');
		servers.noPersistence.cli('ACL', 'SETUSER', 'blind', 'on', '>pw', '~*', '&*', '+@all', '-config', '-info');
		expect(await check(settings(servers.safe, { user: 'noconfig', password: 'pw' }))).toEqual({ risks: [], unknown: [] });
		const blind = await check(settings(servers.noPersistence, { user: 'blind', password: 'pw' }));
		expect(blind.risks).toEqual([]);
		expect(blind.unknown).toEqual([
			expect.stringContaining('did not say its maxmemory and maxmemory-policy (CONFIG GET and INFO memory were refused): make sure it has maxmemory-policy noeviction'),
			expect.stringContaining('did not say whether it persists its data (CONFIG GET was refused)'),
		]);
	});

	test('the credential Test: unsafe is an error naming the setting and fix; accepted is OK with the warning; unknown is OK with what to check; safe is plain OK', async () => {
		const base = (server: ThrowawayRedis) => ({ host: '127.0.0.1', port: server.port });
		const unsafe = await testRedisCredential(base(servers.evicting));
		expect(unsafe.status).toBe('Error');
		expect(unsafe.message).toMatch(/maxmemory-policy allkeys-lru with maxmemory 5242880.*CONFIG SET maxmemory-policy noeviction.*I Accept That This Redis May Lose Keys/);
		const restartEmpty = await testRedisCredential(base(servers.noPersistence));
		expect(restartEmpty).toEqual({ status: 'Error', message: expect.stringContaining('CONFIG SET appendonly yes') });
		const accepted = await testRedisCredential({ ...base(servers.noPersistence), acceptKeyLoss: true });
		expect(accepted).toEqual({ status: 'OK', message: expect.stringMatching(/^Connected to Redis\. The ledger Redis can lose keys, and the credential accepts that/) });
		expect(await testRedisCredential(base(servers.noConfig))).toEqual({ status: 'OK', message: expect.stringContaining('Could not check that the ledger Redis keeps its keys') });
		expect(await testRedisCredential(base(servers.safe))).toEqual({ status: 'OK', message: 'Connected to Redis; ledger keys start with "{idem"' });
	});

	test('each run: an unsafe Redis throws; accepted, or not readable, it adds a warning hint and a log line to every run', async () => {
		const seen = { hints: [] as string[], logs: [] as string[] };
		const ctx = {
			addExecutionHints: (...hints: Array<{ message: string }>) => seen.hints.push(...hints.map((h) => h.message)),
			logger: { warn: (message: string) => seen.logs.push(message) },
			getNode: () => ({ name: 'Gate' }),
		} as unknown as IExecuteFunctions;
		const error = await checkRedisForRun(ctx, settings(servers.evicting), false).catch((e) => e);
		expect(error).toBeInstanceOf(UnsafeRedisError);
		expect(seen).toEqual({ hints: [], logs: [] });
		for (let run = 0; run < 2; run++) await checkRedisForRun(ctx, settings(servers.evicting), true);
		expect(seen.hints).toEqual([expect.stringMatching(/^The ledger Redis can lose keys, and the credential accepts that/), expect.stringMatching(/^The ledger Redis can lose keys/)]);
		expect(seen.logs).toEqual(seen.hints.map((h) => `n8n-nodes-idempotency, node "Gate": ${h}`));
		await checkRedisForRun(ctx, settings(servers.noConfig), false);
		expect(seen.hints[2]).toMatch(/^Could not check that the ledger Redis keeps its keys/);
		expect(seen.logs).toHaveLength(3);
	});

	test('per shared client: a risk is read again on the next call, so a fix with CONFIG SET is seen without a restart', async () => {
		const server = await startRedis(NO_PERSISTENCE);
		try {
			const s = settings(server);
			await redisLedger(s).ensureSchema();
			expect((await redisSafety(s)).risks).toHaveLength(1);
			server.cli('CONFIG', 'SET', 'appendonly', 'yes');
			expect(await redisSafety(s)).toEqual({ risks: [], unknown: [] });
		} finally {
			server.stop();
		}
	});

	test('Redis Cluster: every master is read (the suite\'s throwaway cluster runs without persistence)', async () => {
		const nodes = (process.env.REDIS_CLUSTER_NODES ?? '').split(',').filter(Boolean);
		if (nodes.length === 0) return void skipNotice('the Redis Cluster safety check', 'REDIS_CLUSTER_NODES is not set');
		const report = await check({ host: '', port: 0, db: 0, tls: false, prefix: 'idem', cluster: true, clusterNodes: nodes.join(',') });
		expect(report.unknown).toEqual([]);
		expect(report.risks.map((r) => r.setting)).toEqual(nodes.map(() => 'persistence'));
		expect(new Set(report.risks.map((r) => r.server))).toEqual(new Set(nodes));
	});

	test('real eviction: rows claimed on an allkeys-lru Redis vanish under memory pressure, and their records answer lost_lease with missing', async () => {
		const s = settings(servers.evicting);
		const ledger = redisLedger(s);
		const ids = Array.from({ length: 200 }, (_, i) => ({ namespace: 'evict', key: `id-${i}`, step: 'send', fingerprint: null }));
		const claims = await ledger.claim(ids, { mode: 'lease', holder: 'run-1', leaseMs: 600_000, ttlMs: 86_400_000 });
		const fences = claims.map((c) => (c.kind === 'claimed' ? c.record.fence : null));
		expect(fences.every((f) => f !== null)).toBe(true);
		// Other keys fill the memory: LRU evicts the least recently used, the claimed rows among them.
		const filler = new Redis({ port: servers.evicting.port, lazyConnect: true });
		try {
			await filler.connect();
			const blob = 'x'.repeat(64 * 1024);
			for (let i = 0; i < 200; i++) await filler.set(`filler:${i}`, blob);
		} finally {
			filler.disconnect();
		}
		const written = await ledger.record(
			ids.map((id, i) => ({ ...id, status: 'completed' as const, fence: fences[i] })),
			{ ttlMs: 86_400_000, holder: 'run-1' },
		);
		const lost = written.filter((o) => o.kind === 'lost_lease');
		console.log(`eviction: ${lost.length} of ${ids.length} claimed rows were evicted before their record`);
		expect(lost.length).toBeGreaterThan(0);
		expect(lost.every((o) => o.kind === 'lost_lease' && o.missing === true)).toBe(true);
	});
});
