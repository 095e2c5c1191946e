import type { LedgerRecord } from '../../lib/ledger/types';
import { cacheFacts, CACHE_STEP } from '../../nodes/PromptCache/common';
import { TEST_NAMESPACE_PREFIX } from '../../lib/n8n/testRuns';

// The facts a Prompt Cache item carries under `idempotency`: the row's facts without its stored
// result, version and external id (the item carries the response itself), then the prompt hash,
// then what the operation adds. Pinned field by field, in order, as flows and docs read them.
const record: LedgerRecord = {
	namespace: 'workflow:wf1',
	key: 'a'.repeat(64),
	step: CACHE_STEP,
	status: 'completed',
	leaseHolder: null,
	leaseExpiresAt: null,
	leaseRemainingMs: null,
	fence: 7,
	fingerprint: null,
	version: 'v2',
	externalId: 'ext-1',
	result: { v: 1, response: { text: 'hi' }, usage: null, tokens: 3, model: 'm', storedAt: '2026-11-27T10:00:00.000Z' },
	attempts: 1,
	previousStatus: null,
	firstSeenAt: new Date('2026-11-27T10:00:00.000Z'),
	updatedAt: new Date('2026-11-27T10:00:01.000Z'),
	expiresAt: new Date('2026-12-27T10:00:00.000Z'),
	phase: null,
};

describe('cacheFacts', () => {
	test("a hit: the row's facts but its result, version and external id, then the prompt hash, then the hit's own", () => {
		const facts = cacheFacts('hit', record.namespace, record.key, record, { model: 'm', tokensSaved: 3 });
		expect(Object.entries(facts)).toEqual([
			['outcome', 'hit'],
			['namespace', 'workflow:wf1'],
			['key', record.key],
			['step', CACHE_STEP],
			['status', 'completed'],
			['firstSeenAt', '2026-11-27T10:00:00.000Z'],
			['updatedAt', '2026-11-27T10:00:01.000Z'],
			['expiresAt', '2026-12-27T10:00:00.000Z'],
			['attempts', 1],
			['leaseHolder', null],
			['leaseExpiresAt', null],
			['fence', 7],
			['previousStatus', null],
			['promptHash', record.key],
			['model', 'm'],
			['tokensSaved', 3],
		]);
	});

	test('without a row every row fact is null; an editor test run says so before the prompt hash', () => {
		const namespace = `${TEST_NAMESPACE_PREFIX}workflow:wf1`;
		const facts = cacheFacts('unverified', namespace, 'h', null, { computing: false });
		expect(Object.keys(facts)).toEqual([
			'outcome', 'namespace', 'key', 'step', 'status', 'firstSeenAt', 'updatedAt', 'expiresAt', 'attempts', 'leaseHolder',
			'leaseExpiresAt', 'fence', 'previousStatus', 'testRun', 'promptHash', 'computing',
		]);
		expect(facts).toMatchObject({ outcome: 'unverified', status: null, firstSeenAt: null, fence: null, testRun: true, promptHash: 'h', computing: false });
	});

	test('what the operation adds wins over a row fact of the same name', () => {
		expect(cacheFacts('miss', 'ns', 'h', record, { status: 'overridden' }).status).toBe('overridden');
	});
});
