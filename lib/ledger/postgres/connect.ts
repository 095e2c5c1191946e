import { Pool, type PoolConfig } from 'pg';

import { DEFAULT_AUTO_PURGE } from '../autoPurge';
import { DEFAULT_COMMAND_TIMEOUT_MS, DEFAULT_CONNECT_TIMEOUT_MS } from '../duration';
import { sha256 } from '../fingerprint';
import { idleSweeper, type CachedClient } from '../idleClients';
import { PostgresLedger } from './PostgresLedger';

export type SslMode = 'disable' | 'require' | 'verify-full';

export interface PostgresSettings {
	host: string;
	port: number;
	database: string;
	user: string;
	password: string;
	ssl: SslMode;
	/** PEM text of the CA that signed the server certificate (verify-full). */
	ca?: string;
	/** Only for `require`: whether to reject a certificate that does not verify. */
	rejectUnauthorized?: boolean;
	schema: string;
	table: string;
	poolSize: number;
	/** Milliseconds to wait for a connection before failing closed. */
	connectTimeoutMs?: number;
	/** Milliseconds one statement may take before it fails as a timeout. */
	commandTimeoutMs?: number;
}

export function poolConfig(s: PostgresSettings): PoolConfig {
	const ssl =
		s.ssl === 'disable'
			? false
			: s.ssl === 'verify-full'
				? { rejectUnauthorized: true, ca: s.ca || undefined }
				: { rejectUnauthorized: s.rejectUnauthorized ?? false, ca: s.ca || undefined };
	return {
		host: s.host,
		port: s.port,
		database: s.database,
		user: s.user,
		password: s.password,
		ssl,
		max: s.poolSize,
		idleTimeoutMillis: 30_000,
		connectionTimeoutMillis: s.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
		// The statement bound is the client's (query_timeout), not a `statement_timeout` startup
		// parameter: PgBouncer in transaction mode refuses connections that send one.
		query_timeout: s.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS,
		application_name: 'n8n-nodes-idempotency',
	};
}

interface Entry extends CachedClient {
	ledger: PostgresLedger;
	pool: Pool;
}

const cache = new Map<string, Entry>();
const startSweeper = idleSweeper(
	cache,
	(entry) => void entry.pool.end().catch(() => undefined),
	(entry) => entry.pool.totalCount === 0 && entry.pool.waitingCount === 0,
);

/** The cache key: a hash of every connection setting, so the password never sits in a map key. */
export const settingsKey = (s: PostgresSettings, scope = 'postgres') => sha256(JSON.stringify([scope, s]));

/**
 * One pool per distinct credential, reused across executions. A pool whose connections have all
 * gone idle, that nobody asked for and whose ledger made no call in 15 minutes, is closed
 * (idleClients.ts).
 */
export function postgresLedger(settings: PostgresSettings): PostgresLedger {
	const key = settingsKey(settings);
	let entry = cache.get(key);
	if (!entry) {
		const pool = new Pool(poolConfig(settings));
		// An idle client that loses its server must not crash the n8n process.
		pool.on('error', () => undefined);
		entry = {
			pool,
			ledger: new PostgresLedger({
				pool,
				schema: settings.schema,
				table: settings.table,
				autoPurge: DEFAULT_AUTO_PURGE,
			}),
			lastUsed: Date.now(),
		};
		cache.set(key, entry);
		startSweeper();
	}
	entry.lastUsed = Date.now();
	return entry.ledger;
}


/** Close every cached pool (tests and shutdown). */
export async function closeAllPostgresLedgers(): Promise<void> {
	const entries = [...cache.values()];
	cache.clear();
	await Promise.all(entries.map((e) => e.pool.end().catch(() => undefined)));
}
