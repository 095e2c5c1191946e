/**
 * Throwaway redis-server processes on free ports, each with the settings a test needs (eviction,
 * no persistence, CONFIG renamed away), in a temporary directory of their own. Real Redis, no mock.
 * Without redis-server a file using these skips and says why, except under CI (CI=true), where a
 * missing binary is a failure.
 */
import { execFileSync, spawnSync } from 'child_process';
import fs from 'fs';
import os from 'os';
import path from 'path';

import { serverPort } from './ports';
import { describeIfAvailable } from './redis';

export const hasRedisServer = spawnSync('sh', ['-c', 'command -v redis-server && command -v redis-cli']).status === 0;

/** `describe` when redis-server and redis-cli are installed (see describeIfAvailable). */
export function describeIfRedisServer(what: string): jest.Describe {
	return describeIfAvailable(what, 'redis-server', hasRedisServer ? null : 'redis-server or redis-cli is not installed');
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
	const port = await serverPort();
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
			const pid = Number(readIfThere(path.join(dir, 'redis.pid')).trim()) || null;
			// FORCE: a server that is writing its first AOF (appendonly just turned on) refuses a plain
			// SHUTDOWN ("Writing initial AOF, can't exit"), and kept running after npm test, its
			// folder gone. A redis-server older than 7.0 rejects FORCE: then, as for anything else
			// that keeps it running, the process is killed, and its log says why.
			cli('SHUTDOWN', 'NOSAVE', 'FORCE');
			if (pid !== null && !exitedWithin(pid, 3_000)) {
				const log = readIfThere(path.join(dir, 'redis.log')).split('\n').slice(-8).join('\n');
				console.warn(`throwaway redis-server ${port} (pid ${pid}) was still running after SHUTDOWN NOSAVE FORCE; killing it. Its log ends:\n${log}`);
				try {
					process.kill(pid, 'SIGKILL');
				} catch {
					/* gone meanwhile */
				}
			}
			fs.rmSync(dir, { recursive: true, force: true });
		},
	};
}

const readIfThere = (file: string) => (fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '');

/** Whether process `pid` is gone within `ms` (polled; for stop(), which callers use synchronously). */
function exitedWithin(pid: number, ms: number): boolean {
	const pause = new Int32Array(new SharedArrayBuffer(4));
	for (const until = Date.now() + ms; Date.now() < until; Atomics.wait(pause, 0, 0, 20)) {
		try {
			process.kill(pid, 0);
		} catch {
			return true;
		}
		// A daemonized server's parent is init, which may be slow to reap it: a zombie has exited.
		try {
			if (/^\d+ \(.*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'))) return true;
		} catch {
			return true; // gone since, or no /proc here
		}
	}
	return false;
}
