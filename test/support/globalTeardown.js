const { stopRedisCluster } = require('./redisCluster');

module.exports = async () => {
	stopRedisCluster(globalThis.__REDIS_CLUSTER__);
	if (globalThis.__EMBEDDED_PG__) await globalThis.__EMBEDDED_PG__.stop();
};
