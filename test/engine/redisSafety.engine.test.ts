/**
 * A Redis that can lose the ledger, through n8n-core's real engine, on throwaway redis-servers
 * started here: a node fails closed on eviction under maxmemory or no persistence, naming the
 * setting and the fix; the credential's "I Accept That This Redis May Lose Keys" turns that into
 * a warning on the run; a server that refuses CONFIG warns with what to check. A row deleted from
 * under a claim (what eviction does) is reported as a lost key, not as a takeover.
 */
import http from 'http';
import type { IConnections, IExecuteFunctions, INode, INodeExecutionData, INodeParameters, INodeType } from 'n8n-workflow';

import { closeAllRedisLedgers } from '../../lib/ledger';
import { DedupeGate } from '../../nodes/DedupeGate/DedupeGate.node';
import { GuardedSend } from '../../nodes/GuardedSend/GuardedSend.node';
import { MarkStepDone } from '../../nodes/MarkStepDone/MarkStepDone.node';
import { PromptCache } from '../../nodes/PromptCache/PromptCache.node';
import { connect, node, runWorkflow } from '../support/engine';
import { testNodeDescription } from '../support/fixtureNodes';
import { SAFE_REDIS, describeIfRedisServer, startRedis, type ThrowawayRedis } from '../support/throwawayRedis';

const GATE = 'n8n-nodes-idempotency.dedupeGate';
const SEND = 'n8n-nodes-idempotency.guardedSend';
const MARK = 'n8n-nodes-idempotency.markStepDone';
const CACHE = 'n8n-nodes-idempotency.promptCache';

/** Deletes every ledger row (`{idem:ns}:r:...`) on the server, as eviction does; returns how many. */
function evictRows(server: ThrowawayRedis): number {
	const keys = server.cli('--scan', '--pattern', '{idem:*}:r:*').split('\n').filter(Boolean);
	if (keys.length > 0) server.cli('DEL', ...keys);
	return keys.length;
}

/**
 * `test.evictRows`: deletes every ledger row on `server()` (rows under a claim, as eviction does)
 * and passes its items on. n8n calls execute with its own `this`, so the server comes by closure.
 */
function evictRowsFixture(server: () => ThrowawayRedis | undefined): INodeType {
	return {
		description: testNodeDescription('test.evictRows', 'Evict Rows', { description: 'Deletes the ledger rows' }),
		async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
			const target = server();
			if (target) evictRows(target);
			return [this.getInputData()];
		},
	};
}

