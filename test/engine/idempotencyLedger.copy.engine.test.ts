/**
 * Idempotency Ledger's "Copy Into Another Ledger" through n8n-core's real engine, against the real
 * PostgreSQL and Redis: the node resolves both credentials (n8n checks each against its display
 * rules), copies, reports its counts in one item, copies nothing the second time, and refuses a
 * missing or unreachable target with a clear item error.
 */
import type { INodeParameters } from 'n8n-workflow';

import { closeAllPostgresLedgers } from '../../lib/ledger';
import { closeAllRedisLedgers } from '../../lib/ledger/redis';
import { expectCopiedIntoRedis, FIRST_COPY, ledgerFixture, SECOND_COPY, seedCopySource, type LedgerFixture } from '../integration/idempotencyLedger.support';
import { deletePrefix, describeIfRedis, newRedisClient, SUITE_REDIS_ACCEPTS_LOSS, uniquePrefix } from '../support/redis';

const NS = 'copy-engine';

describeIfRedis('Idempotency Ledger copy (engine)')('Idempotency Ledger: Copy Into Another Ledger', () => {
	let f: LedgerFixture;
	const prefix = uniquePrefix('copyeng');
	const client = newRedisClient();
	const redis = { host: '127.0.0.1', port: 6379, prefix, ...SUITE_REDIS_ACCEPTS_LOSS };
	let both: object;
	const copy: INodeParameters = { resource: 'ledger', operation: 'copyInto', backend: 'postgresIntoRedis' };

	beforeAll(async () => {
		f = await ledgerFixture('copyeng');
		both = { ...f.credentials, idempotencyRedisApi: redis };
		await seedCopySource(f.ledger, NS);
	});

	afterAll(async () => {
		await closeAllPostgresLedgers();
		await closeAllRedisLedgers();
		await deletePrefix(client, prefix);
		client.disconnect();
		await f.dispose();
	});

	test('PostgreSQL into Redis: one item with the counts; the second run copies nothing', async () => {
		const first = f.out(await f.run([{}, {}], copy, { credentials: both }));
		expect(first).toHaveLength(1);
		expect(first[0].json).toMatchObject({ from: 'PostgreSQL', into: 'Redis', ...FIRST_COPY });
		expect(typeof first[0].json.durationMs).toBe('number');
		await expectCopiedIntoRedis(prefix, NS);
		const second = f.out(await f.run([{}], copy, { credentials: both }));
		expect(second[0].json).toMatchObject(SECOND_COPY);
	});

	test('Redis into PostgreSQL the other way round, into a fresh table', async () => {
		const other = await ledgerFixture('copyeng2');
		try {
			const out = f.out(await f.run([{}], { ...copy, backend: 'redisIntoPostgres' }, { credentials: { ...other.credentials, idempotencyRedisApi: redis } }));
			expect(out[0].json).toMatchObject({ from: 'Redis', into: 'PostgreSQL', rowsCopied: 3, checkpointsCopied: 1 });
			expect(await other.count(`SELECT count(*) AS n FROM {t} WHERE namespace = '${NS}'`)).toBe(3);
		} finally {
			await other.dispose();
		}
	});

	test('no target credential: a clear item error (continue on fail), nothing written', async () => {
		const result = await f.run([{ id: 1 }], copy, { credentials: f.credentials, continueOnFail: true });
		const [item] = f.out(result);
		expect(item.json.error).toBe('No Redis ledger credential is chosen for the target of the copy');
		expect(item.json.details).toContain('Idempotency Ledger (Redis) API');
	});

	test('target unreachable: the error names the target and what to check', async () => {
		const result = await f.run([{}], copy, {
			credentials: { ...f.credentials, idempotencyRedisApi: { ...redis, port: 1, timeout: 2 } },
			continueOnFail: true,
		});
		const [item] = f.out(result);
		expect(String(item.json.error)).toMatch(/^The idempotency ledger is unavailable: The target ledger \(Redis\): /);
		expect(String(item.json.error)).not.toMatch(/ECONNREFUSED/);
		expect(item.json.details).toBeTruthy();
	});

	test('a direction that is not a copy direction is refused before anything is opened', async () => {
		const result = await f.run([{}], { ...copy, backend: 'postgres' }, { credentials: both, continueOnFail: true });
		expect(String(f.out(result)[0].json.error)).toContain('The copy direction "postgres" is not one of');
	});
});
