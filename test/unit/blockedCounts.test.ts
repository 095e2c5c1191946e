/**
 * The day counter of duplicates blocked (lib/n8n/countBuffer.ts deferBlocked): Dedupe Gate, Guarded
 * Send and Start Step hand it their claims' outcomes; only deliveries turned away as done already
 * (or as a repeat within the batch) count, per namespace. Keys another run holds do not: the node
 * may ask for them again.
 */
import type { IExecuteFunctions } from 'n8n-workflow';

import type { ClaimOutcome, CountIncrement, Ledger, LedgerRecord } from '../../lib/ledger/types';
import { DUPLICATES_BLOCKED, deferBlocked, flushCounts } from '../../lib/n8n/countBuffer';

test('per namespace, duplicates and batch repeats only; nothing written when nothing was turned away', async () => {
	const written: CountIncrement[][] = [];
	const ledger = { addCounts: async (increments: CountIncrement[]) => void written.push(increments) } as unknown as Ledger;
	const record = {} as LedgerRecord;
	const rows = ['a', 'a', 'b', 'b', 'a', 'c'].map((namespace, i) => ({ namespace, key: `k${i}`, step: '' }));
	const outcomes: ClaimOutcome[] = [
		{ kind: 'duplicate', record },
		{ kind: 'batch_duplicate', firstIndex: 0 },
		{ kind: 'duplicate', record },
		{ kind: 'in_progress', record },
		{ kind: 'claimed', record, previousStatus: null, previousPhase: null },
		{ kind: 'mismatch', record },
	];
	const ctx = {} as IExecuteFunctions;
	deferBlocked(ctx, ledger, rows, outcomes);
	deferBlocked(ctx, ledger, rows.slice(4), outcomes.slice(4));
	await flushCounts(ledger);
	expect(written).toEqual([[{ namespace: 'a', counts: { [DUPLICATES_BLOCKED]: 2 } }, { namespace: 'b', counts: { [DUPLICATES_BLOCKED]: 1 } }]]);
});
