/**
 * Can this Redis lose ledger keys? A ledger that loses a key forgets that a message went out, and
 * the next run sends it again (with a new Idempotency-Key: the key includes the first-seen time).
 * Two settings decide it, read on every master that will be written:
 *
 * - Eviction. With `maxmemory` above 0, any `maxmemory-policy` other than `noeviction` lets Redis
 *   delete keys when memory runs out: the `allkeys-*` policies any key, the `volatile-*` policies
 *   any key with an expiry, and every ledger row has one. With `noeviction` a full Redis refuses
 *   writes instead (the ledger then fails closed). `maxmemory 0` sets no limit: nothing is evicted.
 * - Persistence. Without AOF (`appendonly yes`) and without RDB snapshots (`save` rules), a restart
 *   starts empty. With RDB only, a crash loses the writes since the last snapshot; this counts as
 *   persistent here (the rules are non-empty) and the docs say what AOF adds.
 *
 * Read with CONFIG GET. A server that refuses it (managed services rename or forbid CONFIG) is
 * read with INFO instead where it can be: INFO memory tells the eviction settings, INFO persistence
 * whether AOF is on, but not the RDB save rules. What cannot be read is reported as unknown.
 */
import type { Cluster, Redis } from 'ioredis';

/** One setting that lets the ledger lose keys, with the fix, in words for a person. */
export interface RedisRisk {
	/** The setting, as redis.conf and CONFIG SET name it. */
	setting: 'maxmemory-policy' | 'persistence';
	/** host:port of the server that has it. */
	server: string;
	/** What was read, e.g. `maxmemory-policy allkeys-lru with maxmemory 5242880`. */
	found: string;
	/** What it does to the ledger. */
	effect: string;
	/** How to fix it. */
	fix: string;
}

export interface RedisSafety {
	/** Settings that let the ledger lose keys. */
	risks: RedisRisk[];
	/** What could not be read, and what a person must check themselves (one sentence each). */
	unknown: string[];
}

type Node = Redis;

const serverName = (node: Node) => `${node.options.host ?? '?'}:${node.options.port ?? '?'}`;

/** CONFIG GET of one parameter (one per call: Redis before 7 takes one pattern), or null when refused. */
async function configGet(node: Node, name: string): Promise<string | null> {
	try {
		const reply = (await node.call('CONFIG', 'GET', name)) as unknown;
		if (!Array.isArray(reply)) return null;
		const at = reply.indexOf(name);
		return at >= 0 && at + 1 < reply.length ? String(reply[at + 1]) : null;
	} catch {
		return null;
	}
}

/** One INFO section as field → value, or null when refused. */
async function info(node: Node, section: string): Promise<Record<string, string> | null> {
	try {
		const text = await node.info(section);
		const out: Record<string, string> = {};
		for (const line of text.split(/\r?\n/)) {
			const at = line.indexOf(':');
			if (at > 0) out[line.slice(0, at)] = line.slice(at + 1).trim();
		}
		return out;
	} catch {
		return null;
	}
}

/** The settings of one server. */
async function checkNode(node: Node): Promise<RedisSafety> {
	const server = serverName(node);
	const risks: RedisRisk[] = [];
	const unknown: string[] = [];
	const [policyConf, maxmemoryConf, appendonlyConf, saveConf] = await Promise.all(
		['maxmemory-policy', 'maxmemory', 'appendonly', 'save'].map((name) => configGet(node, name)),
	);
	const configRefused = policyConf === null && maxmemoryConf === null && appendonlyConf === null && saveConf === null;

	// Eviction: CONFIG GET, else INFO memory.
	let policy = policyConf;
	let maxmemory = maxmemoryConf;
	if (policy === null || maxmemory === null) {
		const memory = await info(node, 'memory');
		policy ??= memory?.maxmemory_policy ?? null;
		maxmemory ??= memory?.maxmemory ?? null;
	}
	if (policy === null || maxmemory === null) {
		unknown.push(
			`${server} did not say its maxmemory and maxmemory-policy (CONFIG GET and INFO memory were refused): make sure it has maxmemory-policy noeviction, or no memory limit, or Redis may evict ledger keys when memory runs out`,
		);
	} else if (Number(maxmemory) > 0 && policy !== 'noeviction') {
		risks.push({
			setting: 'maxmemory-policy',
			server,
			found: `maxmemory-policy ${policy} with maxmemory ${maxmemory}`,
			effect: 'when memory runs out, Redis deletes ledger keys, and a message the ledger forgets is sent again',
			fix: '"CONFIG SET maxmemory-policy noeviction" (and "maxmemory-policy noeviction" in redis.conf, or the parameter group of a managed service)',
		});
	}

	// Persistence: CONFIG GET appendonly and save, else INFO persistence (AOF only).
	let aof = appendonlyConf === null ? null : appendonlyConf === 'yes';
	if (aof === null) {
		const persistence = await info(node, 'persistence');
		if (persistence?.aof_enabled !== undefined) aof = persistence.aof_enabled === '1';
	}
	if (aof === true) {
		// Persistent, whatever the save rules say.
	} else if (saveConf !== null && aof === false) {
		if (saveConf.trim() === '') {
			risks.push({
				setting: 'persistence',
				server,
				found: 'appendonly no and no save rules',
				effect: 'a restart starts with an empty ledger, and every message it knew of can be sent again',
				fix: '"CONFIG SET appendonly yes" (and "appendonly yes" in redis.conf), or RDB save rules such as "save 60 1"',
			});
		}
	} else {
		unknown.push(
			`${server} did not say whether it persists its data (${configRefused ? 'CONFIG GET was refused' : 'its save rules could not be read'}${aof === false ? '; AOF is off' : ''}): make sure it has AOF (appendonly yes) or RDB snapshots on, or a restart empties the ledger`,
		);
	}
	return { risks, unknown };
}

/**
 * Reads the eviction and persistence settings of the server (standalone) or of every master
 * (cluster) the client writes to. The client must be connected (or connect on the first command).
 * Never throws for a setting it may not read; a connection failure rejects.
 */
export async function checkRedisSafety(client: Redis | Cluster): Promise<RedisSafety> {
	const isCluster = (client as Cluster).isCluster === true;
	let nodes: Node[];
	if (isCluster) {
		const cluster = client as Cluster;
		// The slot map must be known to know the masters.
		if (cluster.status !== 'ready') await cluster.ping();
		nodes = cluster.nodes('master');
	} else {
		nodes = [client as Redis];
	}
	const reports = await Promise.all(nodes.map((node) => checkNode(node)));
	return { risks: reports.flatMap((r) => r.risks), unknown: reports.flatMap((r) => r.unknown) };
}

/** One sentence per risk: what was found where, what it does, the fix. */
export function describeRisks(risks: RedisRisk[]): string {
	return risks.map((r) => `${r.server} has ${r.found}: ${r.effect}. Fix: ${r.fix}.`).join(' ');
}
