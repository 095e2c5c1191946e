import { withinSeconds } from '../duration';
import { LedgerError, LedgerUnavailableError } from '../errors';

const unavailable = (message: string, hint: string, code: string) => new LedgerUnavailableError(message, hint, code);

/**
 * Turns ioredis and network errors into messages a person can act on. Never includes the
 * password. `lastConnectionError` is the last error the client emitted: when a command fails
 * only with "max retries" or "connection closed", it holds the real reason (refused, unknown host).
 */
export function toUnavailable(error: unknown, lastConnectionError?: unknown, commandTimeoutMs?: number): Error {
	if (error instanceof LedgerError) return error;
	const e = (error ?? {}) as { code?: string; message?: string; name?: string; lastNodeError?: unknown; timeoutMs?: number };
	const message = typeof e.message === 'string' ? e.message : String(error);
	if (e.name === 'ClusterAllFailedError' && e.lastNodeError) return toUnavailable(e.lastNodeError, lastConnectionError, commandTimeoutMs);
	const lostConnection =
		e.name === 'MaxRetriesPerRequestError' || /Connection is closed|Stream isn't writeable|connect ETIMEDOUT/i.test(message);
	if (lostConnection && lastConnectionError && lastConnectionError !== error) {
		const mapped = toUnavailable(lastConnectionError);
		if (mapped instanceof LedgerUnavailableError) return mapped;
	}
	switch (e.code) {
		case 'ECONNREFUSED':
			return unavailable(
				'The ledger Redis refused the connection',
				'Check that Redis is running and that the host and port in the ledger credential are right.',
				e.code,
			);
		case 'ENOTFOUND':
		case 'EAI_AGAIN':
			return unavailable(
				'The ledger Redis host name could not be found',
				'Check the host in the ledger credential for typos, and that this machine can resolve it.',
				e.code,
			);
		case 'ETIMEDOUT':
			return unavailable(
				`The ledger Redis did not answer ${withinSeconds(e.timeoutMs)}${e.timeoutMs ? ' (the connect timeout)' : ''}`,
				'Check the network path and firewall between n8n and Redis, that the port is right, and the TLS setting. To wait longer, raise Timeout (Seconds) in the ledger credential.',
				e.code,
			);
		case 'ECONNRESET':
		case 'EPIPE':
			return unavailable(
				'The ledger Redis closed the connection',
				'Redis may be restarting or shutting down (or a proxy in between closed the connection). Wait until it is up again, then retry the execution.',
				e.code,
			);
		case 'EHOSTUNREACH':
		case 'ENETUNREACH':
			return unavailable(
				'The ledger Redis did not answer in time',
				'Check the network path and firewall between n8n and Redis, that the port is right, and the TLS setting.',
				e.code,
			);
	}
	if (/Command timed out/i.test(message)) {
		return unavailable(
			`The ledger Redis did not answer a command ${withinSeconds(commandTimeoutMs)} (the command timeout)`,
			'Check that Redis is not overloaded or blocked, and the network between n8n and Redis. To wait longer, raise Command Timeout (Seconds) in the ledger credential.',
			'TIMEOUT',
		);
	}
	const rule = RULES.find(([pattern]) => pattern.test(message));
	if (rule) return unavailable(rule[3] === 'TLS' ? `${rule[1]}: ${message}` : rule[1], rule[2], rule[3]);
	if (lostConnection) {
		return unavailable(
			'The ledger Redis could not be reached',
			'Check that Redis is running and reachable from n8n, and the host, port and TLS setting in the ledger credential.',
			'UNREACHABLE',
		);
	}
	return error instanceof Error ? error : new Error(message);
}

const RULES: Array<[RegExp, string, string, string]> = [
	[
		/^WRONGPASS|invalid username-password pair|ERR invalid password/i,
		'The ledger Redis rejected the user name or password',
		'Check the user and password in the ledger credential.',
		'WRONGPASS',
	],
	[
		/^NOAUTH/i,
		'The ledger Redis requires a password',
		'Enter the password (and the user, for a Redis 6+ ACL user) in the ledger credential.',
		'NOAUTH',
	],
	[
		/AUTH.*called without any password configured|without any password configured/i,
		'The ledger credential sends a password, but this Redis has none set',
		'Clear the password in the ledger credential, or set one on the Redis server.',
		'NOPASSWORD',
	],
	[
		/^NOPERM/i,
		'The ledger Redis user is not allowed to run a command the ledger needs',
		'Allow the user scripting, hash, set, sorted set and stream commands on the keys of the ledger prefix (for example "+@all ~*").',
		'NOPERM',
	],
	[
		/DB index is out of range/i,
		'The database index in the ledger credential does not exist on this Redis',
		'Use a database index the server has (0 to 15 by default), or 0 for Redis Cluster.',
		'DB_RANGE',
	],
	[
		/^READONLY/i,
		'The ledger Redis is a read-only replica (after a failover the old primary may have become one)',
		'Point the ledger credential at the current primary (master) Redis, for example the one Sentinel or your provider names as primary, then retry the execution.',
		'READONLY',
	],
	[
		/^MASTERDOWN/i,
		'The ledger Redis is a replica that has lost its link to the primary (during a failover, or while the primary is down)',
		'Point the ledger credential at the current primary (master) Redis, or wait until the failover is over, then retry the execution.',
		'MASTERDOWN',
	],
	[
		/^LOADING/i,
		'The ledger Redis is loading its data into memory (it has just started or restarted)',
		'Retry the execution in a moment, once Redis has finished loading. If it keeps happening, check the Redis server and its log.',
		'LOADING',
	],
	[
		/^OOM/i,
		'The ledger Redis is out of memory and refused the write',
		'Raise maxmemory on the Redis server or shorten the retention; keep maxmemory-policy at noeviction.',
		'OOM',
	],
	[
		/^CLUSTERDOWN|Failed to refresh slots cache|None of startup nodes is available/i,
		'The ledger Redis Cluster is not available',
		'Check the cluster nodes in the ledger credential and that the cluster is healthy.',
		'CLUSTERDOWN',
	],
	[
		/Protocol error, got/i,
		'The server at the ledger host and port does not speak the Redis protocol',
		'Check the port (Redis usually listens on 6379) and the TLS setting: a TLS-only Redis needs TLS turned on.',
		'PROTOCOL',
	],
	[
		/certificate|self[- ]signed|SSL|TLS|wrong version number/i,
		'The secure (TLS) connection to the ledger Redis failed',
		'Check the TLS and reject-unauthorized settings in the ledger credential.',
		'TLS',
	],
];
