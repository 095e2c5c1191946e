/**
 * Runs the Idempotency Ledger node through n8n-core's real engine (test/support/engine.ts):
 * Start → Items (the input items) → Ledger node, against the real PostgreSQL.
 */
import type { INode, INodeExecutionData, INodeParameters } from 'n8n-workflow';

import { PostgresLedger, RedisLedger, type Ledger } from '../../lib/ledger';
import { IdempotencyLedger } from '../../nodes/IdempotencyLedger/IdempotencyLedger.node';
import { dropLedgerTables, newPool, settingsFromUrl, uniqueTable } from '../support/db';
import { runWorkflow, type EngineRunResult } from '../support/engine';
import { newRedisClient } from '../support/redis';

export const LEDGER_TYPE = 'n8n-nodes-idempotency.idempotencyLedger';
export const NODE = 'Ledger';

export interface LedgerFixture {
	table: string;
	/** The same table as the node uses, through its own pool. */
	ledger: PostgresLedger;
	pool: ReturnType<typeof newPool>;
	credentials: { idempotencyPostgresApi: ReturnType<typeof settingsFromUrl> };
	run(items: object[], parameters: INodeParameters, options?: RunOptions): Promise<EngineRunResult>;
	/** Output items of the ledger node (output 0 of its first run). */
	out(result: EngineRunResult): INodeExecutionData[];
	/** `SELECT count(*) AS n ...` with {t}, {audit} and {checkpoints} standing for this fixture's tables. */
	count(sql: string, values?: unknown[]): Promise<number>;
	dispose(): Promise<void>;
}

export interface RunOptions {
	continueOnFail?: boolean;
	workflowId?: string;
	executionId?: string;
	credentials?: object;
}

export async function ledgerFixture(prefix = 'opled'): Promise<LedgerFixture> {
	const table = uniqueTable(prefix);
	const pool = newPool(4);
	const ledger = new PostgresLedger({ pool, table });
	await ledger.ensureSchema();
	const credentials = { idempotencyPostgresApi: settingsFromUrl(table) };
	return {
		table,
		ledger,
		pool,
		credentials,
		run(items, parameters, options = {}) {
			const extra: Partial<INode> = options.continueOnFail ? { onError: 'continueRegularOutput' } : {};
			return runWorkflow(
				{
					nodes: [
						{ id: '1', name: 'Start', type: 'test.manualTrigger', typeVersion: 1, position: [0, 0], parameters: {} },
						{ id: '2', name: 'Items', type: 'test.items', typeVersion: 1, position: [200, 0], parameters: { items: JSON.stringify(items) } },
						{ id: '3', name: NODE, type: LEDGER_TYPE, typeVersion: 1, position: [400, 0], parameters, ...extra },
					] as INode[],
					connections: {
						Start: { main: [[{ node: 'Items', type: 'main', index: 0 }]] },
						Items: { main: [[{ node: NODE, type: 'main', index: 0 }]] },
					},
				},
				{
					credentials: (options.credentials ?? credentials) as never,
					nodeTypes: { [LEDGER_TYPE]: new IdempotencyLedger() },
					workflowId: options.workflowId ?? 'wf-operator',
					executionId: options.executionId,
				},
			);
		},
		out: (result) => result.outputs(NODE)[0] ?? [],
		async count(sql, values = []) {
			const text = sql
				.replace(/\{audit\}/g, `"public"."${table}_audit"`)
				.replace(/\{checkpoints\}/g, `"public"."${table}_checkpoints"`)
				.replace(/\{t\}/g, `"public"."${table}"`);
			const { rows } = await pool.query(text, values);
			return Number(rows[0].n);
		},
		async dispose() {
			await dropLedgerTables(pool, table);
			await pool.end();
		},
	};
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A stuck row: claimed with a lease that has already lapsed. */
export async function stuckRow(ledger: Ledger, namespace: string, key: string, step = '') {
	await ledger.claim([{ namespace, key, step, fingerprint: null }], { mode: 'lease', holder: 'execution:dead', leaseMs: 1, ttlMs: 86_400_000 });
	await sleep(15);
}

export async function recordRow(
	ledger: Ledger,
	namespace: string,
	key: string,
	status: 'completed' | 'failed_retryable' | 'needs_review',
	step = '',
	extra: { externalId?: string; result?: unknown } = {},
) {
	await ledger.record([{ namespace, key, step, status, ...extra }], { ttlMs: 86_400_000 });
}

/**
 * The source ledger of the Copy Into Another Ledger tests, in `namespace`: a completed row with its
 * result, one for review, a stuck one, a checkpoint and a day of counts.
 */
export async function seedCopySource(ledger: Ledger, namespace: string) {
	await recordRow(ledger, namespace, 'evt_done', 'completed', '', { externalId: 'msg_1', result: { ok: true } });
	await recordRow(ledger, namespace, 'evt_review', 'needs_review');
	await stuckRow(ledger, namespace, 'evt_stuck');
	await ledger.setCheckpoint(namespace, 'cursor', '42', { force: false, updatedBy: 'sync' });
	await ledger.addCounts([{ namespace, counts: { sent: 3 } }]);
}

/** What the first copy of that source says it copied, besides its `from` and `into`. */
export const FIRST_COPY = { rowsCopied: 3, rowsAlreadyPresent: 0, checkpointsCopied: 1, counterDaysCopied: 1 } as const;

/** What a second copy of it says: nothing copied, every row already there. */
export const SECOND_COPY = { rowsCopied: 0, rowsAlreadyPresent: 3, checkpointsCopied: 0, counterDaysCopied: 0 } as const;

/** Expects that source's completed row (with its result) and its checkpoint under `prefix` on the suite's Redis. */
export async function expectCopiedIntoRedis(prefix: string, namespace: string) {
	const target = new RedisLedger({ client: newRedisClient(), prefix });
	try {
		expect((await target.get(namespace, 'evt_done'))[0]).toMatchObject({ status: 'completed', externalId: 'msg_1', result: { ok: true } });
		expect((await target.getCheckpoint(namespace, 'cursor'))?.value).toBe('42');
	} finally {
		await target.close();
	}
}

export async function liveRow(ledger: Ledger, namespace: string, key: string, step = '') {
	await ledger.claim([{ namespace, key, step, fingerprint: null }], { mode: 'lease', holder: 'execution:alive', leaseMs: 600_000, ttlMs: 86_400_000 });
}
