import { LedgerError, LedgerSettingError } from '../ledger/errors';
import { DEFAULT_LEDGER_FILE, ledgerFilePath, n8nUserFolder, sqliteLedger, type SqliteSettings } from '../ledger/sqlite/connect';
import { SqliteLedger } from '../ledger/sqlite/SqliteLedger';

export const BUILTIN_CREDENTIAL = 'idempotencyBuiltinApi';

/** Credential data from n8n to the Built-in ledger's settings. Nothing is required. */
export function builtinSettingsFrom(data: Record<string, unknown>): SqliteSettings {
	const file = typeof data.file === 'string' ? data.file.trim() : '';
	return { file: file || DEFAULT_LEDGER_FILE, purge: data.sweepExpired !== false };
}

/**
 * In queue mode every worker is a process of its own, often on another machine: a file in one
 * user folder is not shared, and two workers would each let the same key through.
 */
export function refuseQueueMode(env: NodeJS.ProcessEnv = process.env): void {
	if (env.EXECUTIONS_MODE === 'queue') {
		throw new LedgerSettingError(
			'The Built-in ledger is for a single n8n; in queue mode (EXECUTIONS_MODE=queue) use PostgreSQL or Redis. Workers do not share a disk, so each would keep a ledger of its own and let the same key through',
			'Set "Ledger" to PostgreSQL or Redis: every worker reaches the same one.',
		);
	}
}

/** The Built-in ledger of a credential, checked (queue mode, Node.js, folder, file system) and ready. */
export async function openBuiltinLedger(data: Record<string, unknown>): Promise<SqliteLedger> {
	refuseQueueMode();
	const ledger = sqliteLedger(builtinSettingsFrom(data));
	await ledger.ensureSchema();
	return ledger;
}

/** Opens (or creates) the file and its tables, and says where it is. The file stays as it is. */
export async function testBuiltinCredential(data: Record<string, unknown>): Promise<{ status: 'OK' | 'Error'; message: string }> {
	let ledger: SqliteLedger | undefined;
	try {
		refuseQueueMode();
		const file = ledgerFilePath(builtinSettingsFrom(data));
		ledger = new SqliteLedger({ file });
		await ledger.ensureSchema();
		return { status: 'OK', message: `The Built-in ledger file ${file} is ready (this n8n only; n8n's folder is ${n8nUserFolder()})` };
	} catch (error) {
		const e = error instanceof LedgerError ? error : new LedgerError('The Built-in ledger file could not be opened', 'Check the file name in the credential.');
		return { status: 'Error', message: `${e.message}.${e.hint ? ` ${e.hint}` : ''}` };
	} finally {
		await ledger?.close().catch(() => undefined);
	}
}
