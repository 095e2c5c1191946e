/**
 * Dedupe Gate with every setting at its default ("Mark Keys Done: When the Execution Succeeds")
 * in n8n's queue mode: a main instance takes the webhooks, two `n8n worker` processes run the
 * executions, on the local Redis. The gate marks its keys done from the worker that ran the
 * execution, when it ends. Side effects are counted at a real local HTTP server:
 * - an event delivered again after its execution finished: one call, the repeat is Duplicate;
 * - a storm of 20 concurrent deliveries of one event: one call;
 * - an event whose first execution failed after the gate: the next delivery goes through at once
 *   (no lease to wait for) and the call succeeds, once;
 * - a storm through a guarded region (Start Step → HTTP Request → Mark Step Done): 30 events × 4
 *   concurrent copies, then each again: one call per event.
 */
import { randomUUID } from 'crypto';
import * as http from 'http';
import type { AddressInfo } from 'net';

import { nodeOutput, queueEnv, startN8n, type N8nExecution, type N8nInstance, type WorkflowJson } from './support/n8n';
import { node, webhook } from './support/guardedWorkflows';
import { ledgerCredentialData, LedgerTables, uniqueLedgerTable } from './support/standIns';

const PKG = 'n8n-nodes-idempotency';
const table = uniqueLedgerTable('e2e_queue');
const ledger = new LedgerTables(table);

