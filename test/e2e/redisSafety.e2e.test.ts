/**
 * A Redis that can lose the ledger, in a real n8n (the newest version of the matrix, the package
 * installed the user's way), on throwaway redis-servers started here. Measured on n8n 2.41.1 before
 * the check: with allkeys-lru under maxmemory 5mb a storm of 200 ids made 914 sends, and after a
 * restart without persistence every id was sent again, while activation, the runs and n8n's log
 * said nothing. Now the execution n8n records fails at the gate with the setting and its fix, and
 * a credential that accepts the risk runs with a warning on the node's run.
 */
import { randomUUID } from 'crypto';
import fs from 'fs';

import { startN8n, type N8nExecution, type N8nInstance, type WorkflowJson } from './support/n8n';
import { workflowNode } from './support/standIns';
import { describeIfRedisServer, startRedis, type ThrowawayRedis } from '../support/throwawayRedis';

const PKG = 'n8n-nodes-idempotency';

const node = (name: string, type: string, typeVersion: number, x: number, parameters: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
	workflowNode(name, type, typeVersion, [x, 0], parameters, extra);

/** Webhook → Dedupe Gate (Redis, key body.id) → Mark Step Done. */
function flow(path: string, credentialId: string): WorkflowJson {
	const credentials = { idempotencyRedisApi: { id: credentialId, name: 'Redis ledger' } };
	return {
		name: `e2e redis safety: ${path}`,
		nodes: [
			node('Webhook', 'n8n-nodes-base.webhook', 2, 0, { httpMethod: 'POST', path, responseMode: 'lastNode', options: {} }, { webhookId: randomUUID() }),
			node('Dedupe Gate', `${PKG}.dedupeGate`, 1, 220, { backend: 'redis', keySource: 'field', keyField: 'body.id' }, { credentials }),
			node('Mark Step Done', `${PKG}.markStepDone`, 1, 440, { backend: 'redis' }, { credentials }),
		],
		connections: {
			Webhook: { main: [[{ node: 'Dedupe Gate', type: 'main', index: 0 }]] },
			'Dedupe Gate': { main: [[{ node: 'Mark Step Done', type: 'main', index: 0 }]] },
		},
		settings: { executionOrder: 'v1' },
	};
}

describeIfRedisServer('Redis eviction and persistence in a real n8n')('e2e: a Redis that can lose the ledger (real n8n)', () => {
	let n8n: N8nInstance | undefined;
	let evicting: ThrowawayRedis;
	let noPersistence: ThrowawayRedis;

	beforeAll(async () => {
		[evicting, noPersistence] = await Promise.all([
			startRedis(['--maxmemory', '5mb', '--maxmemory-policy', 'allkeys-lru', '--appendonly', 'yes']),
			startRedis(['--save', '', '--appendonly', 'no']),
		]);
		n8n = await startN8n({ withPackage: true });
		await n8n.setupOwner();
		await n8n.createApiKey();
	});
	afterAll(async () => {
		if (n8n) console.log(`n8n log: ${n8n.logFile}`);
		await n8n?.stop();
		evicting?.stop();
		noPersistence?.stop();
	});

	async function postAndRead(workflowId: string, path: string, body: unknown): Promise<{ status: number; execution: N8nExecution }> {
		const before = (await n8n!.executions(workflowId, { includeData: false })).length;
		const res = await n8n!.post(path, body);
		const [execution] = await n8n!.waitForExecutions(workflowId, before + 1, { includeData: true });
		return { status: res.status, execution };
	}

	test('eviction under maxmemory: the execution fails at the gate, naming maxmemory-policy and the fix; nothing is written', async () => {
		const credential = await n8n!.createCredential({ name: 'Redis ledger', type: 'idempotencyRedisApi', data: { host: '127.0.0.1', port: evicting.port } });
		const id = await n8n!.deploy(flow('evicting', credential.id));
		const { status, execution } = await postAndRead(id, 'evicting', { id: 'evt_1' });
		expect(status).toBeGreaterThanOrEqual(400);
		expect(execution.status).toBe('error');
		const error = execution.data!.resultData.error;
		console.log(`evicting: ${error?.message} | ${error?.description}`);
		expect(execution.data!.resultData.lastNodeExecuted).toBe('Dedupe Gate');
		expect(String(error?.message)).toMatch(/^The ledger Redis can lose keys \(maxmemory-policy\)\. 127\.0\.0\.1:\d+ has maxmemory-policy allkeys-lru with maxmemory 5242880.*CONFIG SET maxmemory-policy noeviction/);
		expect(String(error?.description)).toContain('I Accept That This Redis May Lose Keys');
		expect(evicting.cli('--scan', '--pattern', '{idem:*}:r:*')).toBe('');
	});

	test('no persistence, accepted in the credential: the run goes through, and the gate\'s run carries the warning', async () => {
		const credential = await n8n!.createCredential({
			name: 'Redis ledger (accepts loss)',
			type: 'idempotencyRedisApi',
			data: { host: '127.0.0.1', port: noPersistence.port, acceptKeyLoss: true },
		});
		const id = await n8n!.deploy(flow('accepted', credential.id));
		const { status, execution } = await postAndRead(id, 'accepted', { id: 'evt_2' });
		expect(status).toBe(200);
		expect(execution.status).toBe('success');
		const hints = (execution.data!.resultData.runData['Dedupe Gate'][0] as { hints?: Array<{ message: string }> }).hints ?? [];
		console.log(`accepted: ${JSON.stringify(hints)}`);
		expect(hints.map((h) => h.message)).toEqual([expect.stringMatching(/^The ledger Redis can lose keys, and the credential accepts that .*appendonly no and no save rules/)]);
		// And n8n's log says it, for whoever reads the log rather than the run.
		expect(fs.readFileSync(n8n!.logFile, 'utf8')).toContain('n8n-nodes-idempotency, node "Dedupe Gate": The ledger Redis can lose keys, and the credential accepts that');
	});
});
