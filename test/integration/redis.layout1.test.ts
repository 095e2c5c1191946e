import type { Redis } from 'ioredis';

import type { ClaimOptions } from '../../lib/ledger';
import { RedisLedger } from '../../lib/ledger/redis';
import { LAYOUT_VERSION, member, namespaceKeys, versionKey } from '../../lib/ledger/redis/keys';
import { deletePrefix, describeIfRedis, newRedisClient, uniquePrefix } from '../support/redis';
import { copyLedger } from '../../lib/ledger/transfer';
import { SCRIPTS as LAYOUT1 } from '../support/redisLayout1Scripts';

const DAY = 86_400_000;
const lease: ClaimOptions = { mode: 'lease', holder: 'old-run', leaseMs: 60_000, ttlMs: DAY };
const seen: ClaimOptions = { mode: 'seen', holder: 'h', leaseMs: 0, ttlMs: DAY };

/**
 * A persistent Redis keeps rows that an earlier version of this package wrote in layout 1: the
 * steps of a key in a set per key (`{p:ns}:k:<key>`), no `{p:ns}:members` index. These rows are
 * written here with the layout 1 scripts themselves (test/support/redisLayout1Scripts.ts), then
 * read, blocked on, rewritten, released, listed and purged by the current ledger.
 */
describeIfRedis('Redis layout 1 rows')('Redis: rows written in layout 1 keep working', () => {
	let client: Redis;
	let prefix: string;
	const ns = 'old-rows';

	/** Claims with the layout 1 script, in its own argument format. */
	async function claimV1(rows: Array<{ key: string; step: string; fingerprint?: string }>, options: ClaimOptions): Promise<void> {
		const k = namespaceKeys(prefix, ns);
		const members = rows.map((r) => member(r.key, r.step));
		const args: string[] = [options.mode, options.holder ?? '', String(options.leaseMs), String(options.ttlMs), '', String(rows.length)];
		rows.forEach((r, j) => args.push(members[j], r.key, r.step, r.fingerprint === undefined ? '' : `=${r.fingerprint}`, ''));
		const keys = [...k.fixed, ...members.map(k.row), ...rows.map((r) => k.steps(r.key))];
		await client.eval(LAYOUT1.idemLedgerClaim, keys.length, ...keys, ...args);
		await client.zadd(`{${prefix}}:namespaces`, 'NX', 0, ns);
	}

	beforeEach(async () => {
		client = newRedisClient();
		await client.connect();
		prefix = uniquePrefix('redispc-l1');
		await client.set(versionKey(prefix), '1');
		await claimV1([{ key: 'order-1', step: '' }, { key: 'order-1', step: 'charge' }, { key: 'order-1', step: 'mail:x' }], seen);
		await claimV1([{ key: 'order-2', step: '', fingerprint: 'fp-a' }], seen);
		await claimV1([{ key: 'order-3', step: 'send' }], lease);
	});

	afterEach(async () => {
		await deletePrefix(client, prefix);
		client.disconnect();
	});

	test('the rows are layout 1 (a step set per key, no members index), and the ledger marks the prefix as the current layout', async () => {
		const k = namespaceKeys(prefix, ns);
		expect((await client.smembers(k.steps('order-1'))).sort()).toEqual([member('order-1', ''), member('order-1', 'charge'), member('order-1', 'mail:x')].sort());
		expect(await client.exists(k.members)).toBe(0);
		const ledger = new RedisLedger({ client, prefix });
		await ledger.ensureSchema();
		expect(await client.get(versionKey(prefix))).toBe(String(LAYOUT_VERSION));
		expect(LAYOUT_VERSION).toBe(3);
	});

	test('get finds every step of a layout 1 key, once each, also after a step is rewritten in layout 2', async () => {
		const ledger = new RedisLedger({ client, prefix });
		expect((await ledger.get(ns, 'order-1')).map((r) => r.step)).toEqual(['', 'charge', 'mail:x']);
		// Rewritten by the current ledger: the member is now in layout 2's index and still in the old set.
		await ledger.record([{ namespace: ns, key: 'order-1', step: 'charge', status: 'failed_retryable', fingerprint: null }], { ttlMs: DAY });
		await ledger.claim([{ namespace: ns, key: 'order-1', step: 'charge', fingerprint: null }], lease);
		const steps = await ledger.get(ns, 'order-1');
		expect(steps.map((r) => [r.step, r.status])).toEqual([
			['', 'completed'],
			['charge', 'in_progress'],
			['mail:x', 'completed'],
		]);
		expect(steps[1].attempts).toBe(2);
	});

	test('claims are blocked by layout 1 rows as before: done, in progress, and a differing payload', async () => {
		const ledger = new RedisLedger({ client, prefix });
		const out = await ledger.claim(
			[
				{ namespace: ns, key: 'order-1', step: '', fingerprint: null },
				{ namespace: ns, key: 'order-3', step: 'send', fingerprint: null },
				{ namespace: ns, key: 'order-2', step: '', fingerprint: 'fp-b' },
				{ namespace: ns, key: 'order-4', step: '', fingerprint: null },
			],
			{ ...lease, holder: 'new-run' },
		);
		expect(out.map((o) => o.kind)).toEqual(['duplicate', 'in_progress', 'mismatch', 'claimed']);
		if (out[1].kind !== 'in_progress') throw new Error('expected in_progress');
		expect(out[1].record.leaseHolder).toBe('old-run');
		expect((await ledger.stats(ns)).byStatus).toEqual({ in_progress: 2, completed: 4, failed_retryable: 0, needs_review: 0 });
	});

	test('a layout 1 lease is renewed and its row recorded by its fence', async () => {
		const ledger = new RedisLedger({ client, prefix });
		const [row] = await ledger.get(ns, 'order-3');
		expect(await ledger.renewLeases([{ namespace: ns, key: 'order-3', step: 'send', fence: row.fence! }], 120_000)).toEqual([true]);
		const [done] = await ledger.record(
			[{ namespace: ns, key: 'order-3', step: 'send', status: 'completed', fingerprint: null, fence: row.fence!, result: { ok: 1 } }],
			{ holder: 'old-run', ttlMs: DAY },
		);
		expect(done.kind).toBe('written');
		expect((await ledger.get(ns, 'order-3')).map((r) => [r.status, r.result])).toEqual([['completed', { ok: 1 }]]);
	});

	test('stats read the in-progress rows layout 1 indexed by lease, and a layout 2 lease is indexed by its status alone', async () => {
		const ledger = new RedisLedger({ client, prefix });
		const k = namespaceKeys(prefix, ns);
		const leaseIndex = k.fixed[2];
		const firstSeenIndex = k.fixed[3];
		const [old] = await ledger.get(ns, 'order-3');
		expect(await client.zcard(leaseIndex)).toBe(1);
		let stats = await ledger.stats(ns);
		expect([stats.byStatus.in_progress, stats.stuck, stats.oldestInProgressAt]).toEqual([1, 0, old.firstSeenAt]);
		// A lease taken now, which lapses: found stuck by reading its row; no lease or first-seen entry.
		const [fresh] = await ledger.claim([{ namespace: ns, key: 'order-4', step: '', fingerprint: null }], { ...lease, leaseMs: 100 });
		expect(fresh.kind).toBe('claimed');
		await new Promise((r) => setTimeout(r, 300));
		stats = await ledger.stats(ns);
		expect([stats.byStatus.in_progress, stats.stuck, stats.oldestInProgressAt]).toEqual([2, 1, old.firstSeenAt]);
		expect(await client.zcard(leaseIndex)).toBe(1);
		expect(await client.zcard(firstSeenIndex)).toBe(1);
		// Settling the layout 1 row removes the entries it had there.
		await ledger.record([{ namespace: ns, key: 'order-3', step: 'send', status: 'completed', fingerprint: null, fence: old.fence! }], { holder: 'old-run', ttlMs: DAY });
		expect(await client.exists(leaseIndex, firstSeenIndex)).toBe(0);
		stats = await ledger.stats(ns);
		expect([stats.byStatus.in_progress, stats.stuck]).toEqual([1, 1]);
		expect(stats.oldestInProgressAt).toEqual(fresh.kind === 'claimed' ? fresh.record.firstSeenAt : null);
	});

	test('release finds every layout 1 step of a key and leaves no index entry behind', async () => {
		const ledger = new RedisLedger({ client, prefix });
		const released = await ledger.release({ namespace: ns, key: 'order-1', step: null, releasedBy: 'ops', ttlMs: DAY });
		expect(released.map((s) => [s.step, s.action])).toEqual([
			['', 'released'],
			['charge', 'released'],
			['mail:x', 'released'],
		]);
		expect(await ledger.get(ns, 'order-1')).toEqual([]);
		const k = namespaceKeys(prefix, ns);
		expect(await client.scard(k.steps('order-1'))).toBe(0);
		expect((await ledger.list({ namespace: ns, limit: 10 })).records.map((r) => r.key).sort()).toEqual(['order-2', 'order-3']);
	});

	test('an expired layout 1 row is claimed afresh, its old index entries replaced; get forgets the entries of gone rows', async () => {
		const ledger = new RedisLedger({ client, prefix });
		// The layout 1 rows expire (Redis drops them); their index entries stay until cleaned.
		const k = namespaceKeys(prefix, ns);
		for (const m of [member('order-1', ''), member('order-1', 'charge'), member('order-1', 'mail:x'), member('order-3', 'send')]) {
			await client.del(k.row(m));
		}
		const out = await ledger.claim([{ namespace: ns, key: 'order-3', step: 'send', fingerprint: null }], seen);
		expect(out[0].kind).toBe('claimed');
		// The layout 1 in_progress entries of order-3 are gone: it is no longer counted in progress.
		expect((await ledger.stats(ns)).byStatus.in_progress).toBe(0);
		expect(await client.zscore(k.fixed[2], member('order-3', 'send'))).toBeNull();
		expect(await client.zscore(k.fixed[3], member('order-3', 'send'))).toBeNull();
		expect(await ledger.get(ns, 'order-1')).toEqual([]);
		// get found order-1's rows gone and removed their index entries: order-2 and order-3 are left,
		// each counted once.
		expect((await client.zrange(k.fixed[0], 0, -1)).sort()).toEqual([member('order-2', ''), member('order-3', 'send')]);
		expect((await ledger.stats(ns)).byStatus).toEqual({ in_progress: 0, completed: 2, failed_retryable: 0, needs_review: 0 });
	});
	test('a ledger copy exports every layout 1 row beside layout 2 ones, and imports over a layout 1 row as the ledger writes', async () => {
		const ledger = new RedisLedger({ client, prefix });
		await ledger.claim([{ namespace: ns, key: 'order-5', step: 'ship', fingerprint: null }], seen);
		const rows: string[] = [];
		let cursor: string | null = null;
		do {
			const page: Awaited<ReturnType<RedisLedger['exportBatch']>> = await ledger.exportBatch(cursor, 2);
			rows.push(...page.rows.map((r) => `${r.key}|${r.step}|${r.status}`));
			cursor = page.next;
		} while (cursor !== null);
		expect(rows.sort()).toEqual(['order-1|charge|completed', 'order-1|mail:x|completed', 'order-1||completed', 'order-2||completed', 'order-3|send|in_progress', 'order-5|ship|completed']);

		// Into a layout 2 ledger: every step of a layout 1 key arrives and is found there.
		const otherPrefix = uniquePrefix('redispc-l1-copy');
		const other = new RedisLedger({ client, prefix: otherPrefix });
		try {
			expect(await copyLedger(ledger, other)).toMatchObject({ rowsCopied: 6 });
			expect((await other.get(ns, 'order-1')).map((r) => r.step)).toEqual(['', 'charge', 'mail:x']);
			expect((await other.claim([{ namespace: ns, key: 'order-1', step: 'mail:x', fingerprint: null }], seen))[0].kind).toBe('duplicate');
			// Back into the layout 1 prefix, order-3's step now completed there: it replaces the layout 1 row once, in every index.
			const [row] = await other.get(ns, 'order-3');
			await other.record([{ namespace: ns, key: 'order-3', step: 'send', status: 'completed', fingerprint: null, fence: row.fence! }], { ttlMs: DAY });
			expect(await copyLedger(other, ledger)).toMatchObject({ rowsCopied: 0, rowsReplaced: 1, rowsAlreadyPresent: 5 });
			expect((await ledger.get(ns, 'order-3')).map((r) => [r.step, r.status])).toEqual([['send', 'completed']]);
			expect((await ledger.list({ namespace: ns, status: 'in_progress', limit: 10 })).records).toEqual([]);
			expect((await ledger.stats(ns)).byStatus).toEqual({ in_progress: 0, completed: 6, failed_retryable: 0, needs_review: 0 });
		} finally {
			await deletePrefix(client, otherPrefix);
		}
	});
});
