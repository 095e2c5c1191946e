import { isIP } from 'net';
import type { ConnectionOptions } from 'tls';
import { Cluster, Redis, type ClusterNode, type RedisOptions } from 'ioredis';

import { DEFAULT_AUTO_PURGE } from '../autoPurge';
import { DEFAULT_COMMAND_TIMEOUT_MS, DEFAULT_CONNECT_TIMEOUT_MS, withinSeconds } from '../duration';
import { LedgerInputError, LedgerUnavailableError } from '../errors';
import { sha256 } from '../fingerprint';
import { idleSweeper, type CachedClient } from '../idleClients';
import { toUnavailable } from './errors';
import { RedisLedger } from './RedisLedger';
import { checkRedisSafety, type RedisSafety } from './safety';

export interface RedisSettings {
	host: string;
	port: number;
	user?: string;
	password?: string;
	/** Database index; must be 0 in cluster mode. */
	db: number;
	tls: boolean;
	/** Only with TLS: whether to refuse a certificate that does not verify. Default true. */
	tlsRejectUnauthorized?: boolean;
	prefix: string;
	cluster: boolean;
	/** "host:port, host:port"; in cluster mode, the nodes to start from (default: host and port). */
	clusterNodes?: string;
	/** Milliseconds to wait for a connection before failing closed. */
	connectTimeoutMs?: number;
	/** Milliseconds one command may take before it fails as a timeout. */
	commandTimeoutMs?: number;
}

/** A connection that opened but whose handshake did not finish in time. */
export const handshakeTimeout = (ms: number) =>
	new LedgerUnavailableError(
		`The ledger Redis did not answer ${withinSeconds(ms)} while connecting (the connect timeout)`,
		'Check that the host and port point to Redis (and the TLS setting), and that it is not overloaded or blocked. To wait longer, raise Timeout (Seconds) in the ledger credential.',
		'CONNECT_TIMEOUT',
	);

/** SELECT of the credential's database index failed: the server has fewer databases. */
export const databaseOutOfRange = (db: number, count?: number) =>
	new LedgerUnavailableError(
		`The Redis database index ${db} does not exist on this server (${count ? `it has ${count}: 0 to ${count - 1}` : 'out of range'})`,
		'Set Database Index in the ledger credential to one the server has (0 to 15 by default), or raise "databases" in redis.conf.',
		'DB_RANGE',
	);

/** "10.0.0.1:6379, 10.0.0.2:6379" to nodes. Throws LedgerInputError on a malformed entry. */
export function parseClusterNodes(text: string | undefined): ClusterNode[] {
	const nodes: ClusterNode[] = [];
	for (const entry of (text ?? '').split(/[,\s]+/).filter(Boolean)) {
		const match = /^(.+):(\d{1,5})$/.exec(entry);
		const port = match ? Number(match[2]) : NaN;
		if (!match || port < 1 || port > 65535) {
			throw new LedgerInputError(
				`The cluster node "${entry}" is not in the form host:port`,
				'List the nodes as host:port separated by commas, for example "10.0.0.1:6379, 10.0.0.2:6379".',
			);
		}
		nodes.push({ host: match[1].replace(/^\[(.*)\]$/, '$1'), port });
	}
	return nodes;
}

/**
 * Connection options that fail fast: connect lazily, give up on a connection attempt after a few
 * seconds, and fail a command after one reconnect instead of queueing it for ever. Commands that
 * were sent but not answered are not resent after a reconnect (a claim could run twice).
 * createRedisClient adds the rule that a client that never connected does not retry at all.
 */
export function redisOptions(s: RedisSettings): RedisOptions {
	const tls: ConnectionOptions | undefined = s.tls
		? { rejectUnauthorized: s.tlsRejectUnauthorized ?? true, servername: s.host && !isIP(s.host) ? s.host : undefined }
		: undefined;
	return {
		host: s.host,
		port: s.port,
		username: s.user || undefined,
		password: s.password || undefined,
		db: s.cluster ? 0 : s.db,
		tls,
		lazyConnect: true,
		connectTimeout: s.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
		// Timed-out commands are not retried, so the bound is not multiplied.
		commandTimeout: s.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS,
		// A server that never answers never closes its side either: do not wait 2 s for it.
		disconnectTimeout: 500,
		maxRetriesPerRequest: 1,
		autoResendUnfulfilledCommands: false,
		retryStrategy: (times) => Math.min(times * 250, 2_000),
		connectionName: 'n8n-nodes-idempotency',
	};
}

/**
 * A new, not yet connected client (Redis or Cluster) for these settings. A client whose first
 * connection fails ends at once (wrong host, port or password: retrying would not help, and it
 * must not keep reconnecting in the background); once connected, it reconnects after a drop.
 */
