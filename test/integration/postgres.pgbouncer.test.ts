/**
 * The PostgreSQL ledger behind PgBouncer in transaction mode, as docs/credentials.md promises it:
 * the whole contract, and Prompt Cache Lookup's one-row read, through a PgBouncer whose pool (2
 * server connections) is smaller than the clients using it, so that server sessions change hands
 * between transactions. A statement that leaves state in a session (a named prepared statement)
 * fails here: Lookup's did, on about half of 200 calls.
 */
import type { IDataObject } from 'n8n-workflow';

import { closeAllPostgresLedgers } from '../../lib/ledger/postgres/connect';
import { PromptCache } from '../../nodes/PromptCache/PromptCache.node';
import { promptCacheFlow, PROMPT_CACHE_TYPE } from '../engine/promptCacheFlow';
import { bouncerUrl, describeIfPgBouncer, dropLedgerTables, freshPostgresLedger, newPool, settingsFromUrl, uniqueTable } from '../support/db';
import { runWorkflow } from '../support/engine';
import { FAKE_LLM_TYPE, FakeLlmNode } from './fixtures/prompt-llm-node';
import { describeLedgerContract } from './ledger.contract';

const describeBouncer = describeIfPgBouncer('the PgBouncer suite');

describeBouncer('PostgreSQL through PgBouncer (transaction mode, pool of 2)', () => {
	describeLedgerContract('PostgreSQL through PgBouncer', () => freshPostgresLedger(undefined, bouncerUrl()));

	describe('Prompt Cache Lookup', () => {
		const table = uniqueTable('pc_bouncer');
		const nodeTypes = { [PROMPT_CACHE_TYPE]: new PromptCache(), [FAKE_LLM_TYPE]: new FakeLlmNode() };
		afterAll(async () => {
			await closeAllPostgresLedgers();
			const pool = newPool(1);
			await dropLedgerTables(pool, table);
			await pool.end();
		});

		test('200 one-prompt lookups, 8 at a time, through the credential\'s own pool: all Hits, no error', async () => {
			const credentials = { idempotencyPostgresApi: { ...settingsFromUrl(table, 'public', bouncerUrl()), poolSize: 8 } };
			const flow = () => promptCacheFlow({ prompts: [{ prompt: 'Through PgBouncer, once.' }] });
			const run = () => runWorkflow(flow(), { credentials: credentials as never, nodeTypes, workflowId: 'wf-pgbouncer' });
			const first = await run();
			expect(first.error).toBeUndefined();
			expect(first.items('Store')).toHaveLength(1);

			const outcomes: string[] = [];
			const errors: string[] = [];
			let next = 0;
			await Promise.all(
				Array.from({ length: 8 }, async () => {
					while (next < 200) {
						next++;
						const r = await run();
						if (r.error) errors.push(String((r.error as Error).message ?? r.error));
						const hit = r.outputs('Lookup')[0]?.[0]?.json.idempotency as IDataObject | undefined;
						outcomes.push(String(hit?.outcome ?? 'no hit'));
					}
				}),
			);
			expect(errors).toEqual([]);
			expect(outcomes).toEqual(Array(200).fill('hit'));
		});
	});
});
