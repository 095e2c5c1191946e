/** Ledger.peek on the Built-in ledger (node:sqlite: runs on Node 22.13+, see jest.config.js). */
import { freshSqliteLedger } from '../support/sqlite';
import { peekSuite } from './ledger.peek.suite';

describe('Ledger.peek on Built-in (SQLite)', () => peekSuite(() => freshSqliteLedger()));
