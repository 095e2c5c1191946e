import { STATUSES, type ClaimOptions, type ClaimRequest, type Status } from '../../lib/ledger';
import { RedisLedger } from '../../lib/ledger/redis';
import { LAYOUT_VERSION, member, namespaceKeys, versionKey } from '../../lib/ledger/redis/keys';
import { deletePrefix, describeIfRedis, freshRedisLedger, newRedisClient, uniquePrefix } from '../support/redis';

/**
 * Layout 3: a claim writes no index entries for the rows it creates; it notes the call once, and
 * the ledger writes the entries before anything reads the indexes. Each case writes a row again,
 * removes it or lets it expire while its entries are still unwritten, then reads.
 */
const DAY = 86_400_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const seen: ClaimOptions = { mode: 'seen', holder: 'h', leaseMs: 0, ttlMs: DAY };
const lease: ClaimOptions = { mode: 'lease', holder: 'h', leaseMs: 60_000, ttlMs: DAY };
const req = (namespace: string, key: string): ClaimRequest => ({ namespace, key, step: '', fingerprint: null });

describeIfRedis('Redis layout 3 rows')('Redis layout 3: rows a claim leaves unindexed', () => {
	let fx: Awaited<ReturnType<typeof freshRedisLedger>>;
	beforeAll(async () => {
		fx = await freshRedisLedger();
	});
	afterAll(async () => fx && (await fx.dispose()));

	// The status indexes follow the first four fixed keys, in STATUSES order (keys.ts).
	const statusIndex = (ns: string, status: Status) => namespaceKeys(fx.prefix, ns).fixed[4 + STATUSES.indexOf(status)];

	test('a row written again before it was indexed is listed and counted as it is now, and only there', async () => {
		const ns = 'rewritten';
		await fx.ledger.claim([req(ns, 'a'), req(ns, 'b'), req(ns, 'c')], lease);
		await fx.ledger.record([{ namespace: ns, key: 'a', step: '', status: 'completed' }], { ttlMs: DAY });
		await fx.ledger.record([{ namespace: ns, key: 'b', step: '', status: 'needs_review' }], { ttlMs: DAY });
		expect((await fx.ledger.stats(ns)).byStatus).toEqual({ in_progress: 1, completed: 1, failed_retryable: 0, needs_review: 1 });
		const listed = (await fx.ledger.list({ namespace: ns, limit: 10 })).records.map((r) => `${r.key}:${r.status}`).sort();
		expect(listed).toEqual(['a:completed', 'b:needs_review', 'c:in_progress']);
		// No entry of the claim's status for the rows written again: each row is in one status index.
		expect(await fx.client.zscore(statusIndex(ns, 'in_progress'), member('a', ''))).toBeNull();
		expect(await fx.client.zscore(statusIndex(ns, 'in_progress'), member('b', ''))).toBeNull();
		expect(await fx.client.zscore(statusIndex(ns, 'in_progress'), member('c', ''))).not.toBeNull();
	});

	test('a row released before it was indexed leaves no entry, and purge does not count it', async () => {
		const ns = 'released';
		// Retention long enough for the release to find the row live on a loaded machine.
		await fx.ledger.claim([req(ns, 'gone'), req(ns, 'kept')], { ...seen, ttlMs: 1_500 });
		const [released] = await fx.ledger.release({ namespace: ns, key: 'gone', step: '', releasedBy: 'test', ttlMs: DAY });
		expect(released.action).toBe('released');
		await sleep(1_800);
		// Both rows are past their expiry now; only the one that expired is purge's to count.
		expect(await fx.ledger.purgeExpired(100)).toBe(1);
		const k = namespaceKeys(fx.prefix, ns);
		expect(await fx.client.zcard(k.fixed[0])).toBe(0);
		expect(await fx.client.llen(k.unindexed)).toBe(0);
	});

	test('a key that expired and was claimed again before either claim was indexed is listed once, as the second claim wrote it', async () => {
		const ns = 'again';
		await fx.ledger.claim([req(ns, 'k')], { ...seen, ttlMs: 150 });
		await sleep(300);
		const [second] = await fx.ledger.claim([req(ns, 'k')], lease);
		expect(second.kind).toBe('claimed');
		const page = await fx.ledger.list({ namespace: ns, limit: 10 });
		expect(page.records.map((r) => [r.key, r.status, r.fence])).toEqual([['k', 'in_progress', second.kind === 'claimed' ? second.record.fence : null]]);
		expect((await fx.ledger.stats(ns)).byStatus).toEqual({ in_progress: 1, completed: 0, failed_retryable: 0, needs_review: 0 });
		expect(await fx.client.zscore(statusIndex(ns, 'completed'), member('k', ''))).toBeNull();
	});

	test('an expired row indexed before, claimed again and written again before indexing: purge removes the stale entry, the row stays', async () => {
		const ns = 'stale';
		await fx.ledger.claim([req(ns, 'k')], { ...lease, leaseMs: 150, ttlMs: 150 });
		await fx.ledger.stats(ns); // indexes it: an in-progress entry that expires with the row
		await sleep(300);
		await fx.ledger.claim([req(ns, 'k')], seen);
		await fx.ledger.record([{ namespace: ns, key: 'k', step: '', status: 'needs_review' }], { ttlMs: DAY });
		// The old row's in-progress entry is stale: its row expired, and the row now there is another.
		expect(await fx.client.zscore(statusIndex(ns, 'in_progress'), member('k', ''))).not.toBeNull();
		expect(await fx.ledger.purgeExpired(100)).toBe(1);
		expect(await fx.client.zscore(statusIndex(ns, 'in_progress'), member('k', ''))).toBeNull();
		expect((await fx.ledger.get(ns, 'k')).map((r) => r.status)).toEqual(['needs_review']);
		expect((await fx.ledger.list({ namespace: ns, limit: 10 })).records.map((r) => r.status)).toEqual(['needs_review']);
		expect(await fx.ledger.purgeExpired(100)).toBe(0);
	});

	test('many unindexed claims are indexed in slices before a read, and every row is counted', async () => {
		const ns = 'many';
		for (let c = 0; c < 5; c++) await fx.ledger.claim(Array.from({ length: 5_000 }, (_, i) => req(ns, `k${c}_${i}`)), seen);
		const k = namespaceKeys(fx.prefix, ns);
		expect(await fx.client.llen(k.unindexed)).toBe(25);
		const before = fx.ledger.roundTrips;
		expect((await fx.ledger.stats(ns)).byStatus.completed).toBe(25_000);
		// 25,000 rows in slices of 10,000: three indexing calls, then the stats.
		expect(fx.ledger.roundTrips - before).toBeGreaterThanOrEqual(4);
		expect(await fx.client.zcard(k.fixed[0])).toBe(25_000);
		expect(await fx.client.llen(k.unindexed)).toBe(0);
	}, 60_000);
});

