import { spawnSync } from 'child_process';
import { randomBytes } from 'crypto';
import { Redis } from 'ioredis';

import { RedisLedger } from '../../lib/ledger/redis';

/** The Redis the suite runs against: REDIS_URL, else 127.0.0.1:6379. */
export const redisUrl = () => process.env.REDIS_URL || 'redis://127.0.0.1:6379';

let reachable: { ok: boolean; reason: string } | null = null;

/**
 * Whether Redis answers PING, decided synchronously (a child process) so that a test file can
 * choose `describe` or `describe.skip` at load time. Cached per test file.
 */
export function redisReachable(): { ok: boolean; reason: string } {
	if (reachable) return reachable;
	const probe = `
		const { Redis } = require('ioredis');
		const r = new Redis(process.argv[1], { lazyConnect: true, maxRetriesPerRequest: 0, connectTimeout: 2000, retryStrategy: () => null });
		r.on('error', () => undefined);
		r.ping().then(() => { r.disconnect(); process.exit(0); }, (e) => { console.log(e && e.message); r.disconnect(); process.exit(1); });`;
	const out = spawnSync(process.execPath, ['-e', probe, redisUrl()], { cwd: __dirname, timeout: 8_000, encoding: 'utf8' });
	const where = redisUrl().replace(/\/\/[^@/]*@/, '//***@');
	reachable =
		out.status === 0
			? { ok: true, reason: '' }
			: { ok: false, reason: `no Redis answered at ${where} (${(out.stdout || out.stderr || 'timeout').trim()})` };
	return reachable;
}

/** `describe`, or `describe.skip` with a loud warning saying why. */
export function describeIfRedis(what: string): jest.Describe {
	const { ok, reason } = redisReachable();
	if (ok) return describe;
	console.warn(`\n*** SKIPPED: ${what}: ${reason}. Start Redis or set REDIS_URL to run it. ***\n`);
	return describe.skip;
}

export const uniquePrefix = (p = 't') => `${p}-${randomBytes(5).toString('hex')}`;

export function newRedisClient(): Redis {
	const client = new Redis(redisUrl(), { lazyConnect: true, maxRetriesPerRequest: 1 });
	client.on('error', () => undefined);
	return client;
}

/** Deletes every key of a ledger prefix (its namespaces' keys and its own). */
export async function deletePrefix(client: Redis, prefix: string): Promise<number> {
	let deleted = 0;
	let cursor = '0';
	do {
		const [next, keys] = await client.scan(cursor, 'MATCH', `{${prefix}[:}]*`, 'COUNT', 1000);
		cursor = next;
		if (keys.length > 0) deleted += await client.unlink(...keys);
	} while (cursor !== '0');
	return deleted;
}

/** A ledger under its own fresh prefix, and a cleanup that deletes its keys. */
export async function freshRedisLedger(prefix = uniquePrefix(), chunkSize?: number) {
	const client = newRedisClient();
	const ledger = new RedisLedger({ client, prefix, chunkSize });
	await ledger.ensureSchema();
	return {
		ledger,
		client,
		prefix,
		async dispose() {
			await deletePrefix(client, prefix);
			await ledger.close();
		},
	};
}
