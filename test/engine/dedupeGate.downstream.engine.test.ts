/**
 * Dedupe Gate with every setting at its default ("Mark Keys Done: When the Execution Succeeds"),
 * followed by each combination of our nodes the docs draw (README recipes, docs/nodes/*.md,
 * examples/*.json), through n8n-core's real engine and its execution-end hooks, on both ledgers:
 *
 * - a key counts as done when the execution succeeds: the next delivery is Duplicate, whoever
 *   (if anyone) records the unit: nothing of ours, Guarded Send alone, Guarded Send → Mark Step
 *   Done, HTTP Request/Set → Mark Step Done, Guarded Send with "Also Complete the Unit of Work";
 * - except a key whose send a Guarded Send left not done (failed, retry later; needs review;
 *   another run sending it), or a step a Mark Step Done recorded as failed or for review: that key
 *   is let through again at once, so the next delivery reaches Guarded Send, which takes the send
 *   up again (or, for a step on Needs Review, keeps it there until a person releases it);
 * - a failed execution lets its keys through again at once.
 */
import type { IConnections, INode, INodeExecutionData, INodeParameters } from 'n8n-workflow';

import { DedupeGate } from '../../nodes/DedupeGate/DedupeGate.node';
import { GuardedSend } from '../../nodes/GuardedSend/GuardedSend.node';
import { MarkStepDone } from '../../nodes/MarkStepDone/MarkStepDone.node';
import { stripeLikeServer, type Behaviour } from '../support/destinations';
import { connect, node, runWorkflow, type EngineRunResult } from '../support/engine';
import { postgresBackend, redisBackend, useEngineLedger, useServer, type EngineBackend } from '../support/engineBackends';
import { GATE_OUTPUT, SEND_OUTPUT } from '../support/outputs';
import { describeIfRedis } from '../support/redis';

const GATE = 'n8n-nodes-idempotency.dedupeGate';
const SEND = 'n8n-nodes-idempotency.guardedSend';
const MARK = 'n8n-nodes-idempotency.markStepDone';
const nodeTypes = { [GATE]: new DedupeGate(), [SEND]: new GuardedSend(), [MARK]: new MarkStepDone() };

const { NEW, DUPLICATE, IN_PROGRESS } = GATE_OUTPUT;
const { SENT, SKIPPED, REVIEW, IN_PROGRESS: SEND_IN_PROGRESS } = SEND_OUTPUT;

const facts = (item: INodeExecutionData) => item.json.idempotency as Record<string, unknown>;

const postgres = postgresBackend;
const redis = redisBackend('downstream');

/** What follows the gate's New output. */
interface Shape {
	/** Guarded Send (HTTP) right after the gate. */
	send?: { completeUnit?: boolean; maxAttempts?: number; ownKey?: boolean };
	/** Plain nodes (as HTTP Request and Set are) after the gate, or after Guarded Send's Sent and Skipped. */
	plain?: 'replace' | 'set';
	/** A node after everything else that fails for the value "boom": the execution fails. */
	breaks?: boolean;
	/** Mark Step Done at the end (after Guarded Send: on Sent and Skipped), with these parameters. */
	mark?: INodeParameters;
}

