export * from './types';
export * from './errors';
export * from './validate';
export * from './fingerprint';
export * from './duration';
export { PostgresLedger } from './postgres/PostgresLedger';
export { postgresLedger, closeAllPostgresLedgers, type PostgresSettings, type SslMode } from './postgres/connect';
export { RedisLedger, redisLedger, closeAllRedisLedgers, type RedisSettings } from './redis';
export { SqliteLedger, sqliteLedger, closeAllSqliteLedgers, ledgerFilePath, n8nUserFolder, DEFAULT_LEDGER_FILE, nodeHasSqlite, type SqliteSettings } from './sqlite';
