import { LedgerError, LedgerInputError } from '../ledger/errors';
import { createRedisClient, databaseOutOfRange, parseClusterNodes, type RedisSettings } from '../ledger/redis/connect';
import { toUnavailable } from '../ledger/redis/errors';
import { closeClient } from '../ledger/redis/RedisLedger';
import { assertPrefix } from '../ledger/redis/keys';
import { checkRedisSafety } from '../ledger/redis/safety';
import { timeoutsFrom } from './credentialTimeouts';
import { acceptedRiskWarning, unknownSettingsWarning, unsafeRedisFinding } from './redisSafety';

export const REDIS_CREDENTIAL = 'idempotencyRedisApi';

/** Credential data from n8n to connection settings, with readable errors for bad values. */
export function redisSettingsFrom(data: Record<string, unknown>): RedisSettings {
	const cluster = data.cluster === true;
	const clusterNodes = typeof data.clusterNodes === 'string' ? data.clusterNodes.trim() : '';
	if (cluster) parseClusterNodes(clusterNodes);
	const host = String(data.host ?? '').trim();
	if (!host && !(cluster && clusterNodes)) {
		throw new LedgerInputError('The ledger credential has no host', 'Open the credential and enter the Redis host, for example "localhost".');
	}
	const port = Number(data.port ?? 6379);
	if (!Number.isInteger(port) || port < 1 || port > 65535) {
		throw new LedgerInputError(
			`The ledger credential's port ${JSON.stringify(data.port)} is not a port number`,
			'Use a whole number between 1 and 65535, usually 6379.',
		);
	}
	const db = Number(data.database ?? 0);
	if (!Number.isInteger(db) || db < 0) {
		throw new LedgerInputError(`The database index ${JSON.stringify(data.database)} must be a whole number from 0 up`);
	}
	if (cluster && db !== 0) {
		throw new LedgerInputError('Redis Cluster has only database 0', 'Set the database index to 0, or turn off cluster mode.');
	}
	const user = String(data.user ?? '').trim();
	const password = String(data.password ?? '');
	return {
		host,
		port,
		user: user || undefined,
		password: password || undefined,
		db,
		tls: data.tls === true,
		tlsRejectUnauthorized: data.rejectUnauthorized === undefined ? undefined : data.rejectUnauthorized !== false,
		prefix: assertPrefix(String(data.prefix ?? 'idem').trim() || 'idem'),
		cluster,
		clusterNodes: cluster && clusterNodes ? clusterNodes : undefined,
		...timeoutsFrom(data),
	};
}

const explain = (error: unknown): string => {
	const e = toUnavailable(error);
	const hint = e instanceof LedgerError && e.hint ? ` ${e.hint}` : '';
	return `${e.message.replace(/\.$/, '')}.${hint}`;
};

/**
 * Connects and pings, so the answer covers "refused", "unknown host" and "bad password", then
 * reads the settings that let Redis lose ledger keys (eviction, persistence): one that can lose
 * them is an error, as the nodes will refuse this Redis, unless `acceptKeyLoss`; then, and for
 * settings the server would not show, the answer is OK with the warning. The client is always closed.
 */
export async function testRedisConnection(settings: RedisSettings, acceptKeyLoss = false): Promise<{ status: 'OK' | 'Error'; message: string }> {
	const client = createRedisClient(settings);
	let lastError: unknown = null;
	client.on('error', (error) => (lastError = error));
	try {
		await client.connect();
		await client.ping();
		const report = await checkRedisSafety(client);
		const where = settings.cluster ? 'the Redis Cluster' : 'Redis';
		if (report.risks.length > 0 && !acceptKeyLoss) {
			const { message, advice } = unsafeRedisFinding(report);
			return { status: 'Error', message: `Connected to ${where}, but the nodes will refuse it: ${message} ${advice}` };
		}
		const warnings = [
			...(report.risks.length > 0 ? [acceptedRiskWarning(report)] : []),
			...(report.unknown.length > 0 ? [unknownSettingsWarning(report)] : []),
		];
		if (warnings.length > 0) return { status: 'OK', message: `Connected to ${where}. ${warnings.join(' ')}` };
		return { status: 'OK', message: `Connected to ${where}; ledger keys start with "{${settings.prefix}"` };
	} catch (error) {
		let e = toUnavailable(error, lastError);
		if ((e as { code?: string }).code === 'DB_RANGE') e = databaseOutOfRange(settings.db, await databaseCount(settings));
		return { status: 'Error', message: explain(e) };
	} finally {
		await closeClient(client);
	}
}

/** How many databases the server has (CONFIG GET databases), or undefined if it may not be asked. */
async function databaseCount(settings: RedisSettings): Promise<number | undefined> {
	const client = createRedisClient({ ...settings, db: 0 });
	client.on('error', () => undefined);
	try {
		await client.connect();
		const reply = (await client.call('CONFIG', 'GET', 'databases')) as string[];
		const count = Number(reply?.[1]);
		return Number.isInteger(count) && count > 0 ? count : undefined;
	} catch {
		return undefined;
	} finally {
		await closeClient(client);
	}
}

/** The credential test n8n runs: settings first (bad values are an error too), then the connection. */
export async function testRedisCredential(data: Record<string, unknown>): Promise<{ status: 'OK' | 'Error'; message: string }> {
	let settings: RedisSettings;
	try {
		settings = redisSettingsFrom(data);
	} catch (error) {
		return { status: 'Error', message: explain(error) };
	}
	return await testRedisConnection(settings, data.acceptKeyLoss === true);
}
