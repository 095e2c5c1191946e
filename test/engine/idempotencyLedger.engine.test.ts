/**
 * The operator's flow through n8n-core's real engine, against the real PostgreSQL: rows are made
 * with the ledger directly (a run that died holding its lease, a step that needs review); then
 * workflows with the Idempotency Ledger node find the stuck row, release it so a replay is let
 * through, move a sync checkpoint, and refuse bad input without writing anything.
 */
import type { IConnections, INode, NodeOperationError } from 'n8n-workflow';

import { closeAllPostgresLedgers } from '../../lib/ledger';
import { LEDGER_TYPE, ledgerFixture, recordRow, stuckRow, type LedgerFixture } from '../integration/idempotencyLedger.support';
import { IdempotencyLedger } from '../../nodes/IdempotencyLedger/IdempotencyLedger.node';
import { runWorkflow, type EngineWorkflow } from '../support/engine';

let f: LedgerFixture;
const NS = 'stripe-events';

beforeAll(async () => {
	f = await ledgerFixture('openg');
});

afterAll(async () => {
	await closeAllPostgresLedgers();
	await f.dispose();
});

const node = (name: string, type: string, parameters: INode['parameters'], x: number, extra: Partial<INode> = {}): INode =>
	({ id: name, name, type, typeVersion: 1, position: [x, 0], parameters, ...extra }) as INode;

const chain = (...names: string[]): IConnections =>
	Object.fromEntries(names.slice(0, -1).map((name, i) => [name, { main: [[{ node: names[i + 1], type: 'main', index: 0 }]] }]));

// An on-call person runs these flows from the editor ("Execute workflow" / "Execute step"):
// mode 'manual', which must still act on the production rows.
const run = (workflow: EngineWorkflow, workflowId = 'wf-oncall') =>
	runWorkflow(workflow, {
		credentials: f.credentials as never,
		nodeTypes: { [LEDGER_TYPE]: new IdempotencyLedger() },
		workflowId,
		mode: 'manual',
	});

const counts = async () => ({
	rows: await f.count('SELECT count(*) AS n FROM {t}'),
	audit: await f.count('SELECT count(*) AS n FROM {audit}'),
	checkpoints: await f.count('SELECT count(*) AS n FROM {checkpoints}'),
});

describe('on call: what is stuck, release it, replay', () => {
	beforeAll(async () => {
		// A run claimed evt_stuck and died before recording: its lease has lapsed.
		await stuckRow(f.ledger, NS, 'evt_stuck');
		// Another send was ambiguous and is waiting for a person.
		await recordRow(f.ledger, NS, 'evt_review', 'needs_review', 'slackMessage');
		// A healthy, finished one.
		await recordRow(f.ledger, NS, 'evt_done', 'completed', '', { externalId: 'msg_1' });
	});

	test('List (stuck) → Release each row it found; the replay claim then succeeds; the needs-review row is untouched', async () => {
		const workflow: EngineWorkflow = {
			name: 'Release stuck keys',
			nodes: [
				node('Start', 'test.manualTrigger', {}, 0),
				node('List Stuck', LEDGER_TYPE, { resource: 'key', operation: 'list', scope: 'shared', namespace: NS, status: 'stuck', returnAll: true, output: 'rows' }, 200),
				node(
					'Release',
					LEDGER_TYPE,
					{
						resource: 'key',
						operation: 'release',
						scope: 'shared',
						namespace: '={{ $json.namespace }}',
						key: '={{ $json.key }}',
						releaseScope: 'step',
						step: '={{ $json.step }}',
						releasedBy: 'on-call: jane (INC-42)',
					},
					400,
				),
			],
			connections: chain('Start', 'List Stuck', 'Release'),
		};
		const result = await run(workflow);
		expect(result.error).toBeUndefined();
		expect(result.executionOrder).toEqual(['Start', 'List Stuck', 'Release']);

		const stuck = result.items('List Stuck');
		expect(stuck.map((i) => [i.json.namespace, i.json.key, i.json.step, i.json.status, i.json.stuck])).toEqual([[NS, 'evt_stuck', '', 'in_progress', true]]);
		expect(stuck[0].json.leaseHolder).toBe('execution:dead');
		expect(stuck[0].pairedItem).toEqual({ item: 0 });

		const released = result.items('Release');
		expect(released).toHaveLength(1);
		expect(released[0].json).toMatchObject({ namespace: NS, key: 'evt_stuck', step: '', released: 1, refused: 0, releasedBy: 'on-call: jane (INC-42)' });
		expect(released[0].pairedItem).toEqual({ item: 0 });

		const { rows: audit } = await f.pool.query(`SELECT key, step, action, actor, detail FROM "public"."${f.table}_audit" WHERE namespace = $1`, [NS]);
		expect(audit).toEqual([{ key: 'evt_stuck', step: '', action: 'release', actor: 'on-call: jane (INC-42)', detail: { status: 'in_progress', phase: null, leaseHolder: 'execution:dead', fence: expect.any(Number), resolution: null } }]);

		// The redelivered webhook is let through again.
		const [claim] = await f.ledger.claim([{ namespace: NS, key: 'evt_stuck', step: '', fingerprint: null }], {
			mode: 'lease',
			holder: 'execution:replay',
			leaseMs: 60_000,
			ttlMs: 86_400_000,
		});
		expect(claim.kind).toBe('claimed');
		expect(claim.kind === 'claimed' && claim.previousStatus).toBeNull();

		// Nothing is stuck any more; the needs-review step is still there for a person.
		const after = await run({
			nodes: [
				node('Start', 'test.manualTrigger', {}, 0),
				node('Stuck', LEDGER_TYPE, { resource: 'key', operation: 'list', scope: 'shared', namespace: NS }, 200),
			],
			connections: chain('Start', 'Stuck'),
		});
		expect(after.items('Stuck')[0].json).toMatchObject({ count: 0, records: [], hasMore: false });
		const review = await run({
			nodes: [
				node('Start', 'test.manualTrigger', {}, 0),
				node('Review', LEDGER_TYPE, { resource: 'key', operation: 'list', scope: 'shared', namespace: NS, status: 'needs_review' }, 200),
				node('Get', LEDGER_TYPE, { resource: 'key', operation: 'get', scope: 'shared', namespace: NS, key: '={{ $json.records[0].key }}' }, 400),
				node('Stats', LEDGER_TYPE, { resource: 'ledger', operation: 'stats', scope: 'shared', namespace: NS }, 600),
			],
			connections: chain('Start', 'Review', 'Get', 'Stats'),
		});
		expect(review.error).toBeUndefined();
		expect((review.items('Review')[0].json.records as Array<{ key: string }>).map((r) => r.key)).toEqual(['evt_review']);
		expect(review.items('Get')[0].json).toMatchObject({ key: 'evt_review', found: true, stepCount: 1 });
		expect(review.items('Stats')[0].json).toMatchObject({
			namespace: NS,
			byStatus: { in_progress: 1, completed: 1, failed_retryable: 0, needs_review: 1 },
			stuck: 0,
		});
	});
});

