/**
 * A node that holds its ledger through a long execution asks the connection cache once, then
 * only calls the ledger. Its client must not be closed under it after 15 minutes (the 30-minute
 * soak on Redis failed every call from minute 15 on); a client nobody uses is still closed.
 * Real PostgreSQL and Redis, with the process clock and timers faked (minutes pass in
 * milliseconds; the servers' own clocks do not move, and neither do the rows).
 */
import { closeAllPostgresLedgers, postgresLedger } from '../../lib/ledger';
import { closeAllRedisLedgers, redisLedger } from '../../lib/ledger/redis';
import { dropLedgerTables, newPool, settingsFromUrl, uniqueTable } from '../support/db';
import { deletePrefix, describeIfRedis, newRedisClient, redisUrl } from '../support/redis';

const MINUTE = 60_000;
const seen = { mode: 'seen' as const, holder: 'h', leaseMs: 0, ttlMs: 86_400_000 };
const claimOf = (ledger: { claim: typeof import('../../lib/ledger').PostgresLedger.prototype.claim }) => async (key: string) =>
	(await ledger.claim([{ namespace: 'idle', key, step: '', fingerprint: null }], seen))[0].kind;

/** Faked clock and timers, but the event loop's own queues stay real, so I/O goes on. */
const fakeTime = () => jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask', 'hrtime', 'performance'] });

afterEach(() => jest.useRealTimers());

describe('the PostgreSQL pool cache', () => {
	const table = uniqueTable('idle');
	afterAll(async () => {
		await closeAllPostgresLedgers();
		const pool = newPool(1);
		await dropLedgerTables(pool, table);
		await pool.end();
	});

	test('a ledger called once a minute for 20 minutes, its connections idling out between calls, keeps its pool; 16 minutes unused close it', async () => {
		fakeTime();
		const ledger = postgresLedger(settingsFromUrl(table));
		const claim = claimOf(ledger);
		for (let minute = 0; minute < 20; minute++) {
			expect(`${minute}: ${await claim(`k${minute}`)}`).toBe(`${minute}: claimed`);
			// The pool's idle timeout (30 s) closes its connections before the next call.
			await jest.advanceTimersByTimeAsync(MINUTE);
		}
		await jest.advanceTimersByTimeAsync(17 * MINUTE);
		expect(postgresLedger(settingsFromUrl(table))).not.toBe(ledger);
	});
});

describeIfRedis('the Redis client cache')('the Redis client cache', () => {
	const prefix = `idle-${Date.now().toString(36)}`;
	const settings = () => {
		const u = new URL(redisUrl());
		return { host: u.hostname, port: Number(u.port || 6379), db: 0, tls: false, prefix, cluster: false };
	};
	afterAll(async () => {
		await closeAllRedisLedgers();
		const client = newRedisClient();
		await deletePrefix(client, prefix);
		client.disconnect();
	});

	test('a ledger called once a minute for 20 minutes keeps its client; 16 minutes unused close it', async () => {
		fakeTime();
		const ledger = redisLedger(settings());
		const claim = claimOf(ledger);
		for (let minute = 0; minute < 20; minute++) {
			expect(`${minute}: ${await claim(`k${minute}`)}`).toBe(`${minute}: claimed`);
			await jest.advanceTimersByTimeAsync(MINUTE);
		}
		await jest.advanceTimersByTimeAsync(17 * MINUTE);
		expect(redisLedger(settings())).not.toBe(ledger);
	});
});
