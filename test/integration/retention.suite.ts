/**
 * Retention that keeps up by itself: a ledger with a backlog of expired rows (or, on Redis, of the
 * bookkeeping rows leave behind when they expire) loses it through its own background turns while
 * claims go on, with no list, purge or cron; and nothing live goes with it: a row under lease, a
 * needs_review row, a row that may have been sent, a checkpoint, a counter day still kept.
 */
import { COUNTS_KEPT_DAYS, PostgresLedger, RedisLedger, type AutoPurgeOptions, type Ledger } from '../../lib/ledger';
import { namespaceKeys } from '../../lib/ledger/redis/keys';
import { freshPostgresLedger, newPool } from '../support/db';
import { describeIfRedis, freshRedisLedger, newRedisClient } from '../support/redis';

/**
 * Batches and the bound per turn as shipped, a turn every 2 s instead of 10: a backlog of 100,000
 * rows goes in one turn. One batch a turn, the old bound, would need 100 s.
 */
export const AUTO_PURGE: AutoPurgeOptions = { everyMs: 2_000, batch: 2_000, maxBatches: 50 };
const BACKLOG = 100_000;
const NS = 'retention';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface Subject {
	/** The ledger under test, with AUTO_PURGE. */
	ledger: Ledger;
	/** A ledger on the same storage with no background purge, as an older version left it. */
	seed: Ledger;
	/** What waits to be purged: expired rows (PostgreSQL, Built-in) or bookkeeping of rows gone (Redis). */
	waiting(): Promise<number>;
	putPastCounts(namespace: string, daysAgo: number, counts: Record<string, number>): Promise<void>;
	dispose(): Promise<void>;
}

async function postgresSubject(): Promise<Subject> {
	const fx = await freshPostgresLedger();
	const pool = newPool(4);
	const ledger = new PostgresLedger({ pool, table: fx.table, autoPurge: AUTO_PURGE });
	return {
		ledger,
		seed: fx.ledger,
		async waiting() {
			const { rows } = await fx.pool.query(`SELECT count(*)::int AS n FROM "public"."${fx.table}" WHERE expires_at <= now()`);
			return rows[0].n;
		},
		putPastCounts: fx.putPastCounts,
		async dispose() {
			await ledger.close();
			await fx.dispose();
		},
	};
}

async function redisSubject(): Promise<Subject> {
	const fx = await freshRedisLedger();
	const ledger = new RedisLedger({ client: newRedisClient(), prefix: fx.prefix, autoPurge: AUTO_PURGE });
	const k = namespaceKeys(fx.prefix, NS);
	return {
		ledger,
		seed: fx.ledger,
		// Claim notes not yet indexed, and index entries whose row is gone (all but the live rows).
		async waiting() {
			const [notes, listed, live] = await Promise.all([fx.client.llen(k.unindexed), fx.client.zcard(k.fixed[0]), countLive(fx.client, k.base)]);
			return notes + Math.max(0, listed - live);
		},
		putPastCounts: fx.putPastCounts,
		async dispose() {
			await ledger.close();
			await fx.dispose();
		},
	};
}

async function countLive(client: ReturnType<typeof newRedisClient>, base: string): Promise<number> {
	let n = 0;
	let cursor = '0';
	do {
		const [next, keys] = await client.scan(cursor, 'MATCH', `${base}r:*`, 'COUNT', 1000);
		n += keys.length;
		cursor = next;
	} while (cursor !== '0');
	return n;
}

/** The Built-in ledger runs it from sqlite.retention.test.ts, on a Node.js that has node:sqlite. */
export const backends: Array<[string, () => Promise<Subject>, jest.Describe]> = [
	['PostgreSQL', postgresSubject, describe],
	['Redis', redisSubject, describeIfRedis('the Redis retention test')],
];

export function describeRetention(name: string, make: () => Promise<Subject>, describeBackend: jest.Describe = describe) {
	describeBackend(`retention on ${name}: the ledger's own background turns`, () => {
		jest.setTimeout(90_000);

		test(`a backlog of ${BACKLOG.toLocaleString('en')} expired rows goes while claims go on, and nothing live goes with it`, async () => {
			const s = await make();
			const { ledger } = s;
			try {
				// What must survive: a leased row, a needs_review row and a row that may have been sent
				// (both kept until resolved), a checkpoint, and today's and a kept day's counters.
				const lease = { mode: 'lease' as const, holder: 'run-1', leaseMs: 120_000, ttlMs: 1 };
				const [held, review, sending] = await ledger.claim(
					['held', 'review', 'sending'].map((key) => ({ namespace: NS, key, step: 'send', fingerprint: null })),
					lease,
				);
				expect(held.kind).toBe('claimed');
				const fenced = (outcome: typeof held, key: string) => ({ namespace: NS, key, step: 'send', fence: outcome.kind === 'claimed' ? outcome.record.fence! : -1 });
				expect(await ledger.markPhase([fenced(review, 'review'), fenced(sending, 'sending')], 'sending')).toEqual([true, true]);
				await ledger.record([{ ...fenced(review, 'review'), status: 'needs_review' }], { ttlMs: 1 });
				await ledger.renewLeases([fenced(sending, 'sending')], 1);
				await ledger.setCheckpoint(NS, 'cursor', '42', { force: false, updatedBy: null });
				await ledger.addCounts([{ namespace: NS, counts: { hits: 1 } }]);
				await s.putPastCounts(NS, COUNTS_KEPT_DAYS - 1, { hits: 2 });
				await s.putPastCounts(NS, COUNTS_KEPT_DAYS + 1, { hits: 3 });

				// The backlog: many claim calls of rows that expire at once, as a busy flow leaves them,
				// written through a ledger with no background purge (an older version's).
				const seen = { mode: 'seen' as const, holder: 'h', leaseMs: 0, ttlMs: 1 };
				for (let call = 0; call < BACKLOG / 100; call++) {
					await s.seed.claim(Array.from({ length: 100 }, (_, i) => ({ namespace: NS, key: `old-${call}-${i}`, step: '', fingerprint: null })), seen);
				}
				await sleep(50);
				const before = await s.waiting();
				expect(before).toBeGreaterThanOrEqual(BACKLOG / 100);

				// Claims go on; the backlog goes within a few turns, never by a list or a purge call.
				const fresh = { ...seen, ttlMs: 600_000 };
				const deadline = Date.now() + 20_000;
				let waiting = before;
				for (let i = 0; waiting > 0 && Date.now() < deadline; i++) {
					await ledger.claim([{ namespace: NS, key: `fresh-${i}`, step: '', fingerprint: null }], fresh);
					await sleep(100);
					waiting = await s.waiting();
				}
				expect(waiting).toBe(0);

				const live = async (key: string) => (await ledger.get(NS, key)).map((r) => [r.status, r.phase]);
				expect(await live('held')).toEqual([['in_progress', null]]);
				expect(await live('review')).toEqual([['needs_review', 'sending']]);
				expect(await live('sending')).toEqual([['in_progress', 'sending']]);
				expect(await ledger.getCheckpoint(NS, 'cursor')).toMatchObject({ value: '42' });
				const days = await ledger.readCounts(NS, COUNTS_KEPT_DAYS);
				expect(days.map((d) => d.counts.hits)).toEqual([2, 1]);
			} finally {
				await s.dispose();
			}
		});
	});
}
