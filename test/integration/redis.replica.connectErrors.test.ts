/**
 * What a person sees when the ledger's Redis is a replica: after a failover the old primary
 * answers READONLY, and a replica that lost its primary answers MASTERDOWN. Both are real
 * throwaway redis-server processes started here (no mock); without redis-server this file skips
 * and says why.
 */
import { execFileSync, spawnSync } from 'child_process';
import fs from 'fs';
import os from 'os';
import path from 'path';

import { Redis } from 'ioredis';

import { LedgerUnavailableError } from '../../lib/ledger/errors';
import { toUnavailable } from '../../lib/ledger/redis/errors';
import { closeAllRedisLedgers, redisLedger } from '../../lib/ledger/redis/connect';
import { serverPort } from '../support/ports';
import { skipNotice } from '../support/redis';

const hasRedisServer = spawnSync('sh', ['-c', 'command -v redis-server && command -v redis-cli']).status === 0;
const DRIVER_TEXT = /READONLY You|MASTERDOWN Link|ECONN|Connection is closed|firewall/;

async function replica(dir: string, serveStale: 'yes' | 'no') {
	const port = await serverPort();
	const deadPrimary = await serverPort({ taken: [port] });
	execFileSync('redis-server', [
		'--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'yes', '--dir', dir,
		'--logfile', path.join(dir, `${port}.log`), '--pidfile', path.join(dir, `${port}.pid`),
		'--replicaof', '127.0.0.1', String(deadPrimary), '--replica-serve-stale-data', serveStale,
	]);
	for (let i = 0; i < 100; i++) {
		if (/PONG|MASTERDOWN/.test(spawnSync('redis-cli', ['-p', String(port), 'ping'], { encoding: 'utf8' }).stdout)) break;
		await new Promise((r) => setTimeout(r, 100));
	}
	return { port, stop: () => spawnSync('redis-cli', ['-p', String(port), 'shutdown', 'nosave']) };
}

if (!hasRedisServer) skipNotice('Redis replica messages (READONLY, MASTERDOWN)', 'redis-server or redis-cli is not installed');
(hasRedisServer ? describe : describe.skip)('Redis: the credential points at a replica', () => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'idem-redis-replica-'));
	const servers: Array<{ stop: () => unknown }> = [];
	afterEach(() => closeAllRedisLedgers());
	afterAll(() => {
		for (const s of servers) s.stop();
		fs.rmSync(dir, { recursive: true, force: true });
	});
	const settings = (port: number) => ({ host: '127.0.0.1', port, db: 0, tls: false, prefix: 'idem', cluster: false });
	const claim = (port: number) =>
		redisLedger(settings(port))
			.claim([{ namespace: 'ns', key: 'k', step: '', fingerprint: null }], { mode: 'seen', ttlMs: 60_000, holder: 'h', leaseMs: 60_000 })
			.catch((e) => e);

	test('a read-only replica (the old primary after a failover): READONLY, point the credential at the current primary', async () => {
		const r = await replica(dir, 'yes');
		servers.push(r);
		const error = await claim(r.port);
		console.log(`READONLY: ${error.message} | ${error.hint}`);
		expect(error).toBeInstanceOf(LedgerUnavailableError);
		expect(error.message).toBe('The ledger Redis is a read-only replica (after a failover the old primary may have become one)');
		expect(error.hint).toMatch(/^Point the ledger credential at the current primary \(master\) Redis/);
		expect(`${error.message} ${error.hint}`).not.toMatch(DRIVER_TEXT);
	});

	test('a replica whose primary is down (MASTERDOWN): says so, not raw Redis text', async () => {
		const r = await replica(dir, 'no');
		servers.push(r);
		// Every ledger call writes first (and a write is refused as READONLY first), so the real
		// server's reply to a read is taken from a plain client and mapped as the ledger maps it.
		const client = new Redis({ host: '127.0.0.1', port: r.port, lazyConnect: true, maxRetriesPerRequest: 0 });
		client.on('error', () => undefined);
		const reply = await client.get('k').catch((e) => e);
		client.disconnect();
		expect(String(reply.message)).toMatch(/^MASTERDOWN/);
		const error = toUnavailable(reply) as LedgerUnavailableError;
		console.log(`MASTERDOWN: ${error.message} | ${error.hint}`);
		expect(error).toBeInstanceOf(LedgerUnavailableError);
		expect(error.message).toBe('The ledger Redis is a replica that has lost its link to the primary (during a failover, or while the primary is down)');
		expect(error.hint).toMatch(/current primary \(master\) Redis, or wait until the failover is over, then retry the execution/);
		expect(`${error.message} ${error.hint}`).not.toMatch(DRIVER_TEXT);
	});
});
