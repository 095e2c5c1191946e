/**
 * Start Step → (any node) → Mark Step Done: a guarded region, through n8n-core's real engine and
 * its execution-end hooks, on a real PostgreSQL ledger (and the main path on Redis).
 *
 * The node inside the region is `test.act`, which stands for any n8n node (HubSpot, Gmail, HTTP
 * Request): it counts what it did per key in this process and can fail, as a node does, either
 * stopping the execution or, with On Error: Continue, handing on an item with `json.error`.
 *
 * A run that "dies inside the region" is an execution that failed after the Start Step marked the
 * step: the step is left `sending` under a lease nobody renews, as after a kill -9 (the real crash
 * is in test/e2e/regionCrash.e2e.test.ts). The lease keeper's short lease is shortened here so
 * that such a lease lapses in about a second.
 */
import { NodeOperationError, type IConnections, type IExecuteFunctions, type INode, type INodeExecutionData, type INodeParameters, type INodeType } from 'n8n-workflow';

import { DedupeGate } from '../../nodes/DedupeGate/DedupeGate.node';
import { MarkStepDone } from '../../nodes/MarkStepDone/MarkStepDone.node';
import { StartStep } from '../../nodes/StartStep/StartStep.node';
import { connect, node, runWorkflow, type EngineRunResult } from '../support/engine';
import { testNodeDescription } from '../support/fixtureNodes';
import { postgresBackend, redisBackend, useEngineLedger, useLeaseKeeping, type EngineBackend } from '../support/engineBackends';
import { GATE_OUTPUT, START_OUTPUT } from '../support/outputs';
import { describeIfRedis } from '../support/redis';

const GATE = 'n8n-nodes-idempotency.dedupeGate';
const START = 'n8n-nodes-idempotency.startStep';
const MARK = 'n8n-nodes-idempotency.markStepDone';

const { RUN, SKIPPED, REVIEW, IN_PROGRESS, CHECK_FIRST } = START_OUTPUT;
const { NEW: GATE_NEW, DUPLICATE: GATE_DUPLICATE } = GATE_OUTPUT;

/** What `test.act` did, per key, in this process. */
const acted = new Map<string, number>();
/** Keys for which `test.act` fails (the way the node before Mark Step Done can fail). */
const failing = new Set<string>();
/** Keys for which `test.act` takes this long (a slow destination). */
const slow = new Map<string, number>();

/** Stands for any n8n node inside the region: it acts once per item and says so. */
class ActFixture implements INodeType {
	description = testNodeDescription('test.act', 'Act', {});

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		const wait = Math.max(0, ...this.getInputData().map((item) => slow.get(String(item.json.id)) ?? 0));
		if (wait > 0) await new Promise((r) => setTimeout(r, wait));
		return [
			this.getInputData().map((item, index) => {
				const id = String(item.json.id);
				if (failing.has(id)) {
					const error = new NodeOperationError(this.getNode(), `The destination refused ${id}`, { itemIndex: index });
					if (!this.continueOnFail()) throw error;
					return { json: { error: error.message }, pairedItem: { item: index } };
				}
				acted.set(id, (acted.get(id) ?? 0) + 1);
				// Replaces the item, as HubSpot or HTTP Request do: the key is found by lineage.
				return { json: { contactId: `c-${id}` }, pairedItem: { item: index } };
			}),
		];
	}
}

/** An IF whose matching branch is not wired: the items go nowhere. */
class DropFixture implements INodeType {
	description = testNodeDescription('test.drop', 'Drop', { description: 'Act' });

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		return [[]];
	}
}

const nodeTypes = { [GATE]: new DedupeGate(), [START]: new StartStep(), [MARK]: new MarkStepDone(), 'test.act': new ActFixture(), 'test.drop': new DropFixture() };

const facts = (item: INodeExecutionData) => item.json.idempotency as Record<string, unknown>;
const outputOf = (run: EngineRunResult, name: string) => run.outputs(name).findIndex((items) => (items ?? []).length > 0);

const postgres = postgresBackend;
const redis = redisBackend('region');

