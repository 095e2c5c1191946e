const { stopRedisCluster } = require('./redisCluster');

module.exports = async () => {
	stopRedisCluster(globalThis.__REDIS_CLUSTER__);
	globalThis.__PGBOUNCER__?.stop();
	if (globalThis.__EMBEDDED_PG__) await globalThis.__EMBEDDED_PG__.stop();
};
