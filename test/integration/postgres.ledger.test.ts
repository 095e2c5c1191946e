import { describeLedgerContract } from './ledger.contract';
import { freshPostgresLedger } from '../support/db';

describeLedgerContract('PostgreSQL', freshPostgresLedger);
