/**
 * The exact words a person sees on the Dedupe Gate node for a bad key and for a ledger server
 * that accepts connections and never answers (both backends), run in n8n's real engine.
 */
import type { INode } from 'n8n-workflow';

import { closeAllPostgresLedgers, closeAllRedisLedgers } from '../../lib/ledger';
import { DedupeGate } from '../../nodes/DedupeGate/DedupeGate.node';
import { dropLedgerTables, newPool, settingsFromUrl, uniqueTable } from '../support/db';
import { runWorkflow } from '../support/engine';
import { tcpServer } from '../support/tcpServer';
import { LOADED_MACHINE_MARGIN_MS } from '../support/timing';

const GATE_TYPE = 'n8n-nodes-idempotency.dedupeGate';
const DRIVER_TEXT = /ECONNREFUSED|Connection terminated|unsupported Unicode escape|invalid byte sequence|ETIMEDOUT/;

const run = (items: unknown[], credentials: object, extra: Partial<INode> = {}) =>
	runWorkflow(
		{
			nodes: [
				{ id: '1', name: 'Start', type: 'test.manualTrigger', typeVersion: 1, position: [0, 0], parameters: {} },
				{ id: '2', name: 'Events', type: 'test.items', typeVersion: 1, position: [200, 0], parameters: { items: JSON.stringify(items) } },
				{ id: '3', name: 'Gate', type: GATE_TYPE, typeVersion: 1, position: [400, 0], parameters: { options: { namespace: `msg-${Math.random()}` }, mode: 'seen' }, ...extra },
			] as INode[],
			connections: {
				Start: { main: [[{ node: 'Events', type: 'main' as const, index: 0 }]] },
				Events: { main: [[{ node: 'Gate', type: 'main' as const, index: 0 }]] },
			},
		},
		{ credentials: credentials as never, nodeTypes: { [GATE_TYPE]: new DedupeGate() }, workflowId: 'wf-messages' },
	);

/** The ledger table of the PostgreSQL tests below, dropped at the end. */
const nulTable = uniqueTable('msg');

afterAll(async () => {
	await closeAllPostgresLedgers();
	await closeAllRedisLedgers();
	const pool = newPool(1);
	await dropLedgerTables(pool, nulTable);
	await pool.end();
});

describe('a key with a NUL character (PostgreSQL)', () => {
	const credentials = { idempotencyPostgresApi: settingsFromUrl(nulTable) };
	const nulMessage = 'The key (field "id") contains a NUL character (an invisible "\\0"), which the ledger cannot store';

	test('fails the node with what is wrong, where (the field, the item) and what to do; no driver text', async () => {
		const result = await run([{ id: 'ok-1' }, { id: 'bad\u0000' }], credentials);
		const error = result.nodeError('Gate') as unknown as { message: string; description: string; context?: { itemIndex?: number } };
		console.log(`NUL key: ${error.message} | ${error.description} | item ${error.context?.itemIndex}`);
		expect(error.message).toBe(nulMessage);
		expect(error.description).toBe(`Check the key (field "id"): the value it reads has a NUL byte in it. Remove it, for example with {{ $json.id.replaceAll('\\u0000', '') }}.`);
		expect(error.context?.itemIndex).toBe(1);
		expect(`${error.message} ${error.description}`).not.toMatch(DRIVER_TEXT);
	});

	test('with Continue On Fail the good items of the batch still go through', async () => {
		const result = await run([{ id: 'ok-1' }, { id: 'bad\u0000' }, { id: 'ok-2' }], credentials, { onError: 'continueRegularOutput' });
		const [fresh, dup] = result.outputs('Gate');
		expect(fresh.map((i) => i.json.id)).toEqual(['ok-1', 'ok-2']);
		expect(dup.map((i) => i.json.error)).toEqual([nulMessage]);
		expect(dup[0].pairedItem).toEqual({ item: 1 });
	});
});

describe('a ledger server that accepts the connection and never answers: the node fails within Timeout (Seconds)', () => {
	for (const backend of ['PostgreSQL', 'Redis'] as const) {
		test(`${backend}: Timeout (Seconds) 1 bounds the node, and the message names the timeout and the credential field`, async () => {
			const server = await tcpServer(() => undefined);
			try {
				const credentials =
					backend === 'PostgreSQL'
						? { idempotencyPostgresApi: { ...settingsFromUrl(uniqueTable('msg')), host: '127.0.0.1', port: server.port, timeout: 1 } }
						: { idempotencyRedisApi: { host: '127.0.0.1', port: server.port, timeout: 1 } };
				const started = Date.now();
				const result = await run([{ id: 'a' }], credentials, backend === 'Redis' ? { parameters: { backend: 'redis', options: { namespace: 'msg-redis' }, mode: 'seen' } } : {});
				const ms = Date.now() - started;
				const error = result.nodeError('Gate');
				console.log(`${backend} silent server, Timeout (Seconds) 1: node failed after ${ms} ms: ${error?.message} | ${error?.description}`);
				expect(ms).toBeLessThan(1_000 + LOADED_MACHINE_MARGIN_MS);
				expect(error?.message).toBe(`The idempotency ledger is unavailable: The ledger ${backend === 'PostgreSQL' ? 'database' : 'Redis'} did not answer within 1 second while connecting (the connect timeout)`);
				expect(error?.description).toMatch(/raise Timeout \(Seconds\) in the ledger credential/);
				expect(`${error?.message} ${error?.description}`).not.toMatch(DRIVER_TEXT);
				expect(result.outputs('Gate')).toEqual([]);
			} finally {
				await closeAllPostgresLedgers();
				await closeAllRedisLedgers();
				await server.close();
			}
		});
	}
});
