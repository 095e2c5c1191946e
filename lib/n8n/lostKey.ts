/**
 * A claim whose row vanished is not a takeover. When a write made for a claim finds no row at all
 * (RecordOutcome `missing`, or a refused markPhase whose row is gone), the ledger lost the key
 * (Redis evicted it or restarted without persistence) or someone released it. Saying "another run
 * took over" there sends people to lengthen a lease that was never the problem.
 */
import type { IExecuteFunctions } from 'n8n-workflow';

import { LedgerError } from '../ledger/errors';
import type { Ledger, RowId } from '../ledger/types';

/** The words a Redis item error gives as the cause. */
export const LEDGER_LOST_KEY = 'the ledger lost this key (eviction or a restart without persistence)';

const REDIS_HINT =
	'The ledger no longer has the record this run\'s claim was for, and no other run holds it. On Redis this is what eviction (a maxmemory-policy other than noeviction under a memory limit) or a restart without persistence (no AOF, no RDB save rules) does; fix those settings (see the ledger credential docs). It is also what releasing the key with the Idempotency Ledger node does. A message whose record was lost can be sent again, with a new Idempotency-Key.';

const POSTGRES_HINT =
	'Nothing was overwritten. The record this run\'s claim was for is gone and no other run holds it: someone released the key with the Idempotency Ledger node (its audit says who), or the row was deleted from the ledger table (or the Built-in ledger\'s file). A later run may send it again; check the key with the Idempotency Ledger node (Get).';

/**
 * The item error for a write whose claim's row is gone. `what` names the row, `when` what was
 * done. Redis loses keys (eviction, a restart without persistence); PostgreSQL does not, so there
 * the row was released or deleted.
 */
export function lostKeyError(ctx: IExecuteFunctions, what: string, when: string): LedgerError {
	const redis = ctx.getNodeParameter('backend', 0, 'postgres') === 'redis';
	const cause = redis
		? `${LEDGER_LOST_KEY}, or someone released it`
		: 'the ledger no longer has this key (someone released it with the Idempotency Ledger node, or it was deleted from the ledger table)';
	return new LedgerError(`${what.charAt(0).toUpperCase()}${what.slice(1)}: ${cause}, ${when}`, redis ? REDIS_HINT : POSTGRES_HINT);
}

/**
 * Which of `rows` the ledger holds no live row for now (one `get` per distinct key). Used only
 * to word a refusal (markPhase answers only true or false); never throws: a failed look-up says
 * "not missing", and the refusal keeps its usual wording.
 */
export async function missingRows(ledger: Ledger, rows: RowId[]): Promise<boolean[]> {
	const keys = new Map<string, RowId>();
	for (const r of rows) keys.set(JSON.stringify([r.namespace, r.key]), r);
	const present = new Set<string>();
	try {
		await Promise.all(
			[...keys.values()].map(async ({ namespace, key }) => {
				for (const record of await ledger.get(namespace, key)) present.add(JSON.stringify([namespace, key, record.step]));
			}),
		);
	} catch {
		return rows.map(() => false);
	}
	return rows.map((r) => !present.has(JSON.stringify([r.namespace, r.key, r.step])));
}
