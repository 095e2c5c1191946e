/**
 * Copying a ledger into another (lib/ledger/transfer.ts) between real PostgreSQL and Redis:
 * 20,000 rows each way (100,000 from the Built-in ledger: sqlite.transfer.test.ts), every field checked on arrival, a second run that copies nothing, and a
 * copy stopped half way then run again that ends exactly where an uninterrupted one does. Then the
 * merge rule row by row: nothing that may have been sent is ever reopened. (The tests themselves:
 * ledger.transfer.suite.ts; the Built-in ledger as the source: sqlite.transfer.test.ts.)
 */
import type { LedgerRecord } from '../../lib/ledger';
import { copyLedger } from '../../lib/ledger/transfer';
import { describeIfRedis, freshRedisClusterLedger, redisClusterReachable, uniquePrefix } from '../support/redis';
import { describeBigCopy, describeMergeRule, pg, redis, type Fixture } from './ledger.transfer.suite';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

describeIfRedis('Ledger copy between PostgreSQL and Redis')('Ledger copy', () => {
	// 20,000 rows here; the 100,000-row copies are the user's path, the Built-in ledger into
	// PostgreSQL and into Redis (sqlite.transfer.test.ts), which go through the same import code.
	// Keeps npm test inside CI's time.
	describeBigCopy('PostgreSQL → Redis', pg, redis, 20_000);
	describeBigCopy('Redis → PostgreSQL', redis, pg, 20_000);
});

const cluster = async (): Promise<Fixture> => {
	const f = await freshRedisClusterLedger(uniquePrefix('transfer-c'));
	return { ledger: f.ledger, dispose: f.dispose };
};

describeIfRedis('Ledger copy with Redis Cluster', redisClusterReachable)('Ledger copy with Redis Cluster', () => {
	describeBigCopy('PostgreSQL → Redis Cluster', pg, cluster, 3000, 200);
	describeBigCopy('Redis Cluster → PostgreSQL', cluster, pg, 3000, 200);
});

describeIfRedis('Ledger copy merge rule')('Ledger copy merge rule', () => {
	describeMergeRule('PostgreSQL → Redis', pg, redis);
	describeMergeRule('Redis → PostgreSQL', redis, pg);
});

/**
 * Rows copied into Redis are the Redis ledger's own: found by get (every step of a key), list (by
 * status, phase, across namespaces), stats, and answered by claim, renewLeases, record, release and
 * purgeExpired exactly as rows it wrote itself would be.
 */
