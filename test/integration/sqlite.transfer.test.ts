/**
 * The copy's main case (issue 29): a user who outgrows one n8n instance moves the Built-in ledger
 * into PostgreSQL or Redis without losing what was already sent. 20,000 rows in every state
 * (TRANSFER_ROWS=100000 for a real ledger's size, see ledger.transfer.suite.ts), every field
 * checked on arrival, a second run that copies nothing, a stopped copy resumed, and
 * the merge rule (ledger.transfer.suite.ts). node:sqlite: runs on Node 22.13+ (jest.config.js),
 * i.e. in `npm test`'s Node 24 step.
 */
import { describeIfRedis } from '../support/redis';
import { freshSqliteLedger } from '../support/sqlite';
import { describeBigCopy, describeMergeRule, pg, redis } from './ledger.transfer.suite';

const builtin = async () => {
	const f = await freshSqliteLedger();
	return { ledger: f.ledger, dispose: f.dispose };
};

describe('Ledger copy from the Built-in ledger into PostgreSQL', () => {
	describeBigCopy('Built-in → PostgreSQL', builtin, pg);
	describeMergeRule('Built-in → PostgreSQL', builtin, pg);
});

describeIfRedis('Ledger copy from the Built-in ledger into Redis')('Ledger copy from the Built-in ledger into Redis', () => {
	describeBigCopy('Built-in → Redis', builtin, redis);
	describeMergeRule('Built-in → Redis', builtin, redis);
});
