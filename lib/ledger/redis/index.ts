export { RedisLedger, closeClient, type RedisLedgerOptions } from './RedisLedger';
export {
	redisLedger,
	closeAllRedisLedgers,
	createRedisClient,
	parseClusterNodes,
	redisOptions,
	type RedisSettings,
} from './connect';
export { toUnavailable as redisToUnavailable } from './errors';
export { assertPrefix as assertRedisPrefix } from './keys';