interface Shape {
	/** Start Step's parameters beyond the ledger and the step. */
	start?: INodeParameters;
	/** Mark Step Done's parameters beyond the ledger (default: Step empty, Completed, the item as result). */
	mark?: INodeParameters;
	/** The region's node is set to On Error: Continue (regular output). */
	continueOnError?: boolean;
	/** Check First → Mark Step Done (found), or → Act → Mark Step Done (not found). */
	check?: 'found' | 'not_found';
	/** No Mark Step Done at all. */
	noEnd?: boolean;
	/** A node between Act and Mark Step Done drops the items (an IF whose branch is not wired). */
	dropBeforeEnd?: boolean;
}

useLeaseKeeping({ shortLeaseMs: 1_000, renewEveryMs: 300 });

function suite(backend: EngineBackend) {
	const fx = useEngineLedger(backend);
	let n = 0;

	/** Trigger (one event) → Dedupe Gate (defaults) → Start Step ─ Run → Act → Mark Step Done. */
	function flow(id: string, shape: Shape) {
		const ledger = { backend: backend.parameter };
		const nodes: INode[] = [
			node('Webhook', 'test.items', { items: JSON.stringify([{ id }]) }),
			node('Gate', GATE, { ...ledger }),
			node('Start', START, { ...ledger, step: 'create contact', ...shape.start }),
			node('Act', 'test.act', {}, shape.continueOnError ? { onError: 'continueRegularOutput' } : {}),
		];
		const connections: IConnections = {};
		const link = (from: string, to: string, output = 0) => connect(connections, from, to, output);
		link('Webhook', 'Gate');
		link('Gate', 'Start', GATE_NEW);
		link('Start', 'Act', RUN);
		if (!shape.noEnd) {
			nodes.push(node('Record', MARK, { ...ledger, status: 'completed', resultFrom: 'item', ...shape.mark }));
			if (shape.dropBeforeEnd) {
				nodes.push(node('Drop', 'test.drop'));
				link('Act', 'Drop');
				link('Drop', 'Record');
			} else link('Act', 'Record');
		}
		if (shape.check === 'found') {
			nodes.push(node('Record Found', MARK, { ...ledger, status: 'completed', resultFrom: 'json', resultJson: '{"found": true}' }));
			link('Start', 'Record Found', CHECK_FIRST);
		} else if (shape.check === 'not_found') {
			link('Start', 'Act', CHECK_FIRST);
		}
		return { nodes, connections };
	}

	const deliver = (wf: string, id: string, shape: Shape = {}) => {
		const { nodes, connections } = flow(id, shape);
		return runWorkflow({ id: wf, nodes, connections }, { credentials: fx.credentials, nodeTypes, workflowId: wf });
	};
	const rows = async (wf: string, id: string) => {
		const all = await fx.ledger.get(`workflow:${wf}`, id);
		return { unit: all.find((r) => r.step === ''), step: all.find((r) => r.step === 'create contact') };
	};
	const fresh = () => {
		const k = ++n;
		return { wf: `wf-region-${backend.parameter}-${k}-${Date.now()}`, id: `evt-${backend.parameter}-${k}-${Date.now()}` };
	};
	/** The step a failed run left behind is free once its short lease lapsed (nobody renews it). */
	const lapse = () => new Promise((r) => setTimeout(r, 1_300));

	test('first delivery: Run, the region acts once, Mark Step Done (Step empty) records the region\'s step with its result; the unit is done; the next deliveries are Duplicate and act no more', async () => {
		const { wf, id } = fresh();
		const first = await deliver(wf, id);
		expect(first.error).toBeUndefined();
		expect(outputOf(first, 'Start')).toBe(RUN);
		expect(facts(first.outputs('Start')[RUN][0])).toMatchObject({ outcome: 'run', step: 'create contact', region: 'Start', reason: 'new' });
		expect(facts(first.items('Record')[0])).toMatchObject({ step: 'create contact', status: 'completed' });
		const { unit, step } = await rows(wf, id);
		expect(step).toMatchObject({ status: 'completed', result: { contactId: `c-${id}` }, phase: null });
		expect(unit).toMatchObject({ status: 'completed' });
		expect(outputOf(await deliver(wf, id), 'Gate')).toBe(GATE_DUPLICATE);
		expect(acted.get(id)).toBe(1);
	});

	test('a repeat that reaches the Start Step (the unit was freed) is Skipped with the stored result, and the region does not act', async () => {
		const { wf, id } = fresh();
		await deliver(wf, id);
		await fx.ledger.release({ namespace: `workflow:${wf}`, key: id, step: '', releasedBy: 'test', ttlMs: 60_000 });
		const again = await deliver(wf, id);
		expect(outputOf(again, 'Gate')).toBe(GATE_NEW);
		expect(outputOf(again, 'Start')).toBe(SKIPPED);
		expect(facts(again.outputs('Start')[SKIPPED][0])).toMatchObject({ outcome: 'skipped', reason: 'already_done', result: { contactId: `c-${id}` }, fence: null });
		expect(again.ran('Act')).toBe(false);
		expect(acted.get(id)).toBe(1);
	});

	test('another run inside the step right now: In Progress, nothing acts', async () => {
		const { wf, id } = fresh();
		await fx.ledger.claim([{ namespace: `workflow:${wf}`, key: id, step: 'create contact', fingerprint: null }], { mode: 'lease', holder: 'execution:other', leaseMs: 60_000, ttlMs: 60_000 });
		const run = await deliver(wf, id);
		expect(outputOf(run, 'Start')).toBe(IN_PROGRESS);
		expect(String(facts(run.outputs('Start')[IN_PROGRESS][0]).detail)).toMatch(/Another run is inside this step right now/);
		expect(run.ran('Act')).toBe(false);
		// Not done, so the gate lets the key through again at the end.
		expect((await rows(wf, id)).unit).toMatchObject({ status: 'failed_retryable' });
	});

	describe('a run that died inside the region', () => {
		/** The first delivery: the region's node fails, so the execution ends with the step marked `sending`. */
		async function dieInside(wf: string, id: string, shape: Shape = {}) {
			failing.add(id);
			const first = await deliver(wf, id, shape);
			failing.delete(id);
			expect(first.error).toBeDefined();
			expect((await rows(wf, id)).step).toMatchObject({ status: 'in_progress', phase: 'sending' });
			await lapse();
		}

		test('by default the next delivery goes to Needs Review, recorded with the evidence; the region does not act; it stays there until a person releases it', async () => {
			const { wf, id } = fresh();
			await dieInside(wf, id);
			const second = await deliver(wf, id);
			expect(second.error).toBeUndefined();
			expect(outputOf(second, 'Start')).toBe(REVIEW);
			const f = facts(second.outputs('Start')[REVIEW][0]);
			expect(f).toMatchObject({ outcome: 'needs_review', reason: 'may_have_run' });
			expect(String(f.detail)).toMatch(/stopped before Mark Step Done recorded it, so its nodes may have acted/);
			expect((await rows(wf, id)).step).toMatchObject({ status: 'needs_review', phase: 'sending', result: { reason: 'may_have_run' } });
			const third = await deliver(wf, id);
			expect(outputOf(third, 'Start')).toBe(REVIEW);
			expect(facts(third.outputs('Start')[REVIEW][0])).toMatchObject({ reason: 'marked_for_review' });
			expect(acted.get(id)).toBeUndefined();
		});

		test('with "Send to Check First" and the check finding it: Check First, recorded as done by the check path\'s Mark Step Done; the region does not act; then Duplicate', async () => {
			const { wf, id } = fresh();
			const shape: Shape = { start: { onUncertain: 'check' }, check: 'found' };
			await dieInside(wf, id, shape);
			const second = await deliver(wf, id, shape);
			expect(second.error).toBeUndefined();
			expect(outputOf(second, 'Start')).toBe(CHECK_FIRST);
			expect(facts(second.outputs('Start')[CHECK_FIRST][0])).toMatchObject({ outcome: 'check_first', reason: 'may_have_run', region: 'Start' });
			expect(second.ran('Act')).toBe(false);
			expect((await rows(wf, id)).step).toMatchObject({ status: 'completed', result: { found: true }, phase: null });
			expect((await rows(wf, id)).unit).toMatchObject({ status: 'completed' });
			expect(outputOf(await deliver(wf, id, shape), 'Gate')).toBe(GATE_DUPLICATE);
			expect(acted.get(id)).toBeUndefined();
		});

		test('with the check not finding it: Check First leads back into the region, which acts once and is recorded', async () => {
			const { wf, id } = fresh();
			const shape: Shape = { start: { onUncertain: 'check' }, check: 'not_found' };
			await dieInside(wf, id, shape);
			const second = await deliver(wf, id, shape);
			expect(second.error).toBeUndefined();
			expect(outputOf(second, 'Start')).toBe(CHECK_FIRST);
			expect(acted.get(id)).toBe(1);
			expect((await rows(wf, id)).step).toMatchObject({ status: 'completed', result: { contactId: `c-${id}` } });
		});

		test('before the lapse (the dead run\'s short lease still live), the next delivery is In Progress, never Run', async () => {
			const { wf, id } = fresh();
			failing.add(id);
			await deliver(wf, id);
			failing.delete(id);
			const at = await deliver(wf, id);
			expect(outputOf(at, 'Start')).toBe(IN_PROGRESS);
			expect(at.ran('Act')).toBe(false);
		});
	});

	test('a region that takes longer than "Hold Step For": In Progress while it holds the step; once the maximum passed, the next run goes to Needs Review, never to Run; the slow run\'s late record is refused', async () => {
		const { wf, id } = fresh();
		const shape: Shape = { start: { options: { lease: 2, leaseUnit: 'seconds' } } };
		slow.set(id, 3_500);
		const first = deliver(wf, id, shape);
		await new Promise((r) => setTimeout(r, 1_200));
		// Past the 1 s short lease: the keeper renewed it.
		const during = await deliver(wf, id, shape);
		expect(outputOf(during, 'Gate')).toBe(2);
		const direct = { ...shape, start: { ...shape.start, keyFrom: 'expression', keyExpression: '={{ $json.id }}' } };
		const { nodes, connections } = flow(id, direct);
		const startOnly = () => runWorkflow({ id: wf, nodes: nodes.filter((n) => n.name !== 'Gate'), connections: { ...connections, Webhook: { main: [[{ node: 'Start', type: 'main', index: 0 }]] } } }, { credentials: fx.credentials, nodeTypes, workflowId: wf });
		expect(outputOf(await startOnly(), 'Start')).toBe(IN_PROGRESS);
		// The 2 s maximum passed (and its last lease with it): the step is free, but only for a check.
		await new Promise((r) => setTimeout(r, 1_500));
		slow.delete(id);
		const after = await startOnly();
		expect(outputOf(after, 'Start')).toBe(REVIEW);
		expect(facts(after.outputs('Start')[REVIEW][0])).toMatchObject({ reason: 'may_have_run' });
		const late = await first;
		expect(late.nodeError('Record')?.message ?? '').toMatch(/Another run has the key/);
		expect((await rows(wf, id)).step).toMatchObject({ status: 'needs_review' });
		expect(acted.get(id)).toBe(1);
	});

	describe('On Error: Continue inside the region', () => {
		test('an item that carries its node\'s error is recorded as failed, retry later, and the next delivery runs the region again', async () => {
			const { wf, id } = fresh();
			failing.add(id);
			const first = await deliver(wf, id, { continueOnError: true });
			failing.delete(id);
			expect(first.error).toBeUndefined();
			expect(facts(first.items('Record')[0])).toMatchObject({ status: 'failed_retryable' });
			expect(String(facts(first.items('Record')[0]).detail)).toMatch(/On Error: Continue/);
			expect(await rows(wf, id)).toMatchObject({ step: { status: 'failed_retryable' }, unit: { status: 'failed_retryable' } });
			const second = await deliver(wf, id, { continueOnError: true });
			expect(facts(second.outputs('Start')[RUN][0])).toMatchObject({ reason: 'retry' });
			expect(acted.get(id)).toBe(1);
			expect((await rows(wf, id)).step).toMatchObject({ status: 'completed' });
		});

		test('with "Items With an Error: Record With the Status Above", such an item is recorded as done', async () => {
			const { wf, id } = fresh();
			failing.add(id);
			await deliver(wf, id, { continueOnError: true, mark: { options: { errorItems: 'status' } } });
			failing.delete(id);
			expect((await rows(wf, id)).step).toMatchObject({ status: 'completed' });
		});
	});

	test('an execution that succeeds with the region not ended (the item never reached Mark Step Done) leaves the unit open, and the step for a check', async () => {
		const { wf, id } = fresh();
		const first = await deliver(wf, id, { dropBeforeEnd: true });
		expect(first.error).toBeUndefined();
		expect(first.ran('Record')).toBe(false);
		expect(await rows(wf, id)).toMatchObject({ unit: { status: 'failed_retryable' }, step: { status: 'in_progress', phase: 'sending' } });
		await lapse();
		const second = await deliver(wf, id, { dropBeforeEnd: true });
		expect(outputOf(second, 'Gate')).toBe(GATE_NEW);
		expect(outputOf(second, 'Start')).toBe(REVIEW);
		expect(acted.get(id)).toBe(1);
	});
}

