/**
 * Bad input through the path a flow builder uses, in a real n8n (each version of test/e2e/support/matrix.js, the package installed
 * the user's way): a webhook whose Dedupe Gate takes its key from the field `body.id`, fed
 * payloads without a usable id. What a person sees is the execution n8n records, so the test
 * reads it back with data through the public API (as the executions list in the editor does):
 * the error message must name the field and say what is wrong in plain words, and NOTHING may
 * be written to the ledger (rows counted with pg in every ledger table).
 *
 * Also the per-item path: with the node set to "On Error: Continue (using error output)", a
 * batch with one bad event lets the good ones through and puts the bad one, with its message,
 * on the error output; only the good ones reach the ledger.
 */
import { randomUUID } from 'crypto';

import { majorOf, nodeOutput, startN8n, type N8nExecution, type N8nInstance, type WorkflowJson } from './support/n8n';
import { ledgerCredentialData, LedgerTables, uniqueLedgerTable, workflowNode } from './support/standIns';

const PKG = 'n8n-nodes-idempotency';
const table = uniqueLedgerTable('e2e_bad_input');
const ledger = new LedgerTables(table);

const node = (name: string, type: string, typeVersion: number, x: number, parameters: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
	workflowNode(name, type, typeVersion, [x, 0], parameters, extra);

/** Webhook → Dedupe Gate (Key From: Field Name, body.id) → New → Mark Step Done. */
function singleEventFlow(credentialId: string): WorkflowJson {
	const credentials = { idempotencyPostgresApi: { id: credentialId, name: 'Ledger' } };
	return {
		name: 'e2e bad input: one event per call',
		nodes: [
			node('Webhook', 'n8n-nodes-base.webhook', 2, 0, { httpMethod: 'POST', path: 'events', responseMode: 'lastNode', options: {} }, { webhookId: randomUUID() }),
			node('Dedupe Gate', `${PKG}.dedupeGate`, 1, 220, { keySource: 'field', keyField: 'body.id' }, { credentials }),
			node('Mark Step Done', `${PKG}.markStepDone`, 1, 440, {}, { credentials }),
		],
		connections: {
			Webhook: { main: [[{ node: 'Dedupe Gate', type: 'main', index: 0 }]] },
			'Dedupe Gate': { main: [[{ node: 'Mark Step Done', type: 'main', index: 0 }]] },
		},
		settings: { executionOrder: 'v1' },
	};
}

/** Webhook → Split Out body.events → Dedupe Gate (id; On Error: error output) → New → Mark Step Done; error → Rejected events. */
function batchFlow(credentialId: string): WorkflowJson {
	const credentials = { idempotencyPostgresApi: { id: credentialId, name: 'Ledger' } };
	return {
		name: 'e2e bad input: a batch, errors to the error output',
		nodes: [
			node('Webhook', 'n8n-nodes-base.webhook', 2, 0, { httpMethod: 'POST', path: 'event-batch', responseMode: 'lastNode', options: {} }, { webhookId: randomUUID() }),
			node('Split Out', 'n8n-nodes-base.splitOut', 1, 220, { fieldToSplitOut: 'body.events', options: {} }),
			node('Dedupe Gate', `${PKG}.dedupeGate`, 1, 440, { keySource: 'field', keyField: 'id' }, { credentials, onError: 'continueErrorOutput' }),
			node('Mark Step Done', `${PKG}.markStepDone`, 1, 660, {}, { credentials }),
			node('Rejected events', 'n8n-nodes-base.noOp', 1, 660, {}),
		],
		connections: {
			Webhook: { main: [[{ node: 'Split Out', type: 'main', index: 0 }]] },
			'Split Out': { main: [[{ node: 'Dedupe Gate', type: 'main', index: 0 }]] },
			// New, Duplicate, In Progress, then n8n's error output.
			'Dedupe Gate': { main: [[{ node: 'Mark Step Done', type: 'main', index: 0 }], [], [], [{ node: 'Rejected events', type: 'main', index: 0 }]] },
		},
		settings: { executionOrder: 'v1' },
	};
}

/** Words that would mean a programmer's error leaked to a person. */
const JARGON = /TypeError|ReferenceError|Cannot read|undefined|null|\bat [\w.]+ \(|stack/i;

describe('e2e: bad input through a webhook (real n8n)', () => {
	let n8n: N8nInstance | undefined;
	let credentialId: string;
	let singleId: string;
	const seen: string[] = [];

	beforeAll(async () => {
		n8n = await startN8n({ withPackage: true });
		await n8n.setupOwner();
		await n8n.createApiKey();
		credentialId = (await n8n.createCredential({ name: 'Ledger', type: 'idempotencyPostgresApi', data: ledgerCredentialData(table) })).id;
		singleId = await n8n.deploy(singleEventFlow(credentialId));
	});

	afterAll(async () => {
		if (n8n) console.log(`n8n log: ${n8n.logFile}\nerror messages seen in executions:\n${seen.join('\n')}`);
		await n8n?.stop();
		await ledger.drop();
	});

	/** "How to fix it" on a failed item: `details` on n8n 2.x; on 1.x, after the message in `error`. */
	const howToFix = (json: Record<string, unknown>) => String((majorOf(n8n!.runtime) >= 2 ? json.details : json.error) ?? '');

	/** Posts one payload and returns the execution n8n recorded for it, with data. */
	async function postAndRead(workflowId: string, webhookPath: string, body: unknown): Promise<{ status: number; execution: N8nExecution }> {
		const before = (await n8n!.executions(workflowId, { includeData: false })).length;
		const res = await n8n!.post(webhookPath, body);
		const executions = await n8n!.waitForExecutions(workflowId, before + 1, { includeData: true });
		return { status: res.status, execution: executions[0] };
	}

	test('a good event goes through and is recorded (the ledger is reachable and its tables exist)', async () => {
		const { status, execution } = await postAndRead(singleId, 'events', { id: 'evt_good_1', type: 'charge.succeeded' });
		expect(status).toBe(200);
		expect(execution.status).toBe('success');
		const rows = await ledger.rows('key = $1', ['evt_good_1']);
		expect(rows.map((r) => [r.namespace, r.step, r.status])).toEqual([[`workflow:${singleId}`, '', 'completed']]);
	});

	const badPayloads: Array<[string, unknown, RegExp]> = [
		['no id at all', { type: 'charge.succeeded', data: { object: { id: 'ch_1' } } }, /missing/i],
		['an empty id', { id: '', type: 'charge.succeeded' }, /empty/i],
		['a blank id', { id: '   ', type: 'charge.succeeded' }, /empty|blank/i],
		['an id that is an object', { id: { value: 'evt_1' }, type: 'charge.succeeded' }, /object|text|string/i],
		['an id of 600 characters', { id: 'e'.repeat(600), type: 'charge.succeeded' }, /600|512|long/i],
	];

	test.each(badPayloads)('%s: the execution fails with a message naming the field, and nothing is written', async (what, payload, says) => {
		const countsBefore = await ledger.counts();
		const { status, execution } = await postAndRead(singleId, 'events', payload);

		// The caller is not told "OK".
		expect(status).toBeGreaterThanOrEqual(400);
		// The execution is an error, stopped at the gate; nothing after it ran.
		expect(execution.status).toBe('error');
		const resultData = execution.data!.resultData;
		expect(resultData.lastNodeExecuted).toBe('Dedupe Gate');
		expect(resultData.runData['Mark Step Done']).toBeUndefined();

		const error = resultData.error;
		const message = String(error?.message ?? '');
		const description = String(error?.description ?? '');
		seen.push(`  ${what}: "${message}" / "${description}"`);
		expect(error?.node?.name ?? resultData.runData['Dedupe Gate']?.[0]?.error?.node?.name).toBe('Dedupe Gate');
		expect(message).toMatch(says);
		// It names what to look at: the key field the user typed, or the key.
		expect(`${message} ${description}`).toMatch(/body\.id|\bkey\b/i);
		if (what === 'no id at all') expect(message).toContain('body.id');
		expect(message).not.toMatch(JARGON);
		expect(message.length).toBeLessThan(200);
		// A hint on what to do.
		expect(description.length).toBeGreaterThan(10);

		// Nothing written: no row in any ledger table (gate rows, counters, checkpoints, audit).
		expect(await ledger.counts()).toEqual(countsBefore);
	});

	let batchExecution: N8nExecution;

	test('continue using the error output: the good events of a batch go through, the bad one leaves on the error output, only the good ones are written', async () => {
		const batchId = await n8n!.deploy(batchFlow(credentialId));
		const countsBefore = await ledger.counts();
		const { execution } = await postAndRead(batchId, 'event-batch', {
			events: [{ id: 'evt_batch_1' }, { type: 'charge.refunded', note: 'no id here' }, { id: 'evt_batch_2' }],
		});
		batchExecution = execution;
		expect(execution.status).toBe('success');
		expect(nodeOutput(execution, 'Dedupe Gate', 0).map((j) => j.id)).toEqual(['evt_batch_1', 'evt_batch_2']);
		const gateRun = execution.data!.resultData.runData['Dedupe Gate'][0];
		const rejected = gateRun.data.main[3] as Array<{ json: Record<string, unknown>; pairedItem: unknown }>;
		expect(rejected).toHaveLength(1);
		// Which event it was: paired with input item 1 (the editor highlights it from this).
		expect(rejected[0].pairedItem).toEqual({ item: 1 });
		expect(String(rejected[0].json.error)).toMatch(/"id"/);
		expect(String(rejected[0].json.error)).toMatch(/missing/i);
		expect(howToFix(rejected[0].json)).toMatch(/exists on every incoming item/);
		seen.push(`  batch, error output: ${JSON.stringify(rejected[0].json)}`);
		expect(nodeOutput(execution, 'Rejected events')).toHaveLength(1);
		expect(nodeOutput(execution, 'Mark Step Done')).toHaveLength(2);

		const after = await ledger.counts();
		expect(after[table]).toBe(countsBefore[table] + 2);
		const rows = await ledger.rows('namespace = $1', [`workflow:${batchId}`]);
		expect(rows.map((r) => [r.key, r.status])).toEqual([
			['evt_batch_1', 'completed'],
			['evt_batch_2', 'completed'],
		]);
	});

	// n8n (WorkflowExecute) replaces the json of any item carrying `.error` with { error }, so the
	// nodes build failed items without it: { error, details } for the error output of n8n 2.x, where
	// n8n merges the input item's json back in; { error } with both sentences on n8n 1.x, which
	// takes no `details` there (lib/n8n/errors.ts failedItem).
	test('the rejected event keeps its own data (type, note) on the error output, with the error and how to fix it', async () => {
		const rejected = nodeOutput(batchExecution, 'Dedupe Gate', 3);
		expect(rejected[0]).toMatchObject({ type: 'charge.refunded', note: 'no id here', error: expect.stringMatching(/"id"/) });
		expect(howToFix(rejected[0])).toMatch(/exists on every incoming item/);
	});
});
