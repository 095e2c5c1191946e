/**
 * Throwaway redis-server processes on free ports, each with the settings a test needs (eviction,
 * no persistence, CONFIG renamed away), in a temporary directory of their own. Real Redis, no mock.
 * Without redis-server a file using these skips and says why, except under CI (CI=true), where a
 * missing binary is a failure.
 */
import { execFileSync, spawnSync } from 'child_process';
import fs from 'fs';
import net from 'net';
import os from 'os';
import path from 'path';

import { skipNotice } from './redis';

export const hasRedisServer = spawnSync('sh', ['-c', 'command -v redis-server && command -v redis-cli']).status === 0;

/**
 * `describe` when redis-server and redis-cli are installed. Otherwise `describe.skip` with a line
 * on stderr, or, under CI=true, one failing test that says what is missing.
 */
export function describeIfRedisServer(what: string): jest.Describe {
	if (hasRedisServer) return describe;
	const reason = 'redis-server or redis-cli is not installed';
	if (process.env.CI === 'true') {
		return ((name: string) =>
			describe(name, () => {
				test(`${what} needs redis-server`, () => {
					throw new Error(`${what}: ${reason}. Under CI a missing redis-server fails the run.`);
				});
			})) as unknown as jest.Describe;
	}
	skipNotice(what, reason);
	return describe.skip;
}

export function freePort(): Promise<number> {
	return new Promise((resolve) => {
		const server = net.createServer();
		server.listen(0, '127.0.0.1', () => {
			const { port } = server.address() as net.AddressInfo;
			server.close(() => resolve(port));
		});
	});
}

export interface ThrowawayRedis {
	port: number;
	/** redis-cli against this server, e.g. cli('DEL', key); returns stdout. Uses the default user. */
	cli(...args: string[]): string;
	stop(): void;
}

/** The settings of a Redis that keeps the ledger: AOF on, no eviction. */
export const SAFE_REDIS = ['--appendonly', 'yes', '--maxmemory-policy', 'noeviction'];

/** Starts a redis-server with `args` (after port, bind, dir, daemonize) and waits until it answers. */
export async function startRedis(args: string[]): Promise<ThrowawayRedis> {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'idem-redis-'));
	const port = await freePort();
	execFileSync('redis-server', [
		'--port', String(port), '--bind', '127.0.0.1', '--daemonize', 'yes', '--dir', dir,
		'--logfile', path.join(dir, 'redis.log'), '--pidfile', path.join(dir, 'redis.pid'),
		...args,
	]);
	const cli = (...command: string[]) => spawnSync('redis-cli', ['-p', String(port), ...command], { encoding: 'utf8' }).stdout.trim();
	for (let i = 0; i < 100 && cli('PING') !== 'PONG'; i++) await new Promise((r) => setTimeout(r, 100));
	return {
		port,
		cli,
		stop() {
			cli('SHUTDOWN', 'NOSAVE');
			fs.rmSync(dir, { recursive: true, force: true });
		},
	};
}
