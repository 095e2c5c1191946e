/**
 * A node that holds its ledger through a long execution asks the connection cache once, then
 * only calls the ledger. Its client must not be closed under it after 15 minutes (the 30-minute
 * soak on Redis failed every call from minute 15 on); a client nobody uses is still closed.
 * Real PostgreSQL and Redis, with the process clock and timers faked (minutes pass in
 * milliseconds; the servers' own clocks do not move, and neither do the rows).
 */
import { closeAllPostgresLedgers, postgresLedger, type PostgresLedger } from '../../lib/ledger';
import { closeAllRedisLedgers, redisLedger } from '../../lib/ledger/redis';
import { dropLedgerTables, newPool, settingsFromUrl, uniqueTable } from '../support/db';
import { deletePrefix, describeIfRedis, newRedisClient, redisUrl } from '../support/redis';

const MINUTE = 60_000;
const seen = { mode: 'seen' as const, holder: 'h', leaseMs: 0, ttlMs: 86_400_000 };

/** Faked clock and timers, but the event loop's own queues stay real, so I/O goes on. */
const fakeTime = () => jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask', 'hrtime', 'performance'] });

afterEach(() => jest.useRealTimers());

/**
 * The ledger `open` hands out, called once a minute for 20 minutes through the reference the
 * first call gave (on PostgreSQL the pool's 30 s idle timeout closes its connections between
 * calls), then not at all: after 17 minutes more the cache hands out a new one.
 */
async function keptWhileCalled(open: () => { claim: PostgresLedger['claim'] }) {
	fakeTime();
	const ledger = open();
	for (let minute = 0; minute < 20; minute++) {
		const [outcome] = await ledger.claim([{ namespace: 'idle', key: `k${minute}`, step: '', fingerprint: null }], seen);
		expect(`${minute}: ${outcome.kind}`).toBe(`${minute}: claimed`);
		await jest.advanceTimersByTimeAsync(MINUTE);
	}
	await jest.advanceTimersByTimeAsync(17 * MINUTE);
	expect(open()).not.toBe(ledger);
}

const table = uniqueTable('idle');
const prefix = `idle-${Date.now().toString(36)}`;
afterAll(async () => {
	await closeAllPostgresLedgers();
	await closeAllRedisLedgers();
	const pool = newPool(1);
	await dropLedgerTables(pool, table);
	await pool.end();
	const client = newRedisClient();
	await deletePrefix(client, prefix);
	client.disconnect();
});

test('PostgreSQL: a pool whose ledger is called keeps going past 15 minutes; 17 minutes unused close it', () => keptWhileCalled(() => postgresLedger(settingsFromUrl(table))));

describeIfRedis('the Redis client cache')('the Redis client cache', () => {
	test('a client whose ledger is called keeps going past 15 minutes; 17 minutes unused close it', () =>
		keptWhileCalled(() => {
			const u = new URL(redisUrl());
			return redisLedger({ host: u.hostname, port: Number(u.port || 6379), db: 0, tls: false, prefix, cluster: false });
		}));
});
