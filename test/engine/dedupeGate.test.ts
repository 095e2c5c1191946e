/**
 * Dedupe Gate inside n8n-core's real workflow engine, against the real PostgreSQL.
 */
import type { INode, INodeExecutionData, INodeParameters } from 'n8n-workflow';

import { closeAllRedisLedgers } from '../../lib/ledger';
import { DedupeGate } from '../../nodes/DedupeGate/DedupeGate.node';
import { settingsFromUrl } from '../support/db';
import { useNodeCreatedTable } from '../support/engineBackends';
import { countingParameterReads, runWorkflow, settleShortcutChecks, type EngineRunResult } from '../support/engine';
import { deletePrefix, describeIfRedis, newRedisClient, suiteRedisCredential, uniquePrefix } from '../support/redis';

const GATE_TYPE = 'n8n-nodes-idempotency.dedupeGate';
const { table, pool, credentials } = useNodeCreatedTable('gate');

function workflow(items: unknown[], gate: INodeParameters, extra: Partial<INode> = {}, proxied = false) {
	return {
		nodes: [
			{ id: '1', name: 'Start', type: 'test.manualTrigger', typeVersion: 1, position: [0, 0], parameters: {} },
			{ id: '2', name: 'Events', type: 'test.items', typeVersion: 1, position: [200, 0], parameters: { items: JSON.stringify(items), proxied } },
			{ id: '3', name: 'Gate', type: GATE_TYPE, typeVersion: 1, position: [400, 0], parameters: gate, ...extra },
		] as INode[],
		connections: {
			Start: { main: [[{ node: 'Events', type: 'main' as const, index: 0 }]] },
			Events: { main: [[{ node: 'Gate', type: 'main' as const, index: 0 }]] },
		},
	};
}

const run = (items: unknown[], gate: INodeParameters, options: { extra?: Partial<INode>; workflowId?: string; creds?: object; proxied?: boolean } = {}) =>
	runWorkflow(workflow(items, gate, options.extra, options.proxied), {
		credentials: (options.creds ?? credentials) as never,
		nodeTypes: { [GATE_TYPE]: new DedupeGate() },
		workflowId: options.workflowId ?? 'wf-gate',
	});

const ids = (items: INodeExecutionData[]) => items.map((i) => i.json.id);
const facts = (item: INodeExecutionData) => item.json.idempotency as Record<string, unknown>;
/** The gate's ledger details, kept under `idempotency._ledger` for our own nodes. */
const details = (item: INodeExecutionData) => facts(item)._ledger as Record<string, unknown>;

async function rowCount(namespace: string): Promise<number> {
	const { rows } = await pool.query(`SELECT count(*)::int AS n FROM "${table}" WHERE namespace = $1`, [namespace]);
	return rows[0].n;
}

function expectPaired(result: EngineRunResult) {
	for (const output of result.outputs('Gate')) {
		for (const item of output) expect(item.pairedItem).toEqual({ item: expect.any(Number) });
	}
}

