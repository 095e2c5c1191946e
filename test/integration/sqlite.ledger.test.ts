/**
 * The Built-in ledger (SQLite, `node:sqlite`) against the shared contract. Needs Node.js 22.13+:
 * jest.config.js leaves the `sqlite.*` tests out on an older Node, and `npm test` runs them on
 * Node 24 in its second step (scripts/test-vm-engine.js).
 */
import { describeLedgerContract } from './ledger.contract';
import { freshSqliteLedger } from '../support/sqlite';

describeLedgerContract('Built-in (SQLite)', freshSqliteLedger);