describeIfRedis('Redis key layout version')('Redis key layout version', () => {
	let client: ReturnType<typeof newRedisClient>;
	let prefix: string;
	beforeEach(async () => {
		client = newRedisClient();
		await client.connect();
		prefix = uniquePrefix('redis-layout');
	});
	afterEach(async () => {
		await deletePrefix(client, prefix);
		client.disconnect();
	});

	test('a layout 2 prefix is marked as layout 3, and its indexed rows are read beside new unindexed ones', async () => {
		// A layout 2 row: the row and its two index entries, as layout 2's claim wrote them.
		const k = namespaceKeys(prefix, 'ns');
		await client.set(versionKey(prefix), '2');
		const now = Date.now();
		await client.set(k.row(member('old', '')), JSON.stringify({ k: 'old', s: '', st: 'completed', g: 1, a: 1, fs: now, u: now, e: now + DAY }), 'PX', DAY);
		await client.zadd(k.fixed[0], now, member('old', ''));
		await client.zadd(k.fixed[5], now + DAY, member('old', ''));
		await client.zadd(`{${prefix}}:namespaces`, 'NX', 0, 'ns');
		const ledger = new RedisLedger({ client, prefix });
		await ledger.claim([req('ns', 'new')], seen);
		expect(await client.get(versionKey(prefix))).toBe(String(LAYOUT_VERSION));
		expect(LAYOUT_VERSION).toBe(3);
		expect((await ledger.list({ namespace: 'ns', limit: 10 })).records.map((r) => r.key).sort()).toEqual(['new', 'old']);
		expect((await ledger.stats('ns')).byStatus.completed).toBe(2);
	});

	test('a prefix written by a newer layout is refused, in words that say what to do', async () => {
		await client.set(versionKey(prefix), String(LAYOUT_VERSION + 1));
		const ledger = new RedisLedger({ client, prefix });
		await expect(ledger.claim([req('ns', 'k')], seen)).rejects.toThrow(`were written by a newer version of this package (layout ${LAYOUT_VERSION + 1})`);
		expect(await client.exists(namespaceKeys(prefix, 'ns').row(member('k', '')))).toBe(0);
	});
});
