import { LedgerUnavailableError } from '../../lib/ledger/errors';
import { closeAllRedisLedgers, redisLedger } from '../../lib/ledger/redis/connect';
import { testRedisCredential } from '../../lib/n8n/redisCredential';
import { describeIfRedis, newRedisClient, redisUrl, SUITE_REDIS_ACCEPTS_LOSS } from '../support/redis';
import { tcpServer } from '../support/tcpServer';
import { LOADED_MACHINE_MARGIN_MS } from '../support/timing';

/** A local TCP server that accepts every connection and never answers. */
const silentServer = () => tcpServer(() => undefined);

const base = { host: '127.0.0.1', db: 0, tls: false, prefix: 'idem', cluster: false };

afterEach(() => closeAllRedisLedgers());

describe('Redis: a server that accepts the connection and never answers', () => {
	test('fails within the connect timeout (default 5 s), and the message says so', async () => {
		const server = await silentServer();
		try {
			let started = Date.now();
			const error = await redisLedger({ ...base, port: server.port }).ensureSchema().catch((e) => e);
			expect(Date.now() - started).toBeLessThan(5_000 + LOADED_MACHINE_MARGIN_MS);
			expect(error).toBeInstanceOf(LedgerUnavailableError);
			expect(error.message).toMatch(/did not answer within 5 seconds/);
			expect(error.hint).toMatch(/Timeout \(Seconds\)/);

			started = Date.now();
			const out = await testRedisCredential({ host: '127.0.0.1', port: server.port });
			expect(Date.now() - started).toBeLessThan(5_000 + LOADED_MACHINE_MARGIN_MS);
			expect(out).toEqual({ status: 'Error', message: expect.stringMatching(/did not answer within 5 seconds/) });
		} finally {
			await server.close();
		}
	});

	test("the credential's Timeout (Seconds) sets the bound", async () => {
		const server = await silentServer();
		try {
			const started = Date.now();
			const out = await testRedisCredential({ host: '127.0.0.1', port: server.port, timeout: 1 });
			expect(Date.now() - started).toBeLessThan(1_000 + LOADED_MACHINE_MARGIN_MS);
			expect(out.message).toMatch(/did not answer within 1 second\b/);
		} finally {
			await server.close();
		}
	});
});

describeIfRedis('Redis database index checks')('Redis: a database index the server does not have', () => {
	const u = new URL(redisUrl());
	const real = { ...base, host: u.hostname, port: Number(u.port || 6379) };
	let databases = 0;

	beforeAll(async () => {
		const client = newRedisClient();
		databases = Number(((await client.call('CONFIG', 'GET', 'databases')) as string[])[1]);
		await client.quit();
	});

	test('the credential test says so, with the number of databases the server has', async () => {
		const out = await testRedisCredential({ host: real.host, port: real.port, database: 99 });
		expect(out.status).toBe('Error');
		expect(out.message).toContain(`The Redis database index 99 does not exist on this server (it has ${databases}: 0 to ${databases - 1})`);
	});

	test('at run time the ledger fails closed instead of using database 0', async () => {
		const prefix = `dbrange-${Date.now()}`;
		const error = await redisLedger({ ...real, db: 99, prefix }).ensureSchema().catch((e) => e);
		expect(error).toBeInstanceOf(LedgerUnavailableError);
		expect(error.message).toMatch(/database index 99 does not exist on this server/);
		const client = newRedisClient();
		try {
			expect(await client.keys(`{${prefix}*`)).toEqual([]);
		} finally {
			await client.quit();
		}
	});

	test('an index the server has still works', async () => {
		expect((await testRedisCredential({ host: real.host, port: real.port, database: databases - 1, ...SUITE_REDIS_ACCEPTS_LOSS })).status).toBe('OK');
	});
});