describe('Dedupe Gate in the real engine', () => {
	const events = Array.from({ length: 20 }, (_, i) => ({ id: `evt_${i}`, amount: i * 10 }));

	test('1,000 items behind proxies (a Code node in n8n 1.x\'s sandbox) get a hint that names the setting; plain ones none', async () => {
		const many = Array.from({ length: 1000 }, (_, i) => ({ id: `px_${i}`, nested: { n: i } }));
		const sandboxed = await run(many, { options: { namespace: 'engine-proxied' }, mode: 'seen' }, { proxied: true });
		expect(sandboxed.error).toBeUndefined();
		const [fresh] = sandboxed.outputs('Gate');
		expect(fresh).toHaveLength(1000);
		expect(fresh[999].json).toMatchObject({ id: 'px_999', nested: { n: 999 }, idempotency: { outcome: 'new', key: 'px_999' } });
		const hints = (sandboxed.runs('Gate')[0].hints ?? []).map((h) => h.message);
		expect(hints).toEqual([expect.stringContaining('set N8N_RUNNERS_ENABLED=true where n8n runs')]);
		expect(hints[0]).toContain('These 1000 items come from a Code node');

		const plain = await run(many, { options: { namespace: 'engine-plain' }, mode: 'seen' });
		expect(plain.outputs('Gate')[0]).toHaveLength(1000);
		expect(plain.runs('Gate')[0].hints ?? []).toEqual([]);
	});

	test('first run: every item is New; an identical second run: every item is Duplicate', async () => {
		const gate = { options: { namespace: 'engine-seen' }, mode: 'seen' };
		const first = await run(events, gate);
		expect(first.error).toBeUndefined();
		const [fresh, dup, busy] = first.outputs('Gate');
		expect(ids(fresh)).toEqual(events.map((e) => e.id));
		expect(dup).toEqual([]);
		expect(busy).toEqual([]);
		expect(facts(fresh[0])).toMatchObject({ outcome: 'new', key: 'evt_0', status: 'completed', _ledger: { namespace: 'engine-seen', attempts: 1 } });
		expectPaired(first);

		const second = await run(events, gate);
		const [fresh2, dup2] = second.outputs('Gate');
		expect(fresh2).toEqual([]);
		expect(ids(dup2)).toEqual(events.map((e) => e.id));
		expect(facts(dup2[3])).toMatchObject({ outcome: 'duplicate', key: 'evt_3', status: 'completed' });
		expect(facts(dup2[3]).firstSeenAt).toBe(facts(fresh[3]).firstSeenAt);
		expectPaired(second);
		expect(await rowCount('engine-seen')).toBe(20);
	});

	test('"When Mark Step Done Records It": a second run finds the keys In Progress, under the workflow namespace', async () => {
		const gate = { mode: 'lease' };
		const first = await run(events.slice(0, 5), gate, { workflowId: 'wf-lease' });
		expect(ids(first.outputs('Gate')[0])).toHaveLength(5);
		expect(facts(first.outputs('Gate')[0][0])).toMatchObject({ status: 'in_progress', _ledger: { namespace: 'workflow:wf-lease' } });
		const second = await run(events.slice(0, 5), gate, { workflowId: 'wf-lease' });
		const [fresh, dup, busy] = second.outputs('Gate');
		expect(fresh).toEqual([]);
		expect(dup).toEqual([]);
		expect(ids(busy)).toEqual(events.slice(0, 5).map((e) => e.id));
		// Another workflow has its own namespace.
		const other = await run(events.slice(0, 5), gate, { workflowId: 'wf-other' });
		expect(other.outputs('Gate')[0]).toHaveLength(5);
	});

	test('duplicates inside one input batch: the first item wins', async () => {
		const batch = [{ id: 'a', n: 1 }, { id: 'b', n: 2 }, { id: 'a', n: 1 }, { id: 'c', n: 3 }, { id: 'b', n: 2 }];
		const result = await run(batch, { options: { namespace: 'engine-batch' }, mode: 'seen' });
		const [fresh, dup] = result.outputs('Gate');
		expect(fresh.map((i) => i.pairedItem)).toEqual([{ item: 0 }, { item: 1 }, { item: 3 }]);
		expect(dup.map((i) => i.pairedItem)).toEqual([{ item: 2 }, { item: 4 }]);
	});

	test('key sources: field path, plain and complex expressions, hash of chosen fields, hash of whole item', async () => {
		const items = [{ data: { object: { id: 'x1' } }, email: ' A@b.c ', order: 7 }];
		const cases: Array<[INodeParameters, string | RegExp]> = [
			[{ keySource: 'field', keyField: 'data.object.id' }, 'x1'],
			[{ keySource: 'expression', keyExpression: '={{ $json.data.object.id }}' }, 'x1'],
			[{ keySource: 'expression', keyExpression: '={{ $json.data.object.id + "-" + $json.order }}' }, 'x1-7'],
			[{ keySource: 'expression', keyExpression: '={{ $json.order }}' }, '7'],
			[{ keySource: 'fields', keyFields: 'email, order' }, /^[0-9a-f]{64}$/],
			[{ keySource: 'item' }, /^[0-9a-f]{64}$/],
		];
		for (const [params, expected] of cases) {
			const result = await run(items, { options: { namespace: `engine-keys-${JSON.stringify(params).length}-${Math.random()}` }, mode: 'seen', ...params });
			expect(result.error).toBeUndefined();
			const key = facts(result.outputs('Gate')[0][0]).key as string;
			if (typeof expected === 'string') expect(key).toBe(expected);
			else expect(key).toMatch(expected);
		}
		// Whitespace and key order do not change a hash of the whole item.
		const ns = `engine-hash-${Math.random()}`;
		await run([{ a: 1, b: ' x ' }], { options: { namespace: ns }, mode: 'seen', keySource: 'item' });
		const again = await run([{ b: 'x', a: 1 }], { options: { namespace: ns }, mode: 'seen', keySource: 'item' });
		expect(again.outputs('Gate')[1]).toHaveLength(1);
	});

	test('only newer versions: an older or equal version is a duplicate, a newer one passes', async () => {
		const gate = { options: { namespace: 'engine-newer' }, mode: 'newer', versionField: 'updated' };
		await run([{ id: 'o1', updated: '2026-01-02T00:00:00Z', v: 'b' }], gate);
		const older = await run([{ id: 'o1', updated: '2026-01-01T00:00:00Z', v: 'a' }], gate);
		expect(older.outputs('Gate')[1]).toHaveLength(1);
		const newer = await run([{ id: 'o1', updated: '2026-01-03T00:00:00Z', v: 'c' }], gate);
		expect(newer.outputs('Gate')[0]).toHaveLength(1);
		expect(details(newer.outputs('Gate')[0][0]).version).toBe('2026-01-03T00:00:00Z');
	});

	test('payload mismatch: not compared by default (a plain duplicate), its own output, or an error', async () => {
		const base = { mode: 'seen' };
		for (const [policy, check] of [
			['duplicate', (r: EngineRunResult) => {
				expect(r.outputs('Gate')).toHaveLength(3);
				expect(facts(r.outputs('Gate')[1][0]).outcome).toBe('duplicate');
			}],
			['route', (r: EngineRunResult) => {
				expect(r.outputs('Gate')).toHaveLength(4);
				expect(facts(r.outputs('Gate')[3][0]).outcome).toBe('mismatch');
			}],
			['error', (r: EngineRunResult) => expect(r.nodeError('Gate')?.message).toMatch(/seen before with different content/)],
		] as const) {
			const namespace = `engine-mismatch-${policy}`;
			await run([{ id: 'm', total: 10 }], { ...base, options: { namespace, onMismatch: policy } });
			check(await run([{ id: 'm', total: 99 }], { ...base, options: { namespace, onMismatch: policy } }));
		}
		// A key let through while "Treat as Duplicate" compared nothing carries no fingerprint: a gate
		// that compares finds nothing to compare it with (docs/nodes/dedupe-gate.md).
		const unfingerprinted = 'engine-mismatch-unfingerprinted';
		await run([{ id: 'm', total: 10 }], { ...base, options: { namespace: unfingerprinted } });
		const later = await run([{ id: 'm', total: 99 }], { ...base, options: { namespace: unfingerprinted, onMismatch: 'route' } });
		expect(later.outputs('Gate')[3]).toEqual([]);
		expect(facts(later.outputs('Gate')[1][0]).outcome).toBe('duplicate');
		// Webhook items compare their body only: new headers on a redelivery are no mismatch, a new body is.
		const namespace = 'engine-webhook';
		const compare = { ...base, options: { namespace, onMismatch: 'route' }, keySource: 'field', keyField: 'body.id' };
		const delivery = (requestId: string, amount = 5) => ({ headers: { 'x-request-id': requestId }, body: { id: 'evt_w', amount }, query: {} });
		await run([delivery('r1')], compare);
		const redelivery = await run([delivery('r2')], compare);
		expect(redelivery.outputs('Gate')[3]).toEqual([]);
		expect(facts(redelivery.outputs('Gate')[1][0]).outcome).toBe('duplicate');
		const changed = await run([delivery('r3', 6)], compare);
		expect(facts(changed.outputs('Gate')[3][0]).outcome).toBe('mismatch');
	});

	test('settings are read once per execution: 1,000 items cost no more parameter reads than 10', async () => {
		const { node: counting, reads } = countingParameterReads(new DedupeGate());
		let execution = 0;
		const perExecution = async (count: number, gate: INodeParameters) => {
			reads.clear();
			execution++;
			const items = Array.from({ length: count }, (_, i) => ({ id: `once_${execution}_${i}`, tenant: 'acme' }));
			const result = await runWorkflow(workflow(items, gate), {
				credentials: credentials as never,
				nodeTypes: { [GATE_TYPE]: counting },
				workflowId: 'wf-once',
			});
			expect(result.error).toBeUndefined();
			expect(result.outputs('Gate')[0]).toHaveLength(count);
			return Object.fromEntries(reads);
		};
		const options = { namespace: 'engine-once', lease: 5, leaseUnit: 'minutes', retention: 7, retentionUnit: 'days', onMismatch: 'route', compareFields: 'id', step: 'welcome' };
		const settings = { mode: 'lease', options };
		const keys: INodeParameters[] = [
			{ keySource: 'field', keyField: 'id' },
			{ keySource: 'expression', keyExpression: '={{ $json.id }}' },
			{ keySource: 'expression', keyExpression: "={{ 'k-' + $json.id }}" },
			{ keySource: 'field', keyField: 'id', options: { ...options, namespace: '={{ $json.tenant }}-once' } },
		];
		// The first execution in a process also checks the key shortcut it takes (shortcutCheck.ts).
		await settleShortcutChecks();
		for (const key of keys) {
			const small = await perExecution(10, { ...settings, ...key });
			const large = await perExecution(1_000, { ...settings, ...key });
			expect(large).toEqual(small);
			for (const name of ['mode', 'options', 'options.namespace', 'keySource', 'backend']) {
				expect({ name, reads: small[name] }).toEqual({ name, reads: expect.any(Number) });
				expect(small[name]).toBeLessThanOrEqual(2);
			}
		}
		// The counter sees per-item reads: a namespace only n8n can evaluate is read for each item.
		const perItem = { ...settings, keySource: 'field', keyField: 'id', options: { ...options, namespace: '={{ `t-${$json.tenant}` }}' } };
		expect((await perExecution(1_000, perItem))['options.namespace']).toBeGreaterThanOrEqual(1_000);
	});

	describe('bad input: a readable error, and nothing written', () => {
		const cases: Array<[string, unknown[], INodeParameters, RegExp]> = [
			['missing key', [{ other: 1 }], {}, /key \(field "id"\) is missing/],
			['empty key', [{ id: '   ' }], {}, /key \(field "id"\) is empty/],
			['object key', [{ id: { nested: true } }], {}, /must be text or a number, but on this item it is an object/],
			['list key', [{ id: [1, 2] }], {}, /it is a list/],
			['over-long key', [{ id: 'k'.repeat(513) }], {}, /key \(field "id"\) is 513 characters long; the limit is 512/],
			['over-long key of emoji, counted as a person counts', [{ id: '\u{1F600}'.repeat(513) }], {}, /key \(field "id"\) is 513 characters long; the limit is 512/],
			['key with a NUL character', [{ id: 'evt\u00001' }], {}, /key \(field "id"\) contains a NUL character/],
			['missing key through an expression', [{ other: 1 }], { keySource: 'expression', keyExpression: '={{ $json.id }}' }, /key \(field "id"\) is missing/],
			['bad key field name', [{ id: 1 }], { keySource: 'field', keyField: 'a..b' }, /is not a field name/],
			['missing field to hash', [{ id: 1 }], { keySource: 'fields', keyFields: 'id, email' }, /"email" is missing/],
			['empty shared namespace', [{ id: 1 }], { options: { namespace: ' ' } }, /namespace is empty/],
			['bad retention', [{ id: 1 }], { options: { retention: 0 } }, /positive number of days/],
		];
		test.each(cases)('%s', async (_name, items, params, message) => {
			const namespace = `engine-bad-${Math.random()}`;
			const result = await run(items, { mode: 'seen', ...params, options: { namespace, ...(params.options as object) } });
			expect(result.nodeError('Gate')?.message).toMatch(message);
			expect(result.outputs('Gate')).toEqual([]);
			expect(await rowCount(namespace)).toBe(0);
		});

		test('an invalid table name in the credential is refused before any SQL', async () => {
			const bad = { idempotencyPostgresApi: { ...settingsFromUrl(table), table: 'ledger; DROP TABLE x' } };
			const result = await run([{ id: 1 }], { mode: 'seen' }, { creds: bad });
			expect(result.nodeError('Gate')?.message).toMatch(/table name "ledger; DROP TABLE x" is not a valid name/);
		});

		test('a key of 300 emoji is 300 characters, and is claimed', async () => {
			const namespace = `engine-emoji-${Math.random()}`;
			const result = await run([{ id: '\u{1F600}'.repeat(300) }], { options: { namespace }, mode: 'seen' });
			expect(result.nodeError('Gate')).toBeUndefined();
			expect(result.outputs('Gate')[0]).toHaveLength(1);
		});

		test('with Continue on error, a NUL in one key fails that item only: its neighbours are claimed (PostgreSQL)', async () => {
			const namespace = `engine-nul-${Math.random()}`;
			const result = await run([{ id: 'ok-1' }, { id: 'bad\u0000' }, { id: 'ok-2' }], { options: { namespace }, mode: 'seen' }, { extra: { onError: 'continueRegularOutput' } });
			const [fresh, dup] = result.outputs('Gate');
			expect(ids(fresh)).toEqual(['ok-1', 'ok-2']);
			expect(dup.map((i) => i.json.error)).toEqual([expect.stringMatching(/contains a NUL character/)]);
			expect(await rowCount(namespace)).toBe(2);
		});

		test('with Continue on error, the bad item leaves on Duplicate with its error and the rest go on', async () => {
			const namespace = `engine-continue-${Math.random()}`;
			const result = await run([{ id: 'ok-1' }, { nope: true }, { id: 'ok-2' }], { options: { namespace }, mode: 'seen' }, { extra: { onError: 'continueRegularOutput' } });
			const [fresh, dup] = result.outputs('Gate');
			expect(ids(fresh)).toEqual(['ok-1', 'ok-2']);
			expect(dup).toHaveLength(1);
			expect(dup[0].json.error).toMatch(/missing/);
			expect(dup[0].pairedItem).toEqual({ item: 1 });
			expect(await rowCount(namespace)).toBe(2);
			// Nothing is lost: the event's own data stays, with how to fix it.
			expect(dup[0].json).toMatchObject({ nope: true, details: expect.stringMatching(/./) });
		});

		test('with Continue (using error output), the bad item leaves on the error output with its own data', async () => {
			const namespace = `engine-error-output-${Math.random()}`;
			const result = await run([{ id: 'ok-1' }, { nope: true }], { options: { namespace }, mode: 'seen' }, { extra: { onError: 'continueErrorOutput' } });
			const outputs = result.outputs('Gate');
			expect(ids(outputs[0])).toEqual(['ok-1']);
			expect(outputs[1]).toHaveLength(0);
			const errorOutput = outputs[outputs.length - 1];
			expect(errorOutput).toHaveLength(1);
			expect(errorOutput[0].json).toMatchObject({ nope: true, error: expect.stringMatching(/missing/), details: expect.stringMatching(/./) });
			expect(await rowCount(namespace)).toBe(1);
		});
	});

	describe('when the ledger cannot be reached', () => {
		const down = { idempotencyPostgresApi: { ...settingsFromUrl(table), port: 1 } };

		test('the gate fails closed and says what to check', async () => {
			const result = await run([{ id: 1 }, { id: 2 }], { mode: 'seen' }, { creds: down });
			expect(result.nodeError('Gate')?.message).toMatch(/ledger is unavailable: The ledger database refused the connection/);
			expect(result.nodeError('Gate')?.description).toMatch(/Check that PostgreSQL is running/);
			expect(result.outputs('Gate')).toEqual([]);
		});

		test('with "Let Items Through if the Ledger Is Down" every item goes to New, marked unverified', async () => {
			const result = await run([{ id: 1 }, { id: 2 }], { mode: 'seen', options: { failOpen: true } }, { creds: down });
			const [fresh] = result.outputs('Gate');
			expect(fresh).toHaveLength(2);
			expect(facts(fresh[0]).outcome).toBe('unverified');
		});
	});
});

