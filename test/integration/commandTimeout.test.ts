/**
 * A ledger that accepted the connection and then stops answering mid-session: each statement or
 * command is bounded by the credential's Command Timeout (Seconds), and the message names it as a
 * timeout and says what to change. Real servers, made to stall for real:
 * - PostgreSQL: another session holds an ACCESS EXCLUSIVE lock on the ledger table;
 * - Redis: a throwaway redis-server (not the shared one) is told CLIENT PAUSE.
 */
import { execFileSync, spawnSync } from 'child_process';
import fs from 'fs';
import net from 'net';
import os from 'os';
import path from 'path';

import { Redis } from 'ioredis';

import { LedgerUnavailableError } from '../../lib/ledger/errors';
import { closeAllPostgresLedgers, postgresLedger } from '../../lib/ledger/postgres/connect';
import { closeAllRedisLedgers, redisLedger } from '../../lib/ledger/redis/connect';
import { postgresSettingsFrom } from '../../lib/n8n/postgresCredential';
import { redisSettingsFrom } from '../../lib/n8n/redisCredential';
import { dropLedgerTables, newPool, settingsFromUrl, uniqueTable } from '../support/db';
import { skipNotice } from '../support/redis';
import { LOADED_MACHINE_MARGIN_MS } from '../support/timing';

const claimOne = { mode: 'seen' as const, ttlMs: 60_000, holder: 'h', leaseMs: 60_000 };
const request = [{ namespace: 'ns', key: 'k', step: '', fingerprint: null }];
const DRIVER_TEXT = /Query read timeout|Command timed out|ECONN|Connection terminated/;

/**
 * `claim` fails as the command timeout of 1 s: the error says `message`, says what to change, has
 * no driver text, and comes within the second (plus the margin a loaded machine needs).
 */
async function expectTimedOut(claim: () => Promise<unknown>, message: string): Promise<void> {
	const started = Date.now();
	const error = await claim().catch((e: unknown) => e);
	const elapsed = Date.now() - started;
	expect(error).toBeInstanceOf(LedgerUnavailableError);
	expect((error as Error).message).toBe(message);
	expect((error as LedgerUnavailableError).hint).toMatch(/raise Command Timeout \(Seconds\) in the ledger credential/);
	expect(`${(error as Error).message} ${(error as LedgerUnavailableError).hint}`).not.toMatch(DRIVER_TEXT);
	expect(elapsed).toBeLessThan(1000 + LOADED_MACHINE_MARGIN_MS);
}

describe('the credential bounds one statement or command (Command Timeout)', () => {
	test('the credential refuses a command timeout outside 1 to 600 seconds, in words', () => {
		expect(() => postgresSettingsFrom({ host: 'db', commandTimeout: 0 })).toThrow(
			"The ledger credential's Command Timeout (Seconds) 0 must be a number from 1 to 600",
		);
		expect(() => redisSettingsFrom({ host: 'r', commandTimeout: 'soon' })).toThrow(
			'The ledger credential\'s Command Timeout (Seconds) "soon" must be a number from 1 to 600',
		);
		expect(postgresSettingsFrom({ host: 'db', commandTimeout: 2 }).commandTimeoutMs).toBe(2000);
		expect(postgresSettingsFrom({ host: 'db' }).commandTimeoutMs).toBeUndefined();
	});

	describe('PostgreSQL: a statement stuck behind another session\'s lock', () => {
		const table = uniqueTable('cmdtimeout');
		const pool = newPool(2);
		afterAll(async () => {
			await closeAllPostgresLedgers();
			await dropLedgerTables(pool, table);
			await pool.end();
		});

		test('fails after Command Timeout (Seconds) = 1, named as the statement timeout, with what to change', async () => {
			const settings = { ...settingsFromUrl(table), commandTimeoutMs: 1000 };
			const ledger = postgresLedger(settings);
			await ledger.ensureSchema();
			const locker = await pool.connect();
			try {
				await locker.query('BEGIN');
				await locker.query(`LOCK TABLE "public"."${table}" IN ACCESS EXCLUSIVE MODE`);
				await expectTimedOut(() => ledger.claim(request, claimOne), 'The ledger database did not answer a statement within 1 second (the statement timeout)');
			} finally {
				await locker.query('ROLLBACK');
				locker.release();
			}
			// The lock is gone: the same ledger answers again. (The statement that timed out was
			// not cancelled on the server: it took effect once the lock was released, which the
			// credential page says. A claim that lands after its run gave up is held until its lease
			// lapses, never sent twice.)
			expect((await ledger.claim([{ ...request[0], key: 'after' }], claimOne))[0].kind).toBe('claimed');
		});
	});

	const hasRedisServer = spawnSync('sh', ['-c', 'command -v redis-server && command -v redis-cli']).status === 0;
	if (!hasRedisServer) skipNotice('Redis command timeout (a paused throwaway redis-server)', 'redis-server or redis-cli is not installed');
	(hasRedisServer ? describe : describe.skip)('Redis: a server paused mid-session', () => {
		const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'idem-redis-pause-'));
		let port = 0;
		beforeAll(async () => {
			port = await new Promise<number>((resolve) => {
				const server = net.createServer();
				server.listen(0, '127.0.0.1', () => {
					const { port: p } = server.address() as net.AddressInfo;
					server.close(() => resolve(p));
				});
			});
			execFileSync('redis-server', [
				'--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'yes', '--dir', dir,
				'--logfile', path.join(dir, 'redis.log'), '--pidfile', path.join(dir, 'redis.pid'),
			]);
			for (let i = 0; i < 100 && !/PONG/.test(spawnSync('redis-cli', ['-p', String(port), 'ping'], { encoding: 'utf8' }).stdout); i++) {
				await new Promise((r) => setTimeout(r, 100));
			}
		});
		afterAll(async () => {
			await closeAllRedisLedgers();
			spawnSync('redis-cli', ['-p', String(port), 'shutdown', 'nosave']);
			fs.rmSync(dir, { recursive: true, force: true });
		});

		test('fails after Command Timeout (Seconds) = 1, named as the command timeout, with what to change', async () => {
			const ledger = redisLedger(redisSettingsFrom({ host: '127.0.0.1', port, commandTimeout: 1 }));
			expect((await ledger.claim(request, claimOne))[0].kind).toBe('claimed'); // connected and working
			const admin = new Redis({ host: '127.0.0.1', port });
			await admin.call('CLIENT', 'PAUSE', '4000', 'ALL');
			admin.disconnect(); // QUIT would itself wait out the pause
			await expectTimedOut(() => ledger.claim([{ ...request[0], key: 'k2' }], claimOne), 'The ledger Redis did not answer a command within 1 second (the command timeout)');
		});
	});
});