describe('checkpoint of a paginated sync', () => {
	const syncWorkflow = (value: string, force = false): EngineWorkflow => ({
		nodes: [
			node('Start', 'test.manualTrigger', {}, 0),
			node('Page', 'test.items', { items: JSON.stringify([{ lastId: value }]) }, 200),
			node('Save Checkpoint', LEDGER_TYPE, { resource: 'checkpoint', operation: 'set', checkpointName: 'invoices', checkpointValue: '={{ $json.lastId }}', force }, 400),
			node('Read Checkpoint', LEDGER_TYPE, { resource: 'checkpoint', operation: 'get', checkpointName: 'invoices' }, 600),
		],
		connections: chain('Start', 'Page', 'Save Checkpoint', 'Read Checkpoint'),
	});

	test('forward is saved; backward is refused with a readable error unless Force is on', async () => {
		const first = await run(syncWorkflow('200'), 'wf-sync');
		expect(first.error).toBeUndefined();
		expect(first.items('Read Checkpoint')[0].json).toMatchObject({ namespace: 'workflow:wf-sync', name: 'invoices', found: true, value: '200' });

		const forward = await run(syncWorkflow('1000'), 'wf-sync');
		expect(forward.items('Read Checkpoint')[0].json).toMatchObject({ value: '1000' });

		const backward = await run(syncWorkflow('300'), 'wf-sync');
		expect(backward.error?.message).toBe('The checkpoint is at "1000" and will not move back to "300"');
		expect((backward.error as NodeOperationError).description).toBe('Turn on "Force" to move a checkpoint backwards on purpose.');
		expect(backward.ran('Read Checkpoint')).toBe(false);
		expect((await f.ledger.getCheckpoint('workflow:wf-sync', 'invoices'))?.value).toBe('1000');

		const forced = await run(syncWorkflow('300', true), 'wf-sync');
		expect(forced.error).toBeUndefined();
		expect(forced.items('Save Checkpoint')[0].json).toMatchObject({ value: '300', forced: true });
		expect(forced.items('Read Checkpoint')[0].json).toMatchObject({ value: '300', updatedBy: expect.stringMatching(/^workflow:wf-sync execution:/) });
	});
});

describe('bad input', () => {
	const releaseFrom = (items: object[], extra: Partial<INode> = {}): EngineWorkflow => ({
		nodes: [
			node('Start', 'test.manualTrigger', {}, 0),
			node('Webhook Payload', 'test.items', { items: JSON.stringify(items) }, 200),
			node('Release', LEDGER_TYPE, { resource: 'key', operation: 'release', scope: 'shared', namespace: NS, key: '={{ $json.eventId }}' }, 400, extra),
		],
		connections: chain('Start', 'Webhook Payload', 'Release'),
	});

	test('an empty key stops the run with a readable error for that item, and nothing is written', async () => {
		await recordRow(f.ledger, NS, 'evt_keep', 'completed');
		const before = await counts();
		const result = await run(releaseFrom([{ eventId: '' }]));
		expect(result.error?.message).toBe('The key is empty');
		expect((result.error as NodeOperationError).description).toMatch(/missing or blank on this item/);
		expect(result.nodeError('Release')?.message).toBe('The key is empty');
		expect(await counts()).toEqual(before);
		expect(await f.ledger.get(NS, 'evt_keep')).toHaveLength(1);
	});

	test('with "continue (using error output)": the bad item goes to the error output, the good one is released', async () => {
		await recordRow(f.ledger, NS, 'evt_ok', 'needs_review');
		const before = await counts();
		const result = await run(releaseFrom([{ eventId: 'evt_ok' }, { eventId: '' }], { onError: 'continueErrorOutput' }));
		expect(result.error).toBeUndefined();
		const [ok, failed] = result.outputs('Release');
		expect(ok.map((i) => i.json)).toEqual([expect.objectContaining({ key: 'evt_ok', released: 1 })]);
		expect(failed).toHaveLength(1);
		expect(failed[0].json).toMatchObject({ error: 'The key is empty' });
		expect(failed[0].pairedItem).toEqual({ item: 1 });
		const after = await counts();
		expect(after).toEqual({ ...before, rows: before.rows - 1, audit: before.audit + 1 });
	});
});
