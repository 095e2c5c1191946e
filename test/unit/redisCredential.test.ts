import { LedgerInputError } from '../../lib/ledger/errors';
import { redisSettingsFrom, testRedisConnection, testRedisCredential } from '../../lib/n8n/redisCredential';
import { describeIfRedis, redisUrl } from '../support/redis';

describe('Redis credential to settings', () => {
	test('maps the credential fields', () => {
		expect(
			redisSettingsFrom({ host: ' cache ', port: 6380, user: 'app', password: 'pw', database: 2, tls: true, rejectUnauthorized: false, prefix: 'p1', cluster: false }),
		).toEqual({
			host: 'cache',
			port: 6380,
			user: 'app',
			password: 'pw',
			db: 2,
			tls: true,
			tlsRejectUnauthorized: false,
			prefix: 'p1',
			cluster: false,
			clusterNodes: undefined,
		});
		expect(redisSettingsFrom({ host: 'h' })).toMatchObject({ port: 6379, db: 0, tls: false, prefix: 'idem', user: undefined, password: undefined });
	});

	test.each([
		[{ host: '' }, /no host/],
		[{ host: 'h', port: 0 }, /not a port number/],
		[{ host: 'h', port: '63a' }, /not a port number/],
		[{ host: 'h', port: 70000 }, /not a port number/],
		[{ host: 'h', database: -1 }, /database index/],
		[{ host: 'h', cluster: true, database: 3 }, /only database 0/],
		[{ host: 'h', cluster: true, clusterNodes: '10.0.0.1:6379, nohost' }, /host:port/],
		[{ host: 'h', prefix: 'a b' }, /key prefix/],
		[{ host: 'h', prefix: 'a{b}' }, /key prefix/],
	])('%j is refused', (data, message) => {
		expect(() => redisSettingsFrom(data)).toThrow(LedgerInputError);
		expect(() => redisSettingsFrom(data)).toThrow(message);
	});

	test('cluster mode may start from the node list alone', () => {
		expect(redisSettingsFrom({ host: '', cluster: true, clusterNodes: '10.0.0.1:6379,10.0.0.2:6380' })).toMatchObject({
			cluster: true,
			clusterNodes: '10.0.0.1:6379,10.0.0.2:6380',
		});
	});
});

describe('Redis credential test', () => {
	test('a refused port is reported in words, without the password', async () => {
		const out = await testRedisCredential({ host: '127.0.0.1', port: 1, password: 'hunter2-secret' });
		expect(out.status).toBe('Error');
		expect(out.message).toMatch(/refused the connection\. Check that Redis is running/);
		expect(out.message).not.toContain('hunter2');
	});

	test('bad settings are reported, not thrown', async () => {
		expect(await testRedisCredential({ host: 'h', port: 'x' })).toMatchObject({ status: 'Error', message: expect.stringMatching(/not a port number/) });
	});

	describeIfRedis('Redis credential test against the real Redis')('against the real Redis', () => {
		const u = new URL(redisUrl());
		const settings = { host: u.hostname, port: Number(u.port || 6379), db: 0, tls: false, prefix: 'idem', cluster: false };

		test('a reachable Redis is OK', async () => {
			// The suite's Redis may run without persistence (see SUITE_REDIS_ACCEPTS_LOSS); that answer is redis.safety.test.ts's.
			const out = await testRedisConnection(settings, true);
			expect(out.status).toBe('OK');
			expect(out.message).toMatch(/^Connected to Redis/);
		});

		test('a wrong password is reported in words', async () => {
			const out = await testRedisConnection({ ...settings, user: 'nobody-here', password: 'nope' });
			expect(out).toEqual({ status: 'Error', message: expect.stringMatching(/rejected the user name or password/) });
		});
	});
});