export function createRedisClient(s: RedisSettings): Redis | Cluster {
	const options = redisOptions(s);
	if (!s.cluster) {
		let connected = false;
		const client = new Redis({ ...options, retryStrategy: (times) => (connected ? options.retryStrategy?.(times) : null) });
		client.once('ready', () => (connected = true));
		// ioredis bounds only the TCP connect; the handshake after it gets the same bound here.
		const limitMs = options.connectTimeout ?? DEFAULT_CONNECT_TIMEOUT_MS;
		let handshake: NodeJS.Timeout | undefined;
		const stop = () => (handshake = handshake ? (clearTimeout(handshake), undefined) : undefined);
		client.on('connect', () => {
			stop();
			handshake = setTimeout(() => {
				handshake = undefined;
				client.emit('error', handshakeTimeout(limitMs));
				client.disconnect(connected);
			}, limitMs);
			handshake.unref?.();
		});
		client.on('ready', stop);
		client.on('close', stop);
		client.on('error', (error: Error & { timeoutMs?: number }) => {
			if (error?.message === 'connect ETIMEDOUT') error.timeoutMs = limitMs;
			// ioredis reports a failed SELECT and then goes on in database 0: stop before any command runs.
			if (/DB index is out of range/i.test(error?.message ?? '')) {
				stop();
				client.disconnect();
				// After the other listeners have seen the driver's error: this one is the last word.
				process.nextTick(() => client.emit('error', databaseOutOfRange(s.db)));
			}
		});
		return client;
	}
	const nodes = parseClusterNodes(s.clusterNodes);
	// Cluster nodes take everything but the address, database and reconnect policy of a single server.
	const { host, port, db, lazyConnect, retryStrategy, ...nodeOptions } = options;
	return new Cluster(nodes.length > 0 ? nodes : [{ host, port }], {
		lazyConnect,
		redisOptions: nodeOptions,
		clusterRetryStrategy: (times) => (times > 3 ? null : Math.min(times * 250, 1_000)),
		slotsRefreshTimeout: options.connectTimeout,
		// With TLS, connect to the announced addresses as they are (needed by most managed clusters).
		dnsLookup: s.tls ? (address, callback) => callback(null, address) : undefined,
	});
}

interface Entry extends CachedClient {
	ledger: RedisLedger;
	client: Redis | Cluster;
	/** The server's eviction and persistence settings, read once for this client (see redisSafety). */
	safety: Promise<RedisSafety> | null;
}

const cache = new Map<string, Entry>();
const startSweeper = idleSweeper(cache, (entry) => void entry.ledger.close());

/** The cache key: a hash of every connection setting, so the password never sits in a map key. */
export const redisSettingsKey = (s: RedisSettings) => sha256(JSON.stringify(['redis', s]));

/**
 * One client per distinct credential, reused across executions. A client that nobody asked for,
 * and whose ledger made no call, in 15 minutes is closed (idleClients.ts).
 */
export function redisLedger(settings: RedisSettings): RedisLedger {
	return entryOf(settings).ledger;
}

/** The cached client of these settings (made when there is none), its settings hashed once. */
function entryOf(settings: RedisSettings) {
	const key = redisSettingsKey(settings);
	let entry = cache.get(key);
	if (entry && entry.client.status === 'end') {
		// Its first connection failed (or it was closed): start over with a new client.
		cache.delete(key);
		entry = undefined;
	}
	if (!entry) {
		const client = createRedisClient(settings);
		// A client that loses its server must not crash the n8n process; commands still fail.
		client.on('error', () => undefined);
		entry = { client, ledger: new RedisLedger({ client, prefix: settings.prefix, autoPurge: DEFAULT_AUTO_PURGE }), lastUsed: Date.now(), safety: null };
		cache.set(key, entry);
		startSweeper();
	}
	entry.lastUsed = Date.now();
	return entry;
}

/**
 * Whether the Redis of these settings can lose ledger keys (eviction, no persistence), read once
 * per shared client: a safe answer is kept for the client's life. An answer with risks is read
 * again on the next call, so a server fixed with CONFIG SET is seen at once; an answer that could
 * not read some settings (a managed service refusing CONFIG) is kept, as it will not change.
 * Rejects with LedgerUnavailableError when the server cannot be reached.
 */
export function redisSafety(settings: RedisSettings): Promise<RedisSafety> {
	const entry = entryOf(settings);
	const pending = (entry.safety ??= checkRedisSafety(entry.client).then(
		(report) => {
			if (report.risks.length > 0 && entry.safety === pending) entry.safety = null;
			return report;
		},
		(error: unknown) => {
			if (entry.safety === pending) entry.safety = null;
			throw toUnavailable(error);
		},
	));
	return pending;
}

/** Close every cached client (tests and shutdown). */
export async function closeAllRedisLedgers(): Promise<void> {
	const entries = [...cache.values()];
	cache.clear();
	await Promise.all(entries.map((e) => e.ledger.close().catch(() => undefined)));
}
