export { RedisLedger, closeClient, type RedisLedgerOptions } from './RedisLedger';
export {
	redisLedger,
	closeAllRedisLedgers,
	createRedisClient,
	parseClusterNodes,
	redisOptions,
	redisSafety,
	type RedisSettings,
} from './connect';
export { toUnavailable as redisToUnavailable } from './errors';
export { assertPrefix as assertRedisPrefix } from './keys';
export { checkRedisSafety, describeRisks, type RedisRisk, type RedisSafety } from './safety';