function describeCopiedRowsLive(name: string, makeTarget: () => Promise<Fixture>) {
	test(`PostgreSQL → ${name}: the target's own operations see the copied rows`, async () => {
		const source = await pg();
		const target = await makeTarget();
		try {
			const m = 'transfer-live';
			const row = (key: string, step = '') => ({ namespace: m, key, step, fingerprint: null });
			const lease = { mode: 'lease' as const, holder: 'run-1', leaseMs: HOUR, ttlMs: DAY };
			const fenceOf = (o: unknown) => (o as { record: LedgerRecord }).record.fence!;
			const s = await source.ledger.claim(['done', 'review', 'held', 'retry', 'short'].map((k) => row(k)), lease);
			await source.ledger.claim([row('done', 'email')], { mode: 'seen', holder: 'run-1', leaseMs: 0, ttlMs: DAY });
			await source.ledger.markPhase([{ ...row('review'), fence: fenceOf(s[1]) }], 'sending');
			await source.ledger.record(
				[
					{ ...row('done'), status: 'completed', fence: fenceOf(s[0]), result: 'sent once' },
					{ ...row('review'), status: 'needs_review', fence: fenceOf(s[1]) },
					{ ...row('retry'), status: 'failed_retryable', fence: fenceOf(s[3]) },
				],
				{ ttlMs: DAY },
			);
			await source.ledger.record([{ ...row('short'), status: 'completed', fence: fenceOf(s[4]) }], { ttlMs: 1_500 });

			expect(await copyLedger(source.ledger, target.ledger)).toMatchObject({ rowsCopied: 6 });
			const t = target.ledger;
			const steps = async (key: string) => (await t.get(m, key)).map((r) => `${r.step}:${r.status}`).sort();

			// get finds every step of a key, the one not on the empty step too.
			expect(await steps('done')).toEqual([':completed', 'email:completed']);
			// list by status (in the namespace and across namespaces), by phase; stats count them.
			const keysOf = (page: { records: LedgerRecord[] }) => page.records.map((r) => r.key).sort();
			expect(keysOf(await t.list({ namespace: m, status: 'needs_review', limit: 10 }))).toEqual(['review']);
			expect(keysOf(await t.list({ status: 'needs_review', limit: 10 }))).toEqual(['review']);
			expect(keysOf(await t.list({ namespace: m, sending: true, limit: 10 }))).toEqual(['review']);
			expect(keysOf(await t.list({ namespace: m, status: 'in_progress', limit: 10 }))).toEqual(['held']);
			expect((await t.stats(m)).byStatus).toEqual({ in_progress: 1, completed: 3, failed_retryable: 1, needs_review: 1 });

			// claim: a completed key is a duplicate (both steps), a leased one is in progress, a failed one is claimed again.
			const claims = await t.claim([row('done'), row('held'), row('retry')], { ...lease, holder: 'run-2' });
			expect(claims.map((c) => c.kind)).toEqual(['duplicate', 'in_progress', 'claimed']);
			expect((claims[0] as { record: LedgerRecord }).record.result).toBe('sent once');
			expect((claims[2] as { previousStatus: string }).previousStatus).toBe('failed_retryable');
			const [email] = await t.claim([row('done', 'email')], { mode: 'seen', holder: 'run-2', leaseMs: 0, ttlMs: DAY });
			expect(email.kind).toBe('duplicate');

			// The run that holds the copied lease renews it and records under the copied row's token.
			const [held] = await t.get(m, 'held');
			expect(held.leaseHolder).toBe('run-1');
			expect(await t.renewLeases([{ ...row('held'), fence: held.fence! }], 2 * HOUR)).toEqual([true]);
			const [written] = await t.record([{ ...row('held'), status: 'completed', fence: held.fence!, result: 'done late' }], { ttlMs: DAY });
			expect(written.kind).toBe('written');
			expect(keysOf(await t.list({ namespace: m, status: 'in_progress', limit: 10 }))).toEqual(['retry']);
			expect(keysOf(await t.list({ namespace: m, status: 'completed', limit: 10 }))).toEqual(['done', 'done', 'held', 'short']);

			// release: the needs_review row (it may have been sent) with a resolution, then every step of a key.
			const freed = await t.release({ namespace: m, key: 'review', step: null, releasedBy: 'ops', resolution: 'not_sent', ttlMs: DAY });
			expect(freed.map((r) => r.action)).toEqual(['released']);
			expect(await t.get(m, 'review')).toEqual([]);
			expect((await t.list({ namespace: m, status: 'needs_review', limit: 10 })).records).toEqual([]);
			expect((await t.claim([row('review')], lease))[0].kind).toBe('claimed');
			const both = await t.release({ namespace: m, key: 'done', step: null, releasedBy: 'ops', ttlMs: DAY });
			expect(both.map((r) => `${r.step}:${r.action}`).sort()).toEqual([':released', 'email:released']);
			expect(await t.get(m, 'done')).toEqual([]);
			expect((await t.claim([row('done', 'email')], { mode: 'seen', holder: 'run-3', leaseMs: 0, ttlMs: DAY }))[0].kind).toBe('claimed');

			// purgeExpired clears a copied row once its copied retention runs out, from every index.
			await new Promise((resolve) => setTimeout(resolve, 2_000));
			expect(await t.get(m, 'short')).toEqual([]);
			expect(await t.purgeExpired(1000)).toBeGreaterThanOrEqual(1);
			// Left completed: held, and done's email step claimed again in mode seen above.
			expect(keysOf(await t.list({ namespace: m, status: 'completed', limit: 10 }))).toEqual(['done', 'held']);
			expect((await t.stats(m)).byStatus.completed).toBe(2);
		} finally {
			await source.dispose();
			await target.dispose();
		}
	});
}

describeIfRedis('Copied rows in Redis')('Copied rows in Redis', () => {
	describeCopiedRowsLive('Redis', redis);
});

describeIfRedis('Copied rows in Redis Cluster', redisClusterReachable)('Copied rows in Redis Cluster', () => {
	describeCopiedRowsLive('Redis Cluster', cluster);
});
