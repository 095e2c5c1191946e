/**
 * Idempotency Ledger's "Copy Into Another Ledger" in a real n8n (the newest version of the
 * matrix, the package installed the user's way): a PostgreSQL ledger with finished, stuck and
 * needs-review keys, a checkpoint and counters is copied into a Redis ledger by a workflow whose
 * node holds both credentials (n8n resolves each against the node's display rules), run twice
 * with `n8n execute`: the first run copies everything, the second copies nothing.
 */
import { randomUUID } from 'crypto';

import { Pool } from 'pg';

import { PostgresLedger } from '../../lib/ledger';
import { RedisLedger } from '../../lib/ledger/redis';
import { deletePrefix, newRedisClient, uniquePrefix } from '../support/redis';
import { nodeOutput, startN8n, type N8nInstance, type WorkflowJson } from './support/n8n';
import { ledgerCredentialData, LedgerTables, uniqueLedgerTable } from './support/standIns';

const PKG = 'n8n-nodes-idempotency';
const NS = 'e2e-copy';
const table = uniqueLedgerTable('e2e_copy');
const tables = new LedgerTables(table);
const prefix = uniquePrefix('e2e-copy');
const DAY = 86_400_000;
/** The suite's PostgreSQL, as the ledger credential below points at it. */
const databaseUrl = () => process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test';

describe('e2e: Copy Into Another Ledger in a real n8n', () => {
	let n8n: N8nInstance | undefined;
	const pool = new Pool({ connectionString: databaseUrl(), max: 2 });
	const redis = newRedisClient();

	beforeAll(async () => {
		const source = new PostgresLedger({ pool, table });
		await source.ensureSchema();
		const claimed = await source.claim(
			Array.from({ length: 500 }, (_, i) => ({ namespace: NS, key: `evt_${i}`, step: '', fingerprint: null })),
			{ mode: 'lease', holder: 'run', leaseMs: 3_600_000, ttlMs: DAY },
		);
		const fence = (i: number) => (claimed[i] as { record: { fence: number } }).record.fence;
		await source.record(
			Array.from({ length: 400 }, (_, i) => ({ namespace: NS, key: `evt_${i}`, step: '', status: 'completed' as const, fence: fence(i), result: { i } })),
			{ ttlMs: DAY },
		);
		await source.setCheckpoint(NS, 'cursor', '500', { force: false, updatedBy: 'e2e' });
		await source.addCounts([{ namespace: NS, counts: { sent: 400 } }]);

		n8n = await startN8n({ withPackage: true });
		await n8n.setupOwner();
		await n8n.createApiKey();
	});

	afterAll(async () => {
		if (n8n) console.log(`n8n log: ${n8n.logFile}`);
		await n8n?.stop();
		await deletePrefix(redis, prefix);
		redis.disconnect();
		await pool.end();
		await tables.drop();
	});

	test('PostgreSQL into Redis: everything arrives; a second run copies nothing', async () => {
		const pg = await n8n!.createCredential({ name: 'PostgreSQL ledger', type: 'idempotencyPostgresApi', data: ledgerCredentialData(table) });
		const rd = await n8n!.createCredential({ name: 'Redis ledger', type: 'idempotencyRedisApi', data: { host: '127.0.0.1', port: 6379, prefix, acceptKeyLoss: true } });
		const workflow: WorkflowJson = {
			name: 'e2e ledger copy',
			nodes: [
				{ id: randomUUID(), name: 'Start', type: 'n8n-nodes-base.manualTrigger', typeVersion: 1, position: [0, 0], parameters: {} },
				{
					id: randomUUID(),
					name: 'Copy',
					type: `${PKG}.idempotencyLedger`,
					typeVersion: 1,
					position: [220, 0],
					parameters: { backend: 'postgresIntoRedis', resource: 'ledger', operation: 'copyInto', copyBatchSize: 100 },
					credentials: { idempotencyPostgresApi: { id: pg.id, name: pg.name }, idempotencyRedisApi: { id: rd.id, name: rd.name } },
				},
			],
			connections: { Start: { main: [[{ node: 'Copy', type: 'main', index: 0 }]] } },
			settings: { executionOrder: 'v1' },
		};
		const { id } = await n8n!.createWorkflow(workflow);
		const first = await n8n!.executeCli(id);
		const [copied] = nodeOutput(first.run, 'Copy');
		console.log(`first copy: ${JSON.stringify(copied)}`);
		expect(copied).toMatchObject({ from: 'PostgreSQL', into: 'Redis', rowsCopied: 500, rowsAlreadyPresent: 0, checkpointsCopied: 1, counterDaysCopied: 1 });

		const target = new RedisLedger({ client: newRedisClient(), prefix });
		try {
			const stats = await target.stats(NS);
			expect(stats.byStatus).toMatchObject({ completed: 400, in_progress: 100 });
			expect((await target.getCheckpoint(NS, 'cursor'))?.value).toBe('500');
			const [claim] = await target.claim([{ namespace: NS, key: 'evt_1', step: '', fingerprint: null }], { mode: 'lease', holder: 'x', leaseMs: 1000, ttlMs: DAY });
			expect(claim.kind).toBe('duplicate');
		} finally {
			await target.close();
		}

		const second = await n8n!.executeCli(id);
		const [again] = nodeOutput(second.run, 'Copy');
		expect(again).toMatchObject({ rowsCopied: 0, rowsAlreadyPresent: 500, checkpointsCopied: 0, counterDaysCopied: 0 });
	});
});