describe('Start Step on PostgreSQL', () => {
	suite(postgres);

	describe('bad input: a clear message on the item, and nothing written', () => {
		const fx = useEngineLedger(postgres);
		const ledger = { backend: 'postgres' };
		const run = (wf: string, nodes: INode[], connections: IConnections) => runWorkflow({ id: wf, nodes, connections }, { credentials: fx.credentials, nodeTypes, workflowId: wf });
		const written = async (wf: string, id: string) => (await fx.ledger.get(`workflow:${wf}`, id)).map((r) => r.step);

		test('a Start Step with no Mark Step Done after it', async () => {
			const wf = `wf-noend-${Date.now()}`;
			const result = await run(wf, [
				node('Webhook', 'test.items', { items: '[{"id": "a"}]' }),
				node('Start', START, { ...ledger, step: 'create contact', keyFrom: 'expression', keyExpression: '={{ $json.id }}' }),
				node('Act', 'test.act'),
			], { Webhook: { main: [[{ node: 'Start', type: 'main', index: 0 }]] }, Start: { main: [[{ node: 'Act', type: 'main', index: 0 }]] } });
			expect(result.nodeError('Start')?.message).toMatch(/starts a region that never ends: no Mark Step Done comes after it/);
			expect(await written(wf, 'a')).toEqual([]);
		});

		test('a Mark Step Done that names another step than its region\'s start (an end with no start)', async () => {
			const wf = `wf-otherend-${Date.now()}`;
			const result = await run(wf, [
				node('Webhook', 'test.items', { items: '[{"id": "b"}]' }),
				node('Start', START, { ...ledger, step: 'create contact', keyFrom: 'expression', keyExpression: '={{ $json.id }}' }),
				node('Act', 'test.act'),
				node('Record', MARK, { ...ledger, step: 'create contacts', status: 'completed', resultFrom: 'none' }),
			], {
				Webhook: { main: [[{ node: 'Start', type: 'main', index: 0 }]] },
				Start: { main: [[{ node: 'Act', type: 'main', index: 0 }]] },
				Act: { main: [[{ node: 'Record', type: 'main', index: 0 }]] },
			});
			const error = result.nodeError('Record');
			expect(error?.message).toMatch(/is inside the region "create contact" that "Start" started, but this node records the step "create contacts"/);
			expect((error as { description?: string })?.description).toMatch(/Leave Step empty/);
			expect(await written(wf, 'b')).toEqual(['create contact']);
			expect((await fx.ledger.get(`workflow:${wf}`, 'b'))[0]).toMatchObject({ status: 'in_progress' });
		});

		test('an end on an item that never passed the start (it came from the start\'s Skipped output)', async () => {
			const wf = `wf-bypass-${Date.now()}`;
			await fx.ledger.claim([{ namespace: `workflow:${wf}`, key: 'c', step: '', fingerprint: null }], { mode: 'lease', holder: 'h', leaseMs: 60_000, ttlMs: 60_000 });
			await fx.ledger.claim([{ namespace: `workflow:${wf}`, key: 'c', step: 'create contact', fingerprint: null }], { mode: 'seen', holder: 'h', leaseMs: 60_000, ttlMs: 60_000 });
			const result = await run(wf, [
				node('Webhook', 'test.items', { items: '[{"id": "c"}]' }),
				node('Start', START, { ...ledger, step: 'create contact', keyFrom: 'expression', keyExpression: '={{ $json.id }}' }),
				node('Act', 'test.act'),
				node('Record', MARK, { ...ledger, status: 'completed', resultFrom: 'none' }),
				node('Record Skipped', MARK, { ...ledger, step: 'create contact', status: 'needs_review', resultFrom: 'none', keyFrom: 'expression', keyExpression: '={{ $json.id }}' }),
			], {
				Webhook: { main: [[{ node: 'Start', type: 'main', index: 0 }]] },
				Start: { main: [[{ node: 'Act', type: 'main', index: 0 }], [{ node: 'Record Skipped', type: 'main', index: 0 }]] },
				Act: { main: [[{ node: 'Record', type: 'main', index: 0 }]] },
			});
			expect(result.nodeError('Record Skipped')?.message).toMatch(/did not come through "Start", which starts the step "create contact", so there is no start of that step to end here; nothing was recorded/);
			expect((await fx.ledger.get(`workflow:${wf}`, 'c')).find((r) => r.step === 'create contact')).toMatchObject({ status: 'completed' });
		});

		test('two starts of one step for one key', async () => {
			const wf = `wf-twostarts-${Date.now()}`;
			const result = await run(wf, [
				node('Webhook', 'test.items', { items: '[{"id": "d"}]' }),
				node('Start', START, { ...ledger, step: 'create contact', keyFrom: 'expression', keyExpression: '={{ $json.id }}' }),
				node('Start Again', START, { ...ledger, step: 'create contact' }),
				node('Record', MARK, { ...ledger, status: 'completed', resultFrom: 'none' }),
			], {
				Webhook: { main: [[{ node: 'Start', type: 'main', index: 0 }]] },
				Start: { main: [[{ node: 'Start Again', type: 'main', index: 0 }]] },
				'Start Again': { main: [[{ node: 'Record', type: 'main', index: 0 }]] },
			});
			expect(result.nodeError('Start Again')?.message).toMatch(/is already inside the region "create contact" that "Start" started, so "Start Again" would start the same step twice/);
			// Only the first start wrote; the second wrote nothing.
			expect(await written(wf, 'd')).toEqual(['create contact']);
		});

		test('the same key twice in one input: the first item runs the step, the second goes to In Progress', async () => {
			const wf = `wf-twice-${Date.now()}`;
			const result = await run(wf, [
				node('Webhook', 'test.items', { items: '[{"id": "e"}, {"id": "e"}]' }),
				node('Start', START, { ...ledger, step: 'create contact', keyFrom: 'expression', keyExpression: '={{ $json.id }}' }),
				node('Act', 'test.act'),
				node('Record', MARK, { ...ledger, status: 'completed', resultFrom: 'none' }),
			], {
				Webhook: { main: [[{ node: 'Start', type: 'main', index: 0 }]] },
				Start: { main: [[{ node: 'Act', type: 'main', index: 0 }]] },
				Act: { main: [[{ node: 'Record', type: 'main', index: 0 }]] },
			});
			expect(result.outputs('Start')[RUN]).toHaveLength(1);
			expect(facts(result.outputs('Start')[IN_PROGRESS][0])).toMatchObject({ reason: 'same_key_earlier_in_input', firstItem: 0 });
			expect(acted.get('e')).toBe(1);
		});
	});
});

describeIfRedis('Start Step on Redis (engine)')('Start Step on Redis (engine)', () => suite(redis));
