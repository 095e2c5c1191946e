/**
 * Copying a ledger into another (lib/ledger/transfer.ts) between real PostgreSQL and Redis:
 * 100,000 rows each way, every field checked on arrival, a second run that copies nothing, and a
 * copy stopped half way then run again that ends exactly where an uninterrupted one does. Then the
 * merge rule row by row: nothing that may have been sent is ever reopened. (The tests themselves:
 * ledger.transfer.suite.ts; the Built-in ledger as the source: sqlite.transfer.test.ts.)
 */
import { describeIfRedis, freshRedisClusterLedger, redisClusterReachable, uniquePrefix } from '../support/redis';
import { describeBigCopy, describeMergeRule, pg, redis, type Fixture } from './ledger.transfer.suite';

describeIfRedis('Ledger copy between PostgreSQL and Redis')('Ledger copy', () => {
	describeBigCopy('PostgreSQL → Redis', pg, redis);
	describeBigCopy('Redis → PostgreSQL', redis, pg);
});

const cluster = async (): Promise<Fixture> => {
	const f = await freshRedisClusterLedger(uniquePrefix('transfer-c'));
	return { ledger: f.ledger, dispose: f.dispose };
};

describeIfRedis('Ledger copy with Redis Cluster', redisClusterReachable)('Ledger copy with Redis Cluster', () => {
	describeBigCopy('PostgreSQL → Redis Cluster', pg, cluster, 3000, 200);
	describeBigCopy('Redis Cluster → PostgreSQL', cluster, pg, 3000, 200);
});

describeIfRedis('Ledger copy merge rule')('Ledger copy merge rule', () => {
	describeMergeRule('PostgreSQL → Redis', pg, redis);
	describeMergeRule('Redis → PostgreSQL', redis, pg);
});
