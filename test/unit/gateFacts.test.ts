import type { IDataObject } from 'n8n-workflow';

import { gateFactsOf, inProgressReason, LEDGER_DETAILS } from '../../lib/n8n/facts';
import { factsKey } from '../../lib/n8n/lineage';
import type { LedgerRecord } from '../../lib/ledger/types';

const at = (iso: string) => new Date(iso);
const record: LedgerRecord = {
	namespace: 'workflow:wf1',
	key: 'evt_1',
	step: '',
	status: 'completed',
	firstSeenAt: at('2026-11-22T09:14:03.120Z'),
	updatedAt: at('2026-11-22T09:14:03.480Z'),
	expiresAt: at('2026-12-22T09:14:03.480Z'),
	attempts: 1,
	leaseHolder: null,
	leaseExpiresAt: null,
	leaseRemainingMs: null,
	fence: 7,
	fingerprint: null,
	phase: null,
	previousStatus: null,
	externalId: 'inv_1',
	result: { ts: '1' },
	version: null,
};

describe('a Dedupe Gate item\'s facts', () => {
	test('on top only what a flow builder reads; the ledger details in one nested object', () => {
		const facts = gateFactsOf('duplicate', 'workflow:wf1', 'evt_1', '', record);
		expect(Object.keys(facts)).toEqual(['outcome', 'key', 'status', 'firstSeenAt', 'externalId', 'result', LEDGER_DETAILS]);
		expect(facts).toEqual({
			outcome: 'duplicate',
			key: 'evt_1',
			status: 'completed',
			firstSeenAt: '2026-11-22T09:14:03.120Z',
			externalId: 'inv_1',
			result: { ts: '1' },
			_ledger: {
				namespace: 'workflow:wf1',
				step: '',
				fence: 7,
				attempts: 1,
				previousStatus: null,
				updatedAt: '2026-11-22T09:14:03.480Z',
				expiresAt: '2026-12-22T09:14:03.480Z',
				leaseHolder: null,
				leaseExpiresAt: null,
				version: null,
			},
		});
	});

	test('doneWhen or reason and testRun sit on top, before the details', () => {
		const fresh = gateFactsOf('new', 'editor-test:workflow:wf1', 'evt_1', '', record, { doneWhen: 'already' });
		expect(Object.keys(fresh)).toEqual(['outcome', 'key', 'status', 'firstSeenAt', 'externalId', 'result', 'doneWhen', 'testRun', LEDGER_DETAILS]);
		expect(fresh).toMatchObject({ doneWhen: 'already', testRun: true, _ledger: { namespace: 'editor-test:workflow:wf1' } });
		const unverified = gateFactsOf('unverified', 'workflow:wf1', 'evt_1', 'invoice', null);
		expect(unverified).toMatchObject({ outcome: 'unverified', key: 'evt_1', status: null, _ledger: { step: 'invoice', fence: null } });
	});

	test('an In Progress item says who holds its key and until when, each row by its own lease, also after a row that read the same', () => {
		const held: LedgerRecord = {
			...record,
			status: 'in_progress',
			leaseHolder: 'execution:7',
			leaseExpiresAt: at('2026-11-22T09:14:33.480Z'),
			leaseRemainingMs: 25_000,
		};
		const by7 = 'Let through to execution 7 at 2026-11-22 09:14:03 and not marked done yet.';
		const heldSays = `${by7} If that run stops, the key is free again within 25 seconds (by 2026-11-22 09:14:33, UTC).`;
		// Each case right after the held row itself: a row that differs in one fact only reads its own.
		const cases: Array<[LedgerRecord, string, string, string]> = [
			[{ ...held, key: 'evt_2' }, 'execution:9', 'UTC', heldSays],
			[{ ...held, leaseRemainingMs: 1_000 }, 'execution:9', 'UTC', `${by7} If that run stops, the key is free again within 1 second (by 2026-11-22 09:14:33, UTC).`],
			[{ ...held, leaseHolder: 'execution:8' }, 'execution:9', 'UTC', heldSays.replace('execution 7', 'execution 8')],
			[{ ...held, leaseExpiresAt: at('2026-11-22T09:15:03.480Z') }, 'execution:9', 'UTC', heldSays.replace('09:14:33', '09:15:03')],
			[{ ...held, updatedAt: at('2026-11-22T09:14:04.480Z') }, 'execution:9', 'UTC', heldSays.replace('09:14:03', '09:14:04')],
			[held, 'execution:9', 'Europe/Berlin', `Let through to execution 7 at 2026-11-22 10:14:03 and not marked done yet. If that run stops, the key is free again within 25 seconds (by 2026-11-22 10:14:33, Europe/Berlin).`],
			[held, 'execution:7', 'UTC', 'This execution let the same key through earlier (for example in a loop) and has not marked it done yet.'],
		];
		const reasons = cases.flatMap(([row, own, zone]) => [inProgressReason(held, 'execution:9', 'UTC'), inProgressReason(row, own, zone)]);
		expect(reasons).toEqual(cases.flatMap(([, , , says]) => [heldSays, says]));
		const facts = gateFactsOf('in_progress', 'workflow:wf1', 'evt_1', '', held, { reason: reasons[0] });
		expect(Object.keys(facts)).toEqual(['outcome', 'key', 'status', 'firstSeenAt', 'externalId', 'result', 'reason', LEDGER_DETAILS]);
	});

	test('items of one claim share one details object; a row that differs in any detail, or in namespace or step, gets its own', () => {
		const details = (row: LedgerRecord, namespace = 'workflow:wf1', step = '') => gateFactsOf('new', namespace, row.key, step, row)[LEDGER_DETAILS] as IDataObject;
		const first = details(record);
		// Another key of the same claim: its record shares the claim's Dates and facts.
		expect(details({ ...record, key: 'evt_2', fingerprint: 'f2' })).toBe(first);
		const later = at('2026-11-22T09:14:04.480Z');
		// Each case right after two keys of the shared row: the second shares the first's details.
		const cases: Array<[LedgerRecord, string, string, object]> = [
			[{ ...record, fence: 8 }, 'workflow:wf1', '', { fence: 8 }],
			[{ ...record, attempts: 2 }, 'workflow:wf1', '', { attempts: 2 }],
			[{ ...record, previousStatus: 'failed_retryable' }, 'workflow:wf1', '', { previousStatus: 'failed_retryable' }],
			[{ ...record, updatedAt: later }, 'workflow:wf1', '', { updatedAt: later.toISOString() }],
			[{ ...record, expiresAt: later }, 'workflow:wf1', '', { expiresAt: later.toISOString() }],
			[{ ...record, leaseHolder: 'execution:7' }, 'workflow:wf1', '', { leaseHolder: 'execution:7' }],
			[{ ...record, leaseExpiresAt: later }, 'workflow:wf1', '', { leaseExpiresAt: later.toISOString() }],
			[{ ...record, version: '3' }, 'workflow:wf1', '', { version: '3' }],
			[record, 'workflow:wf2', '', { namespace: 'workflow:wf2' }],
			[record, 'workflow:wf1', 'invoice', { step: 'invoice' }],
		];
		for (const [row, namespace, step, differs] of cases) {
			const shared = details(record);
			expect(details({ ...record, key: 'evt_3' })).toBe(shared);
			const own = details(row, namespace, step);
			expect(own).not.toBe(shared);
			expect(own).toEqual({ ...first, ...differs });
		}
		// The same instant in another Date is only a miss: equal details, their own object.
		const sameInstant: LedgerRecord = { ...record, updatedAt: new Date(record.updatedAt.getTime()) };
		const copy = details(sameInstant);
		expect(copy).toEqual(first);
		expect(copy).not.toBe(first);
		// A fact not among the details (status, result) does not split them.
		expect(details({ ...sameInstant, status: 'in_progress', result: null })).toBe(copy);
	});

	test('the nodes after the gate find the gate\'s claim in the nested details, and the flat facts of the other nodes as before', () => {
		expect(factsKey(gateFactsOf('new', 'workflow:wf1', 'evt_1', '', record))).toEqual({
			namespace: 'workflow:wf1',
			key: 'evt_1',
			claim: { step: '', fence: 7 },
		});
		// Through a JSON round trip (queue mode, a saved execution, a Code node's copy).
		expect(factsKey(JSON.parse(JSON.stringify(gateFactsOf('new', 'workflow:wf1', 'evt_1', 'invoice', record))))).toEqual({
			namespace: 'workflow:wf1',
			key: 'evt_1',
			claim: { step: 'invoice', fence: 7 },
		});
		// A gate item without a claim (unverified) still names its key.
		expect(factsKey(gateFactsOf('unverified', 'workflow:wf1', 'evt_1', '', null))).toEqual({ namespace: 'workflow:wf1', key: 'evt_1' });
		// Start Step, Guarded Send, Mark Step Done: flat.
		expect(factsKey({ namespace: 'workflow:wf1', key: 'evt_1', step: 'crm', fence: 3, region: 'Start' })).toEqual({
			namespace: 'workflow:wf1',
			key: 'evt_1',
			claim: { step: 'crm', fence: 3 },
			region: { start: 'Start', step: 'crm' },
		});
		// A Prompt Cache's facts name a prompt hash, not a unit of work.
		expect(factsKey({ key: 'abc', [LEDGER_DETAILS]: { namespace: 'workflow:wf1', step: 'prompt-cache', fence: null } })).toBeNull();
		// The key stays the builder's, on top: details alone name no unit.
		expect(factsKey({ [LEDGER_DETAILS]: { namespace: 'workflow:wf1', key: 'evt_1', step: '', fence: 7 } })).toBeNull();
	});
});
