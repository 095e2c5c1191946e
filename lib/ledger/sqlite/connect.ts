import { accessSync, constants, mkdirSync, readFileSync, realpathSync } from 'fs';
import { homedir } from 'os';
import { basename, dirname, isAbsolute, join, resolve, sep } from 'path';

import { DEFAULT_AUTO_PURGE } from '../autoPurge';
import { LedgerInputError, LedgerUnavailableError } from '../errors';
import { loadSqlite } from './driver';
import { SqliteLedger } from './SqliteLedger';

/** The file name a Built-in ledger uses when the credential names none. */
export const DEFAULT_LEDGER_FILE = 'idempotency-ledger.sqlite';

export interface SqliteSettings {
	/** A file name in n8n's user folder (`~/.n8n`), or an absolute path. Empty: DEFAULT_LEDGER_FILE. */
	file?: string;
	/** The folder a relative file name is in; default n8nUserFolder(). */
	folder?: string;
	/** Delete expired rows now and then (default on). */
	purge?: boolean;
}

/** n8n's own folder: `N8N_USER_FOLDER` (or the home folder), then `.n8n`, as n8n itself reads it. */
export const n8nUserFolder = (env: NodeJS.ProcessEnv = process.env) => join(env.N8N_USER_FOLDER || homedir(), '.n8n');

/** File systems on which SQLite's file locks cannot be trusted between processes (or machines). */
const NETWORK_FS = new Set(['nfs', 'nfs4', 'cifs', 'smb', 'smbfs', 'smb3', '9p', 'afs', 'ncpfs', 'fuse.sshfs', 'fuse.rclone', 'fuse.s3fs', 'fuse.gcsfuse', 'glusterfs', 'fuse.glusterfs', 'ceph', 'fuse.ceph', 'lustre', 'davfs', 'fuse.davfs2']);

/**
 * The file system type `path` lives on, from /proc/self/mounts (Linux; undefined elsewhere): the
 * mount point that is the longest prefix of the path wins.
 */
export function fileSystemOf(path: string, mounts?: string): string | undefined {
	let text = mounts;
	if (text === undefined) {
		try {
			text = readFileSync('/proc/self/mounts', 'utf8');
		} catch {
			return undefined;
		}
	}
	let best: { point: string; type: string } | undefined;
	for (const line of text.split('\n')) {
		const [, rawPoint, type] = line.split(' ');
		if (!rawPoint || !type) continue;
		// Spaces and other characters in mount points are written as octal escapes.
		const point = rawPoint.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
		const inside = point === '/' || path === point || path.startsWith(point.endsWith(sep) ? point : point + sep);
		if (inside && (!best || point.length >= best.point.length)) best = { point, type };
	}
	return best?.type;
}

/**
 * Where the ledger file is, checked before anything runs: the folder exists (created if need
 * be) and can be written, and is not on a network file system. Throws a LedgerUnavailableError
 * that says what is wrong and what to do.
 */
export function ledgerFilePath(settings: SqliteSettings, mounts?: string): string {
	const name = (settings.file ?? '').trim() || DEFAULT_LEDGER_FILE;
	if (name.endsWith(sep) || name.endsWith('/') || basename(name) === '.' || basename(name) === '..') {
		throw new LedgerInputError(`The Built-in ledger file name "${name}" names a folder, not a file`, 'Give a file name such as idempotency-ledger.sqlite.');
	}
	const folder = settings.folder ?? n8nUserFolder();
	const file = isAbsolute(name) ? name : resolve(folder, name);
	const dir = dirname(file);
	try {
		mkdirSync(dir, { recursive: true });
		accessSync(dir, constants.W_OK | constants.R_OK);
	} catch {
		throw new LedgerUnavailableError(
			`The Built-in ledger cannot write to the folder ${dir}`,
			'Give the user n8n runs as write access to that folder (in Docker: mount a volume on /home/node/.n8n), or set another file name in the credential.',
			'FOLDER_NOT_WRITABLE',
		);
	}
	const type = fileSystemOf(realpathSync(dir), mounts);
	if (type && NETWORK_FS.has(type)) {
		throw new LedgerUnavailableError(
			`The Built-in ledger file would be on a network file system (${type}, folder ${dir}), where file locks between processes cannot be trusted`,
			'Put the file on a local disk (set another file name in the credential), or use the PostgreSQL or Redis ledger.',
			'NETWORK_FILE_SYSTEM',
		);
	}
	return file;
}

const cache = new Map<string, SqliteLedger>();

/**
 * One open ledger per file, reused across executions (the file is opened once per process; other
 * processes open their own). Checks Node.js, the folder and its file system first.
 */
export function sqliteLedger(settings: SqliteSettings): SqliteLedger {
	loadSqlite();
	const file = ledgerFilePath(settings);
	const sweep = settings.purge !== false;
	// By file and sweep setting: two credentials on one file share it as two connections.
	const key = `${file}\u0000${sweep}`;
	let ledger = cache.get(key);
	if (!ledger) {
		ledger = new SqliteLedger({ file, autoPurge: sweep ? DEFAULT_AUTO_PURGE : undefined });
		cache.set(key, ledger);
	}
	return ledger;
}

/** Close every cached ledger (tests and shutdown). */
export async function closeAllSqliteLedgers(): Promise<void> {
	const ledgers = [...cache.values()];
	cache.clear();
	await Promise.all(ledgers.map((l) => l.close().catch(() => undefined)));
}