/** A destination that counts calls per event id and fails the first call of ids listed in `failFirst`. */
async function countingServer(failFirst: Set<string>) {
	const calls = new Map<string, number>();
	const server = http.createServer((req, res) => {
		let body = '';
		req.on('data', (c) => (body += c));
		req.on('end', () => {
			const id = String((JSON.parse(body || '{}') as { id?: unknown }).id);
			const n = (calls.get(id) ?? 0) + 1;
			calls.set(id, n);
			const fail = n === 1 && failFirst.has(id);
			res.writeHead(fail ? 500 : 200, { 'content-type': 'application/json' });
			res.end(JSON.stringify(fail ? { error: 'first call fails' } : { ok: true, id }));
		});
	});
	await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
	return {
		url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/calls`,
		calls: (id: string) => calls.get(id) ?? 0,
		close: () => new Promise<void>((resolve) => server.close(() => resolve())),
	};
}

/** Webhook (answers at once) → Dedupe Gate (defaults, key from the body) → New → Call API. */
function flow(credentialId: string, path: string, url: string): WorkflowJson {
	return {
		name: 'e2e queue mode: the gate with its defaults',
		nodes: [
			webhook(path, 'onReceived'),
			node('Dedupe Gate', `${PKG}.dedupeGate`, { keyExpression: '={{ $json.body.id }}' }, {
				credentials: { idempotencyPostgresApi: { id: credentialId, name: 'Idempotency Ledger' } },
			}),
			node('Call API', 'n8n-nodes-base.httpRequest', {
				method: 'POST',
				url,
				sendBody: true,
				specifyBody: 'json',
				jsonBody: '={{ JSON.stringify({ id: $json.body.id }) }}',
				options: {},
			}, { typeVersion: 4.2 }),
		],
		connections: {
			Webhook: { main: [[{ node: 'Dedupe Gate', type: 'main', index: 0 }]] },
			'Dedupe Gate': { main: [[{ node: 'Call API', type: 'main', index: 0 }]] },
		},
		settings: { executionOrder: 'v1' },
	};
}

/** Webhook (answers at once) → Dedupe Gate (defaults) → Start Step → Call API → Mark Step Done: a guarded region. */
function regionFlow(credentialId: string, path: string, url: string): WorkflowJson {
	const ledgerRef = { credentials: { idempotencyPostgresApi: { id: credentialId, name: 'Idempotency Ledger' } } };
	return {
		name: 'e2e queue mode: a guarded region',
		nodes: [
			webhook(path, 'onReceived'),
			node('Dedupe Gate', `${PKG}.dedupeGate`, { keyExpression: '={{ $json.body.id }}' }, ledgerRef),
			node('Start Step', `${PKG}.startStep`, { step: 'call api' }, ledgerRef),
			node('Call API', 'n8n-nodes-base.httpRequest', {
				method: 'POST',
				url,
				sendBody: true,
				specifyBody: 'json',
				jsonBody: "={{ JSON.stringify({ id: $('Webhook').item.json.body.id }) }}",
				options: {},
			}, { typeVersion: 4.2 }),
			node('Mark Step Done', `${PKG}.markStepDone`, { status: 'completed' }, ledgerRef),
		],
		connections: {
			Webhook: { main: [[{ node: 'Dedupe Gate', type: 'main', index: 0 }]] },
			'Dedupe Gate': { main: [[{ node: 'Start Step', type: 'main', index: 0 }]] },
			'Start Step': { main: [[{ node: 'Call API', type: 'main', index: 0 }]] },
			'Call API': { main: [[{ node: 'Mark Step Done', type: 'main', index: 0 }]] },
		},
		settings: { executionOrder: 'v1' },
	};
}

const outcomeOf = (execution: N8nExecution): string => {
	const names = ['New', 'Duplicate', 'In Progress'];
	return names.find((_, output) => nodeOutput(execution, 'Dedupe Gate', output).length > 0) ?? 'none';
};

describe('e2e: Dedupe Gate with its defaults in queue mode (a main instance and two workers)', () => {
	let n8n: N8nInstance | undefined;
	let api: Awaited<ReturnType<typeof countingServer>>;
	let workflowId = '';
	let regionWorkflowId = '';
	const path = `queue-${randomUUID().slice(0, 8)}`;
	const regionPath = `queue-region-${randomUUID().slice(0, 8)}`;
	let seen = 0;

	beforeAll(async () => {
		api = await countingServer(new Set(['evt_fails_once']));
		n8n = await startN8n({ withPackage: true, env: queueEnv() });
		await Promise.all([n8n.startWorker(), n8n.startWorker()]);
		await n8n.setupOwner();
		await n8n.createApiKey();
		const credential = await n8n.createCredential({ name: 'Idempotency Ledger', type: 'idempotencyPostgresApi', data: ledgerCredentialData(table) });
		workflowId = await n8n.deploy(flow(credential.id, path, api.url));
		regionWorkflowId = await n8n.deploy(regionFlow(credential.id, regionPath, api.url));
	});

	afterAll(async () => {
		if (n8n) console.log(`n8n log: ${n8n.logFile}`);
		await n8n?.stop();
		await api?.close();
		await ledger.drop();
	});

	/** Delivers the events (all at once), then waits until their executions ended; newest first. */
	async function deliver(ids: string[]): Promise<N8nExecution[]> {
		const answers = await Promise.all(ids.map((id) => n8n!.post(path, { id })));
		expect(answers.map((a) => a.status)).toEqual(ids.map(() => 200));
		seen += ids.length;
		const ended = await n8n!.waitForExecutions(workflowId, seen, { includeData: true, timeoutMs: 120_000 });
		return ended.slice(0, ids.length);
	}

	test('a repeat after the execution finished is Duplicate: one call', async () => {
		const [first] = await deliver(['evt_once']);
		expect(outcomeOf(first)).toBe('New');
		const [again] = await deliver(['evt_once']);
		expect(outcomeOf(again)).toBe('Duplicate');
		expect(api.calls('evt_once')).toBe(1);
		expect((await ledger.rows('key = $1', ['evt_once'])).map((r) => r.status)).toEqual(['completed']);
	});

	test('a storm of 20 concurrent deliveries of one event: one call, and a later repeat is Duplicate', async () => {
		const storm = await deliver(Array.from({ length: 20 }, () => 'evt_storm'));
		const outcomes = storm.map(outcomeOf);
		expect(outcomes.filter((o) => o === 'New')).toHaveLength(1);
		expect(outcomes.filter((o) => o === 'none')).toEqual([]);
		expect(api.calls('evt_storm')).toBe(1);
		const [later] = await deliver(['evt_storm']);
		expect(outcomeOf(later)).toBe('Duplicate');
		expect(api.calls('evt_storm')).toBe(1);
	});

	test('an execution that failed after the gate frees the key at once: the next delivery calls again and succeeds', async () => {
		const [failed] = await deliver(['evt_fails_once']);
		expect({ outcome: outcomeOf(failed), status: failed.status }).toEqual({ outcome: 'New', status: 'error' });
		expect((await ledger.rows('key = $1', ['evt_fails_once'])).map((r) => r.status)).toEqual(['failed_retryable']);
		const [retry] = await deliver(['evt_fails_once']);
		expect({ outcome: outcomeOf(retry), status: retry.status }).toEqual({ outcome: 'New', status: 'success' });
		const [after] = await deliver(['evt_fails_once']);
		expect(outcomeOf(after)).toBe('Duplicate');
		expect(api.calls('evt_fails_once')).toBe(2);
	});

	test('a storm through a guarded region: 30 events × 4 concurrent copies, then each again: one call per event', async () => {
		const ids = Array.from({ length: 30 }, (_, i) => `evt_region_${i}`);
		const storm = ids.flatMap((id) => [id, id, id, id]);
		const answers = await Promise.all(storm.map((id) => n8n!.post(regionPath, { id })));
		expect(answers.map((a) => a.status)).toEqual(storm.map(() => 200));
		await n8n!.waitForExecutions(regionWorkflowId, storm.length, { timeoutMs: 180_000 });
		await Promise.all(ids.map((id) => n8n!.post(regionPath, { id })));
		await n8n!.waitForExecutions(regionWorkflowId, storm.length + ids.length, { timeoutMs: 180_000 });
		const calls = ids.map((id) => api.calls(id));
		expect(calls.filter((c) => c !== 1)).toEqual([]);
		const steps = await ledger.rows("step = 'call api' AND key LIKE 'evt_region_%'");
		expect(steps.map((r) => r.status).filter((s) => s !== 'completed')).toEqual([]);
		expect(steps).toHaveLength(ids.length);
	}, 300_000);
});
