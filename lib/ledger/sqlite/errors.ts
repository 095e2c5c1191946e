import { LedgerError, LedgerUnavailableError } from '../errors';

/** Turns SQLite's errors into messages a person can act on; the file is named, nothing else. */
export function toUnavailable(error: unknown, file: string, busyTimeoutMs: number): Error {
	if (error instanceof LedgerError) return error;
	const e = error as { errcode?: number; code?: string; message?: string };
	const message = typeof e?.message === 'string' ? e.message : '';
	// Primary result codes (the low byte of an extended code): 5 BUSY, 6 LOCKED, 8 READONLY,
	// 10 IOERR, 11 CORRUPT, 13 FULL, 14 CANTOPEN, 26 NOTADB.
	const primary = typeof e?.errcode === 'number' ? e.errcode & 0xff : undefined;
	if (primary === 5 || primary === 6 || /database is locked|database table is locked/i.test(message)) {
		return new LedgerUnavailableError(
			`The Built-in ledger file ${file} stayed locked by another process for more than ${busyTimeoutMs / 1000} s`,
			'Another n8n process (or a tool) holds a long write on the file. Try again; if it keeps happening, close whatever holds the file open.',
			'SQLITE_BUSY',
		);
	}
	if (primary === 8) {
		return new LedgerUnavailableError(
			`The Built-in ledger file ${file} cannot be written (read-only)`,
			'Give the user n8n runs as write access to the file and its folder.',
			'SQLITE_READONLY',
		);
	}
	if (primary === 13) {
		return new LedgerUnavailableError(`The disk that holds the Built-in ledger file ${file} is full`, 'Free space on that disk.', 'SQLITE_FULL');
	}
	if (primary === 11 || primary === 26) {
		return new LedgerUnavailableError(
			`The Built-in ledger file ${file} is damaged or is not a ledger file`,
			'Point the credential at another file name, or restore the file from a backup.',
			'SQLITE_CORRUPT',
		);
	}
	if (primary === 14) {
		return new LedgerUnavailableError(
			`The Built-in ledger file ${file} cannot be opened`,
			'Check that its folder exists and that the user n8n runs as may write there.',
			'SQLITE_CANTOPEN',
		);
	}
	return new LedgerUnavailableError(
		`The Built-in ledger file ${file} could not be used (${primary === 10 ? 'a disk input/output error' : 'SQLite error'})`,
		'Check the disk and the file; if it keeps happening, report it with the n8n log.',
		'SQLITE_ERROR',
	);
}
