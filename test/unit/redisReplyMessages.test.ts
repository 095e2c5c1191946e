import { ReplyError } from 'ioredis';

import { LedgerUnavailableError } from '../../lib/ledger/errors';
import { toUnavailable } from '../../lib/ledger/redis/errors';

/** Redis replies no test here can make a real server give on cue (a server still loading its data). */
describe('Redis replies during a restart, mapped to what a person can act on', () => {
	test('LOADING: Redis is loading its data, retry in a moment', () => {
		const error = toUnavailable(new ReplyError('LOADING Redis is loading the dataset in memory')) as LedgerUnavailableError;
		expect(error).toBeInstanceOf(LedgerUnavailableError);
		expect(error.message).toBe('The ledger Redis is loading its data into memory (it has just started or restarted)');
		expect(error.hint).toMatch(/^Retry the execution in a moment, once Redis has finished loading/);
		expect(`${error.message} ${error.hint}`).not.toMatch(/dataset in memory|firewall/);
	});
});
