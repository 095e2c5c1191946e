export { SqliteLedger, type SqliteLedgerOptions } from './SqliteLedger';
export { sqliteLedger, closeAllSqliteLedgers, ledgerFilePath, n8nUserFolder, fileSystemOf, DEFAULT_LEDGER_FILE, type SqliteSettings } from './connect';
export { nodeHasSqlite } from './driver';
