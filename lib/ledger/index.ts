export * from './types';
export * from './errors';
export * from './validate';
export * from './fingerprint';
export * from './duration';
export { PostgresLedger } from './postgres/PostgresLedger';
export { postgresLedger, closeAllPostgresLedgers, type PostgresSettings, type SslMode } from './postgres/connect';
export { RedisLedger, redisLedger, closeAllRedisLedgers, type RedisSettings } from './redis';
