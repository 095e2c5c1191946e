/**
 * The part of `node:sqlite` (Node.js 22.13+ and 24) this backend uses, typed here because the
 * package is built against the types of Node.js 20, which has no `node:sqlite`. The module is
 * required when a ledger opens its file, never when the package loads, so that n8n on an older
 * Node.js still loads every node and only a Built-in ledger says what it needs.
 */
import { LedgerUnavailableError } from '../errors';

export type SqlValue = string | number | bigint | null | Uint8Array;
export type SqlRow = Record<string, SqlValue>;

export interface Statement {
	run(...params: SqlValue[]): { changes: number | bigint; lastInsertRowid: number | bigint };
	get(...params: SqlValue[]): SqlRow | undefined;
	all(...params: SqlValue[]): SqlRow[];
}

export interface Database {
	exec(sql: string): void;
	prepare(sql: string): Statement;
	close(): void;
}

interface SqliteModule {
	DatabaseSync: new (path: string, options?: { timeout?: number }) => Database;
}

/** The Node.js versions that have `node:sqlite` without a flag: 22.13 or newer (and 23.4+, 24). */
export function nodeHasSqlite(version = process.versions.node): boolean {
	const [major, minor] = version.split('.').map(Number);
	return major > 23 || (major === 23 && minor >= 4) || (major === 22 && minor >= 13);
}

let loaded: SqliteModule | null = null;

/** `node:sqlite`, or an error that says which Node.js is needed and what to use instead. */
export function loadSqlite(version = process.versions.node): SqliteModule {
	const refuse = () =>
		new LedgerUnavailableError(
			`The Built-in ledger needs Node.js 22.13 or newer (n8n 1.x images ship Node 22, n8n 2.x Node 24); this n8n runs on Node ${version}`,
			'Update n8n (or the Node.js it runs on), or use the PostgreSQL or Redis ledger.',
			'NODE_TOO_OLD',
		);
	if (!nodeHasSqlite(version)) throw refuse();
	if (loaded) return loaded;
	try {
		// Required here, not imported at the top: see the comment at the head of this file.
		loaded = require('node:sqlite') as SqliteModule;
	} catch {
		throw refuse();
	}
	return loaded;
}
