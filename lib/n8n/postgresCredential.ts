import { Pool } from 'pg';

import { LedgerError, LedgerInputError } from '../ledger/errors';
import { PostgresLedger } from '../ledger/postgres/PostgresLedger';
import { poolConfig, type PostgresSettings, type SslMode } from '../ledger/postgres/connect';
import { toUnavailable } from '../ledger/postgres/errors';
import { assertIdentifier } from '../ledger/validate';
import { timeoutsFrom } from './credentialTimeouts';

export const POSTGRES_CREDENTIAL = 'idempotencyPostgresApi';

const SSL_MODES: SslMode[] = ['disable', 'require', 'verify-full'];

/** Credential data from n8n to connection settings, with readable errors for bad values. */
export function postgresSettingsFrom(data: Record<string, unknown>): PostgresSettings {
	const host = String(data.host ?? '').trim();
	if (!host) throw new LedgerInputError('The ledger credential has no host', 'Open the credential and enter the PostgreSQL host, for example "localhost".');
	const port = Number(data.port ?? 5432);
	if (!Number.isInteger(port) || port < 1 || port > 65535) {
		throw new LedgerInputError(`The ledger credential's port ${JSON.stringify(data.port)} is not a port number`, 'Use a whole number between 1 and 65535, usually 5432.');
	}
	const poolSize = Number(data.poolSize ?? 10);
	if (!Number.isInteger(poolSize) || poolSize < 1 || poolSize > 100) {
		throw new LedgerInputError(`The pool size ${JSON.stringify(data.poolSize)} must be a whole number from 1 to 100`);
	}
	const ssl = (data.ssl ?? 'disable') as SslMode;
	if (!SSL_MODES.includes(ssl)) throw new LedgerInputError(`Unknown SSL mode "${String(ssl)}"`);
	return {
		host,
		port,
		database: String(data.database ?? 'postgres'),
		user: String(data.user ?? 'postgres'),
		password: String(data.password ?? ''),
		ssl,
		ca: typeof data.ca === 'string' && data.ca.trim() ? data.ca : undefined,
		rejectUnauthorized: data.rejectUnauthorized === undefined ? undefined : Boolean(data.rejectUnauthorized),
		schema: assertIdentifier(String(data.schema ?? 'public'), 'schema name'),
		table: assertIdentifier(String(data.table ?? 'idempotency_ledger'), 'table name'),
		poolSize,
		...timeoutsFrom(data),
	};
}

/**
 * Connects once, then creates (or checks) the ledger tables, so the answer covers
 * "refused", "unknown host", "bad password" and "no permission to create the table".
 * The connection is always closed.
 */
export async function testPostgresConnection(data: Record<string, unknown>): Promise<{ status: 'OK' | 'Error'; message: string }> {
	let pool: Pool | undefined;
	try {
		const settings = postgresSettingsFrom(data);
		pool = new Pool({ ...poolConfig(settings), max: 1 });
		pool.on('error', () => undefined);
		const ledger = new PostgresLedger({ pool, schema: settings.schema, table: settings.table });
		await ledger.ensureSchema();
		return { status: 'OK', message: `Connected; the ledger table ${settings.schema}.${settings.table} is ready` };
	} catch (error) {
		const e = toUnavailable(error) as LedgerError;
		const hint = e instanceof LedgerError && e.hint ? ` ${e.hint}` : '';
		return { status: 'Error', message: `${e.message}.${hint}` };
	} finally {
		await pool?.end().catch(() => undefined);
	}
}