describeIfRedis('Dedupe Gate on the Redis ledger (engine)')('Dedupe Gate on the Redis ledger', () => {
	const prefix = uniquePrefix('gate');
	const redisCredentials = {
		idempotencyRedisApi: suiteRedisCredential(prefix),
	};
	afterAll(async () => {
		await closeAllRedisLedgers();
		const client = newRedisClient();
		await deletePrefix(client, prefix);
		client.disconnect();
	});

	test('the same workflow with "Ledger: Redis": first run New, second run Duplicate, bad input refused', async () => {
		const items = Array.from({ length: 50 }, (_, i) => ({ id: `r_${i}` }));
		const gate = { backend: 'redis', options: { namespace: 'engine-redis' }, mode: 'seen' };
		const first = await run(items, gate, { creds: redisCredentials });
		expect(first.error).toBeUndefined();
		expect(first.outputs('Gate')[0]).toHaveLength(50);
		const second = await run(items, gate, { creds: redisCredentials });
		expect(second.outputs('Gate')[0]).toHaveLength(0);
		expect(ids(second.outputs('Gate')[1])).toEqual(items.map((i) => i.id));
		const bad = await run([{ id: '' }], gate, { creds: redisCredentials });
		expect(bad.nodeError('Gate')?.message).toMatch(/key \(field "id"\) is empty/);
	});

	test('an unreachable Redis fails closed with a readable message', async () => {
		const down = { idempotencyRedisApi: { ...redisCredentials.idempotencyRedisApi, port: 1 } };
		const result = await run([{ id: 1 }], { backend: 'redis', mode: 'seen' }, { creds: down });
		expect(result.nodeError('Gate')?.message).toMatch(/ledger is unavailable/i);
		expect(result.outputs('Gate')).toEqual([]);
	});
});