function suite(backend: EngineBackend) {
	const fx = useEngineLedger(backend);
	const api = useServer(() => stripeLikeServer({ plan: () => answers.shift() ?? { kind: 'normal' } }));
	/** How the destination answers the next requests (then normally). */
	let answers: Behaviour[] = [];
	let n = 0;

	beforeEach(() => {
		answers = [];
	});

	/** Trigger (one event) → Dedupe Gate with every setting at its default, except the ledger → `shape`. */
	function flow(shape: Shape) {
		const ledger = { backend: backend.parameter };
		const nodes: INode[] = [
			node('Webhook', 'test.items', { items: '[]' }),
			node('Gate', GATE, { ...ledger }),
		];
		const connections: IConnections = {};
		const link = (from: string, to: string, output = 0) => connect(connections, from, to, output);
		link('Webhook', 'Gate');
		let last = ['Gate'];
		const then = (name: string, outputs = [0]) => {
			for (const from of last) for (const output of from === 'Send' ? outputs : [0]) link(from, name, output);
			last = [name];
		};
		if (shape.send) {
			nodes.push(
				node('Send', SEND, {
					...ledger,
					channel: 'http',
					method: 'POST',
					url: `=${api.url}/v1/charges?order={{ $json.id }}`,
					sendBody: true,
					bodyContentType: 'json',
					jsonBody: '={{ JSON.stringify({ order: $json.id }) }}',
					options: {
						...(shape.send.completeUnit ? { completeUnit: true } : {}),
						...(shape.send.maxAttempts ? { maxAttempts: shape.send.maxAttempts } : {}),
						...(shape.send.ownKey ? { namespace: 'contacts' } : {}),
					},
					// A key of its own, in a shared namespace: not the gate's key.
					...(shape.send.ownKey ? { keyFrom: 'expression', keyExpression: "={{ 'contact-' + $json.id }}" } : {}),
				}),
			);
			link('Gate', 'Send');
			last = ['Send'];
		}
		if (shape.plain) {
			nodes.push(shape.plain === 'replace' ? node('Call API', 'test.replace') : node('Tidy', 'test.set', { field: 'tidy', value: 'yes' }));
			then(shape.plain === 'replace' ? 'Call API' : 'Tidy', [SENT, SKIPPED]);
		}
		if (shape.breaks) {
			nodes.push(node('Breaks', 'test.set', { field: 'x', value: 'boom', failOn: 'boom' }));
			then('Breaks', [SENT, SKIPPED]);
		}
		if (shape.mark) {
			nodes.push(node('Mark Done', MARK, { ...ledger, status: 'completed', resultFrom: 'none', ...shape.mark }));
			then('Mark Done', [SENT, SKIPPED]);
		}
		return { nodes, connections };
	}

	/** One delivery of the event `id` to the workflow `workflowId` built as `shape`. */
	const deliver = (workflowId: string, id: string, shape: Shape): Promise<EngineRunResult> => {
		const { nodes, connections } = flow(shape);
		// The event's id goes into the Webhook node's items as a literal.
		nodes[0].parameters = { items: JSON.stringify([{ id }]) };
		return runWorkflow({ id: workflowId, nodes, connections }, { credentials: fx.credentials, nodeTypes, workflowId });
	};

	const unit = async (workflowId: string, id: string) => (await fx.ledger.get(`workflow:${workflowId}`, id)).find((r) => r.step === '');
	const gateOutput = (run: EngineRunResult) => {
		const outputs = run.outputs('Gate');
		return [NEW, DUPLICATE, IN_PROGRESS].findIndex((o) => (outputs[o] ?? []).length > 0);
	};
	const sendOutput = (run: EngineRunResult) => {
		const outputs = run.outputs('Send');
		return [SENT, SKIPPED, REVIEW, SEND_IN_PROGRESS].findIndex((o) => (outputs[o] ?? []).length > 0);
	};

	/** A fresh workflow and event per test. */
	const fresh = () => {
		const k = ++n;
		return { wf: `wf-down-${backend.parameter}-${k}-${Date.now()}`, id: `evt-${k}` };
	};

	describe('the execution succeeds and nothing was left open: the unit is completed, the next delivery is Duplicate', () => {
		const cases: Array<[string, Shape, { externalId?: RegExp; result?: unknown }]> = [
			['Gate → Guarded Send (the README recipe)', { send: {} }, {}],
			['Gate → Guarded Send ─ Sent, Skipped → Mark Step Done', { send: {}, mark: { resultFrom: 'json', resultJson: '{"receipt": "r-1"}' } }, { result: { receipt: 'r-1' } }],
			['Gate → Guarded Send with "Also Complete the Unit of Work"', { send: { completeUnit: true } }, { externalId: /^ch_/ }],
			['Gate → Guarded Send → HTTP Request → Mark Step Done', { send: {}, plain: 'replace', mark: {} }, {}],
			['Gate → HTTP Request → Mark Step Done', { plain: 'replace', mark: { resultFrom: 'json', resultJson: '{"invoice": "in_1"}' } }, { result: { invoice: 'in_1' } }],
			['Gate → Set → Mark Step Done of a named step (completed)', { plain: 'set', mark: { step: 'invoiceCreate' } }, {}],
			['Gate → nothing of ours (Set)', { plain: 'set' }, {}],
		];
		test.each(cases)('%s', async (_title, shape, stored) => {
			const { wf, id } = fresh();
			const before = api.actions.length;
			const first = await deliver(wf, id, shape);
			expect(first.error).toBeUndefined();
			expect(gateOutput(first)).toBe(NEW);
			if (shape.send) expect(sendOutput(first)).toBe(SENT);
			const row = await unit(wf, id);
			expect(row).toMatchObject({ status: 'completed', leaseHolder: null });
			if (stored.externalId) expect(row?.externalId).toMatch(stored.externalId);
			if (stored.result) expect(row?.result).toEqual(stored.result);

			for (const again of [await deliver(wf, id, shape), await deliver(wf, id, shape)]) {
				expect(again.error).toBeUndefined();
				expect(gateOutput(again)).toBe(DUPLICATE);
				expect(facts(again.outputs('Gate')[DUPLICATE][0])).toMatchObject({ outcome: 'duplicate', status: 'completed' });
				expect(again.ran('Send')).toBe(false);
			}
			expect(api.actions.length - before).toBe(shape.send ? 1 : 0);
		});
	});

	describe('a send Guarded Send left not done keeps the key open: the next delivery takes it up again', () => {
		test('failed, retry later (503 until the attempts ran out): the next delivery is New at once and sends, once; then Duplicate', async () => {
			const { wf, id } = fresh();
			const shape: Shape = { send: { maxAttempts: 1 } };
			const before = api.actions.length;
			answers = [{ kind: 'status', status: 503 }];
			const first = await deliver(wf, id, shape);
			expect(first.error).toBeUndefined();
			expect(sendOutput(first)).toBe(REVIEW);
			expect(facts(first.outputs('Send')[REVIEW][0])).toMatchObject({ status: 'failed_retryable', reason: 'gave_up' });
			expect(await unit(wf, id)).toMatchObject({ status: 'failed_retryable', leaseHolder: null });

			const second = await deliver(wf, id, shape);
			expect(gateOutput(second)).toBe(NEW);
			expect(facts(second.outputs('Gate')[NEW][0])).toMatchObject({ outcome: 'new', _ledger: { previousStatus: 'failed_retryable' } });
			expect(sendOutput(second)).toBe(SENT);
			expect(await unit(wf, id)).toMatchObject({ status: 'completed' });
			expect(gateOutput(await deliver(wf, id, shape))).toBe(DUPLICATE);
			expect(api.actions.length - before).toBe(1);
		});

		test('the same with "Also Complete the Unit of Work" on, and with Mark Step Done on Sent and Skipped only', async () => {
			for (const shape of [{ send: { maxAttempts: 1, completeUnit: true } }, { send: { maxAttempts: 1 }, mark: {} }] as Shape[]) {
				const { wf, id } = fresh();
				answers = [{ kind: 'status', status: 503 }];
				const first = await deliver(wf, id, shape);
				expect(first.error).toBeUndefined();
				expect(sendOutput(first)).toBe(REVIEW);
				expect(first.ran('Mark Done')).toBe(false);
				expect(await unit(wf, id)).toMatchObject({ status: 'failed_retryable' });
				const second = await deliver(wf, id, shape);
				expect(gateOutput(second)).toBe(NEW);
				expect(sendOutput(second)).toBe(SENT);
				expect(await unit(wf, id)).toMatchObject({ status: 'completed' });
				expect(gateOutput(await deliver(wf, id, shape))).toBe(DUPLICATE);
			}
		});

		test('needs review (the destination refused it): the next delivery reaches Guarded Send, which keeps it on Needs Review and sends nothing, until a person releases the step; then it sends', async () => {
			const { wf, id } = fresh();
			const shape: Shape = { send: {}, mark: {} };
			const before = api.actions.length;
			answers = [{ kind: 'status', status: 400, body: { error: { message: 'bad request' } } }];
			const first = await deliver(wf, id, shape);
			expect(first.error).toBeUndefined();
			expect(facts(first.outputs('Send')[REVIEW][0])).toMatchObject({ status: 'needs_review', reason: 'rejected' });
			expect(await unit(wf, id)).toMatchObject({ status: 'failed_retryable' });

			const second = await deliver(wf, id, shape);
			expect(gateOutput(second)).toBe(NEW);
			expect(facts(second.outputs('Send')[REVIEW][0])).toMatchObject({ outcome: 'needs_review', reason: 'marked_for_review' });
			expect(api.actions.length - before).toBe(0);
			expect(await unit(wf, id)).toMatchObject({ status: 'failed_retryable' });

			// A person checked: it was not sent. They release that one step, as the docs say.
			const released = await fx.ledger.release({ namespace: `workflow:${wf}`, key: id, step: 'Send', releasedBy: 'test', resolution: 'not_sent', ttlMs: 60_000 });
			expect(released.map((r) => r.action)).toEqual(['released']);
			const third = await deliver(wf, id, shape);
			expect(gateOutput(third)).toBe(NEW);
			expect(sendOutput(third)).toBe(SENT);
			expect(await unit(wf, id)).toMatchObject({ status: 'completed' });
			expect(gateOutput(await deliver(wf, id, shape))).toBe(DUPLICATE);
			expect(api.actions.length - before).toBe(1);
		});

		test('another run is sending it: In Progress leaves the key open; once that run has recorded the send, the next delivery is Skipped and completes the unit', async () => {
			const { wf, id } = fresh();
			const shape: Shape = { send: {} };
			const step = { namespace: `workflow:${wf}`, key: id, step: 'Send' };
			const [held] = await fx.ledger.claim([{ ...step, fingerprint: null }], { mode: 'lease', holder: 'execution:elsewhere', leaseMs: 60_000, ttlMs: 60_000 });
			expect(held.kind).toBe('claimed');
			const first = await deliver(wf, id, shape);
			expect(first.error).toBeUndefined();
			expect(sendOutput(first)).toBe(SEND_IN_PROGRESS);
			expect(await unit(wf, id)).toMatchObject({ status: 'failed_retryable' });

			const fence = held.kind === 'claimed' ? held.record.fence : null;
			await fx.ledger.record([{ ...step, status: 'completed', externalId: 'ch_elsewhere', fence }], { ttlMs: 60_000 });
			const second = await deliver(wf, id, shape);
			expect(gateOutput(second)).toBe(NEW);
			expect(sendOutput(second)).toBe(SKIPPED);
			expect(await unit(wf, id)).toMatchObject({ status: 'completed' });
			expect(gateOutput(await deliver(wf, id, shape))).toBe(DUPLICATE);
		});

		test('the keys Guarded Send left open are only its own: in one execution a sent event completes and a failed one stays open', async () => {
			const wf = fresh().wf;
			const shape: Shape = { send: { maxAttempts: 1 } };
			const { nodes, connections } = flow(shape);
			nodes[0].parameters = { items: JSON.stringify([{ id: 'two-ok' }, { id: 'two-bad' }]) };
			// Requests go out side by side: refuse the one for "two-bad", whatever the order.
			const plan = (_n: number, info: { path: string }) => (info.path.endsWith('order=two-bad') ? ({ kind: 'status', status: 503 } as const) : ({ kind: 'normal' } as const));
			api.setPlan(plan);
			try {
				const first = await runWorkflow({ id: wf, nodes, connections }, { credentials: fx.credentials, nodeTypes, workflowId: wf });
				expect(first.error).toBeUndefined();
			} finally {
				api.setPlan(() => answers.shift() ?? { kind: 'normal' });
			}
			expect(await unit(wf, 'two-ok')).toMatchObject({ status: 'completed' });
			expect(await unit(wf, 'two-bad')).toMatchObject({ status: 'failed_retryable' });
		});
	});

	describe('a Guarded Send or Mark Step Done with a key of its own still leaves the gate\'s key open', () => {
		test('Guarded Send keyed "contact-<id>" in a shared namespace: sent, the gate\'s key completes; not sent, it stays open', async () => {
			const sent = fresh();
			expect((await deliver(sent.wf, sent.id, { send: { ownKey: true } })).error).toBeUndefined();
			expect(await unit(sent.wf, sent.id)).toMatchObject({ status: 'completed' });
			expect((await fx.ledger.get('contacts', `contact-${sent.id}`)).map((r) => [r.step, r.status])).toEqual([['Send', 'completed']]);

			const failed = fresh();
			answers = [{ kind: 'status', status: 503 }];
			const first = await deliver(failed.wf, failed.id, { send: { ownKey: true, maxAttempts: 1 } });
			expect(sendOutput(first)).toBe(REVIEW);
			expect(await unit(failed.wf, failed.id)).toMatchObject({ status: 'failed_retryable' });
			const second = await deliver(failed.wf, failed.id, { send: { ownKey: true, maxAttempts: 1 } });
			expect(gateOutput(second)).toBe(NEW);
			expect(sendOutput(second)).toBe(SENT);
			expect(await unit(failed.wf, failed.id)).toMatchObject({ status: 'completed' });
		});

		test('Mark Step Done keyed by an expression, recording a step as failed: the gate\'s key stays open', async () => {
			const { wf, id } = fresh();
			const shape: Shape = { plain: 'replace', mark: { keyFrom: 'expression', keyExpression: "={{ 'inv-' + $('Gate').item.json.id }}", step: 'invoiceCreate', status: 'failed_retryable' } };
			expect((await deliver(wf, id, shape)).error).toBeUndefined();
			expect(await unit(wf, id)).toMatchObject({ status: 'failed_retryable' });
			expect(gateOutput(await deliver(wf, id, shape))).toBe(NEW);
		});
	});

	describe('a failed execution lets its keys through again at once', () => {
		test('Gate → Guarded Send → a node that fails: the next delivery is New at once, the send is Skipped (not sent again), the unit completes', async () => {
			const { wf, id } = fresh();
			const before = api.actions.length;
			const first = await deliver(wf, id, { send: {}, breaks: true });
			expect(first.error).toBeDefined();
			expect(sendOutput(first)).toBe(SENT);
			expect(await unit(wf, id)).toMatchObject({ status: 'failed_retryable' });
			const second = await deliver(wf, id, { send: {} });
			expect(gateOutput(second)).toBe(NEW);
			expect(sendOutput(second)).toBe(SKIPPED);
			expect(await unit(wf, id)).toMatchObject({ status: 'completed' });
			expect(gateOutput(await deliver(wf, id, { send: {} }))).toBe(DUPLICATE);
			expect(api.actions.length - before).toBe(1);
		});
	});

	describe('what Mark Step Done records stands', () => {
		test('a named step recorded as "Failed, Retry Later" keeps the key open: the next delivery is New', async () => {
			const { wf, id } = fresh();
			const shape: Shape = { plain: 'set', mark: { step: 'invoiceCreate', status: 'failed_retryable' } };
			const first = await deliver(wf, id, shape);
			expect(first.error).toBeUndefined();
			expect(await unit(wf, id)).toMatchObject({ status: 'failed_retryable' });
			expect(gateOutput(await deliver(wf, id, shape))).toBe(NEW);
		});

		test('the unit recorded as "Needs Review" stays so: the next delivery is Duplicate with status needs_review', async () => {
			const { wf, id } = fresh();
			const shape: Shape = { plain: 'replace', mark: { status: 'needs_review' } };
			expect((await deliver(wf, id, shape)).error).toBeUndefined();
			expect(await unit(wf, id)).toMatchObject({ status: 'needs_review' });
			const again = await deliver(wf, id, shape);
			expect(gateOutput(again)).toBe(DUPLICATE);
			expect(facts(again.outputs('Gate')[DUPLICATE][0])).toMatchObject({ status: 'needs_review' });
		});

		test('the unit recorded as "Failed, Retry Later" stays so: the next delivery is New at once', async () => {
			const { wf, id } = fresh();
			const shape: Shape = { plain: 'replace', mark: { status: 'failed_retryable' } };
			expect((await deliver(wf, id, shape)).error).toBeUndefined();
			expect(await unit(wf, id)).toMatchObject({ status: 'failed_retryable' });
			expect(gateOutput(await deliver(wf, id, shape))).toBe(NEW);
		});
	});
}

describe('Dedupe Gate defaults and what follows it, PostgreSQL ledger (engine)', () => suite(postgres));
describeIfRedis('Dedupe Gate defaults and what follows it, Redis ledger (engine)')('Dedupe Gate defaults and what follows it, Redis ledger (engine)', () => suite(redis));