describeIfRedisServer('Redis eviction and persistence in the engine')('engine: a Redis that can lose the ledger', () => {
	let evicting: ThrowawayRedis;
	let noPersistence: ThrowawayRedis;
	let noConfig: ThrowawayRedis;
	let safe: ThrowawayRedis;
	let api: http.Server;
	let apiUrl = '';
	let sends = 0;
	/** What the destination does when a message arrives (the lost-key test deletes rows there). */
	let onSend: () => void = () => undefined;

	beforeAll(async () => {
		[evicting, noPersistence, noConfig, safe] = await Promise.all([
			startRedis(['--maxmemory', '5mb', '--maxmemory-policy', 'allkeys-lru', '--appendonly', 'yes']),
			startRedis(['--save', '', '--appendonly', 'no']),
			startRedis(['--rename-command', 'CONFIG', '', '--save', '', '--appendonly', 'no']),
			startRedis(SAFE_REDIS),
		]);
		api = http.createServer((req, res) => {
			req.resume();
			req.on('end', () => {
				sends++;
				onSend();
				res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: `msg-${sends}` }));
			});
		});
		await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve));
		apiUrl = `http://127.0.0.1:${(api.address() as { port: number }).port}`;
	});
	afterEach(() => closeAllRedisLedgers());
	afterAll(async () => {
		for (const s of [evicting, noPersistence, noConfig, safe]) s?.stop();
		await new Promise((r) => api?.close(r));
	});

	const creds = (server: ThrowawayRedis, extra: object = {}) => ({ idempotencyRedisApi: { host: '127.0.0.1', port: server.port, ...extra } });

	function gateFlow(items: unknown[], after: Array<{ name: string; type: string; parameters?: INodeParameters }> = []) {
		const nodes: INode[] = [
			node('Events', 'test.items', { items: JSON.stringify(items) }),
			node('Gate', GATE, { backend: 'redis', keySource: 'field', keyField: 'id', mode: 'lease', options: { namespace: 'safety' } }),
			...after.map((n) => node(n.name, n.type, n.parameters ?? {})),
		];
		const connections: IConnections = {};
		nodes.slice(1).forEach((n, i) => connect(connections, nodes[i].name, n.name));
		return { nodes, connections, id: 'wf-redis-safety' };
	}
	const run = (flow: ReturnType<typeof gateFlow>, credentials: object, evictOn?: ThrowawayRedis) =>
		runWorkflow(flow, {
			credentials: credentials as never,
			nodeTypes: { [GATE]: new DedupeGate(), [SEND]: new GuardedSend(), [MARK]: new MarkStepDone(), [CACHE]: new PromptCache(), 'test.evictRows': evictRowsFixture(() => evictOn) },
		});

	test('eviction under maxmemory: the gate fails closed, naming maxmemory-policy and its fix; nothing is let through', async () => {
		const result = await run(gateFlow([{ id: 'a' }]), creds(evicting));
		const error = result.nodeError('Gate');
		expect(error?.message).toMatch(/^The ledger Redis can lose keys \(maxmemory-policy\)\. 127\.0\.0\.1:\d+ has maxmemory-policy allkeys-lru with maxmemory 5242880/);
		expect(error?.message).toContain('CONFIG SET maxmemory-policy noeviction');
		expect((error as { description?: string })?.description).toMatch(/^Nothing was let through or sent\..*turn on "I Accept That This Redis May Lose Keys" in the ledger credential/);
		expect(result.outputs('Gate')).toEqual([]);
	});

	test('Prompt Cache fails closed too, in its own words: an answer paid for again, not a message sent again', async () => {
		const flow = gateFlow([{ prompt: 'hello' }]);
		flow.nodes[1] = node('Gate', CACHE, { backend: 'redis', operation: 'lookup', promptSource: 'text', model: 'gpt-4o-mini', prompt: '={{ $json.prompt }}' });
		const result = await run(flow, creds(evicting));
		const error = result.nodeError('Gate') as { message?: string; description?: string } | undefined;
		expect(error?.message).toMatch(/^The ledger Redis can lose keys \(maxmemory-policy\)/);
		expect(error?.description).toMatch(/^Nothing was read from the cache or stored in it\. A key the ledger loses is an answer it forgets: the next identical prompt is paid for again\./);
		expect(error?.description).not.toMatch(/sen[dt]/);
	});

	test('"Let Items Through if the Ledger Is Down" does not apply: the Redis answers, and still fails closed', async () => {
		const flow = gateFlow([{ id: 'a2' }]);
		flow.nodes[1].parameters.options = { namespace: 'safety', failOpen: true };
		const result = await run(flow, creds(evicting));
		expect(result.nodeError('Gate')?.message).toMatch(/^The ledger Redis can lose keys \(maxmemory-policy\)/);
		expect(result.outputs('Gate')).toEqual([]);
	});

	test('no persistence: fails closed naming appendonly; accepting it in the credential runs the gate with a warning on the run', async () => {
		const refused = await run(gateFlow([{ id: 'b' }]), creds(noPersistence));
		expect(refused.nodeError('Gate')?.message).toMatch(/can lose keys \(persistence\).*appendonly no and no save rules.*CONFIG SET appendonly yes/);

		const accepted = await run(gateFlow([{ id: 'b' }]), creds(noPersistence, { acceptKeyLoss: true }));
		expect(accepted.error).toBeUndefined();
		expect(accepted.outputs('Gate')[0]).toHaveLength(1);
		expect(accepted.runs('Gate')[0].hints).toEqual([
			expect.objectContaining({ type: 'warning', message: expect.stringMatching(/^The ledger Redis can lose keys, and the credential accepts that .*appendonly no and no save rules.*new Idempotency-Key/) }),
		]);
	});

	test('CONFIG renamed away: the run goes on, with a warning saying what to check', async () => {
		const result = await run(gateFlow([{ id: 'c' }]), creds(noConfig));
		expect(result.error).toBeUndefined();
		expect(result.outputs('Gate')[0]).toHaveLength(1);
		expect(result.runs('Gate')[0].hints).toEqual([
			expect.objectContaining({ type: 'warning', message: expect.stringContaining('Could not check that the ledger Redis keeps its keys') }),
		]);
		expect(result.runs('Gate')[0].hints?.[0]?.message).toContain('make sure it has AOF (appendonly yes) or RDB snapshots on');
	});

	test('a safe Redis (AOF, noeviction): no warning', async () => {
		const result = await run(gateFlow([{ id: 'd' }]), creds(safe));
		expect(result.error).toBeUndefined();
		expect(result.runs('Gate')[0].hints ?? []).toEqual([]);
	});

	test('Mark Step Done: the gate\'s row evicted from under its claim is a lost key, not a takeover', async () => {
		const flow = gateFlow([{ id: 'e' }], [
			{ name: 'Evict Rows', type: 'test.evictRows' },
			{ name: 'Mark Done', type: MARK, parameters: { backend: 'redis', status: 'completed', resultFrom: 'none' } },
		]);
		const result = await run(flow, creds(safe), safe);
		const message = result.nodeError('Mark Done')?.message ?? '';
		console.log(`Mark Step Done: ${message}`);
		expect(message).toMatch(/^The key "e": the ledger lost this key \(eviction or a restart without persistence\), or someone released it, so the step ".*" was not recorded$/);
		expect(message).not.toMatch(/Another run/);
	});

	test('Guarded Send: the step\'s row evicted while sending is a lost key, not "Another run took over … Hold Step For"', async () => {
		const before = sends;
		onSend = () => evictRows(safe);
		try {
			const flow = gateFlow([{ id: 'f' }], [
				{
					name: 'Send',
					type: SEND,
					parameters: { backend: 'redis', channel: 'http', method: 'POST', url: `${apiUrl}/send`, sendBody: true, bodyContentType: 'json', jsonBody: '={{ JSON.stringify({ id: $json.id }) }}' },
				},
			]);
			const result = await run(flow, creds(safe));
			const error = result.nodeError('Send');
			console.log(`Guarded Send: ${error?.message} | ${(error as { description?: string })?.description}`);
			expect(sends).toBe(before + 1);
			expect(error?.message).toMatch(/^The step "Send" of the key "f": the ledger lost this key \(eviction or a restart without persistence\), or someone released it, after the message was sent; it was sent, but the result was not recorded$/);
			expect(`${error?.message} ${(error as { description?: string })?.description}`).not.toMatch(/Another run took over|Hold Step For/);
		} finally {
			onSend = () => undefined;
		}
	});
});
