import { withinSeconds } from '../duration';
import { LedgerError, LedgerUnavailableError } from '../errors';
import type { TableNames } from './schema';

/** A deadlock (40P01) or serialization failure (40001): the statement was rolled back whole. */
export const isRetryableConflict = (error: unknown) => {
	const code = (error as { code?: string })?.code;
	return code === '40P01' || code === '40001';
};

/** A unique violation (23505): the statement was rolled back whole. */
export const isUniqueViolation = (error: unknown) => (error as { code?: string })?.code === '23505';

/** The time limits of a pool (see connect.ts), so that a timeout can say how long was waited. */
export interface Timeouts {
	connectMs?: number;
	statementMs?: number;
}

/** The limits a pool was made with (pg-pool keeps its options on the pool). */
export function timeoutsOf(pool: unknown): Timeouts {
	const options = (pool as { options?: { connectionTimeoutMillis?: number; query_timeout?: number } })?.options;
	return { connectMs: options?.connectionTimeoutMillis || undefined, statementMs: options?.query_timeout || undefined };
}


/**
 * Turns driver and network errors into messages a person can act on. Never includes the
 * password or the connection string.
 */
export function toUnavailable(error: unknown, tables?: TableNames, limits?: Timeouts): Error {
	if (error instanceof LedgerError) return error;
	const e = error as { code?: string; message?: string };
	const code = e?.code;
	const message = typeof e?.message === 'string' ? e.message : '';
	const where = tables ? ` (${tables.ledger})` : '';
	switch (code) {
		case 'ECONNREFUSED':
			return new LedgerUnavailableError(
				'The ledger database refused the connection',
				'Check that PostgreSQL is running and that the host and port in the ledger credential are right.',
				code,
			);
		case 'ENOTFOUND':
		case 'EAI_AGAIN':
			return new LedgerUnavailableError(
				'The ledger database host name could not be found',
				'Check the host in the ledger credential for typos, and that this machine can resolve it.',
				code,
			);
		case 'ETIMEDOUT':
			return new LedgerUnavailableError(
				'The ledger database did not answer in time (the network connection timed out)',
				'Check the network path and firewall between n8n and PostgreSQL, and that the port is right.',
				code,
			);
		case 'EHOSTUNREACH':
		case 'ENETUNREACH':
			return new LedgerUnavailableError(
				'The ledger database host cannot be reached from n8n',
				'Check the host in the ledger credential, and the network path and firewall between n8n and PostgreSQL.',
				code,
			);
		case 'ECONNRESET':
		case 'EPIPE':
			return closedByServer(code);
		case '28P01':
			return new LedgerUnavailableError(
				'The ledger database rejected the user name or password',
				'Check the user and password in the ledger credential.',
				code,
			);
		case '28000':
			if (/role "(.*)" does not exist/.test(message)) {
				const user = /role "(.*)" does not exist/.exec(message)?.[1] ?? '';
				return new LedgerUnavailableError(
					`The user "${user}" named in the ledger credential does not exist on this PostgreSQL server`,
					'Check the user name in the ledger credential (and that host and port point to the right server), or create the user (role) first.',
					code,
				);
			}
			return new LedgerUnavailableError(
				'The ledger database does not allow this user to connect from here',
				'Ask the database administrator to allow this user and host in pg_hba.conf, or check the SSL setting.',
				code,
			);
		case '3D000':
			return new LedgerUnavailableError(
				'The ledger database named in the credential does not exist',
				'Check the database name in the ledger credential, or create the database first.',
				code,
			);
		case '42501':
			return new LedgerUnavailableError(
				`The ledger user has no permission to create or use the ledger tables${where}`,
				'Grant the user CREATE on the schema (or create the tables once as an administrator) and USAGE, SELECT, INSERT, UPDATE, DELETE on them.',
				code,
			);
		case '3F000':
			return new LedgerUnavailableError(
				`The schema of the ledger does not exist and could not be created${where}`,
				'Check the schema name in the ledger credential, or create it as an administrator.',
				code,
			);
		case '53300':
			return new LedgerUnavailableError(
				'The ledger database has no free connections',
				'Lower the pool size in the ledger credential, or raise max_connections in PostgreSQL.',
				code,
			);
		case '40P01':
		case '40001':
			return new LedgerUnavailableError(
				'The ledger database kept stopping this write because concurrent runs were changing the same keys',
				'Run the execution again. If it keeps happening, lower the number of executions running at once.',
				code,
			);
		case '57014':
			if (/statement timeout/i.test(message)) return statementTimeout(limits, code);
			return new LedgerUnavailableError(
				'The ledger database cancelled the statement (an administrator or a tool cancelled it)',
				'Nothing was written by the cancelled statement. Retry the execution; if it keeps happening, ask the database administrator what cancels ledger statements.',
				code,
			);
		// admin_shutdown: a fast or immediate shutdown, or pg_terminate_backend, ended the session.
		case '57P01':
			return new LedgerUnavailableError(
				'The ledger database ended the connection: it is shutting down or restarting (or an administrator ended the session)',
				RESTART_HINT,
				code,
			);
		// crash_shutdown: another server process crashed and PostgreSQL restarts all sessions.
		case '57P02':
			return new LedgerUnavailableError('The ledger database is restarting after one of its processes crashed', RESTART_HINT, code);
		// cannot_connect_now: a new connection during shutdown, startup or crash recovery.
		case '57P03':
			return new LedgerUnavailableError(
				/shutting down/i.test(message)
					? 'The ledger database is shutting down and accepts no new connections'
					: /starting up|not yet accepting|recovery/i.test(message)
						? 'The ledger database is starting up (or recovering after a restart) and accepts no connections yet'
						: 'The ledger database accepts no new connections right now',
				RESTART_HINT,
				code,
			);
	}
	if (/timeout exceeded when trying to connect/i.test(message)) {
		return new LedgerUnavailableError(
			`No free connection to the ledger database could be had ${withinSeconds(limits?.connectMs)}`,
			'Check that PostgreSQL is reachable, or raise the pool size if many executions run at once.',
			'POOL_TIMEOUT',
		);
	}
	// pg-pool: the connection was opened, but PostgreSQL did not complete the handshake in time.
	if (/Connection terminated due to connection timeout|timeout expired/i.test(message)) {
		return new LedgerUnavailableError(
			`The ledger database did not answer ${withinSeconds(limits?.connectMs)} while connecting (the connect timeout)`,
			'Check that the host and port point to PostgreSQL and that it is not overloaded or blocked. To wait longer, raise Timeout (Seconds) in the ledger credential.',
			'CONNECT_TIMEOUT',
		);
	}
	// pg: the client-side bound on one statement (query_timeout).
	if (/Query read timeout/i.test(message)) return statementTimeout(limits, 'STATEMENT_TIMEOUT');
	// pg: the server closed the connection; or it had already (e.g. a crash restart ended the
	// session while it was idle) and this client may no longer be used.
	if (/^Connection terminated( unexpectedly)?$|Client has encountered a connection error and is not queryable/i.test(message)) {
		return closedByServer('CONNECTION_CLOSED');
	}
	if (typeof e?.message === 'string' && /SSL|certificate|self[- ]signed/i.test(e.message)) {
		return new LedgerUnavailableError(
			`The secure (SSL) connection to the ledger database failed: ${e.message}`,
			'Check the SSL mode and CA certificate in the ledger credential.',
			code,
		);
	}
	return error instanceof Error ? error : new Error(String(error));
}

/** Said whenever PostgreSQL is going down or coming up: the problem is the server, not the network. */
const RESTART_HINT =
	'Retry the execution once PostgreSQL is up again (a restart usually takes seconds). If it keeps happening, check the PostgreSQL server and its log.';

function closedByServer(code: string) {
	return new LedgerUnavailableError(
		'The ledger database closed the connection unexpectedly',
		`PostgreSQL may be restarting or shutting down (or a proxy in between closed the connection). ${RESTART_HINT}`,
		code,
	);
}

function statementTimeout(limits: Timeouts | undefined, code: string) {
	return new LedgerUnavailableError(
		`The ledger database did not answer a statement ${withinSeconds(limits?.statementMs)} (the statement timeout)`,
		'Check that PostgreSQL is not overloaded, and for locks held by other sessions (pg_stat_activity); then retry the execution. To wait longer, raise Command Timeout (Seconds) in the ledger credential.',
		code,
	);
}
