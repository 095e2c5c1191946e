/**
 * The Check First recipe of docs/nodes/start-step.md and examples/region-hubspot-contact.json, wired
 * as the example wires it, through n8n-core's real engine on a real PostgreSQL ledger:
 *
 *   Webhook → Dedupe Gate → Start Step ─ Run ─────────→ Create Contact → Record Contact (Mark Step Done, Step empty)
 *                                      └ Check First → Search by Email (Always Output Data) → Found? ─ true  → Record Contact Found
 *                                                                                                   └ false → Create Contact
 *
 * Create and Search stand for HubSpot's nodes: a CRM in this process that keeps one contact per
 * email. What the recipe relies on, and this test shows: a search that finds nothing still hands
 * on an item (n8n's Always Output Data); on the false branch the create node reads the original
 * data through `$('Webhook').item`, since its input is the search's answer; and both Mark Step
 * Done nodes find the region by lineage through the search and the IF.
 *
 * A run that "dies" is an execution whose create node fails, before or after the CRM stored the
 * contact; the lease keeper's short lease is shortened so that the dead run's step lapses in
 * about a second (as startStep.engine.test.ts does).
 */
import { NodeConnectionTypes, NodeOperationError, type IConnections, type IExecuteFunctions, type INodeExecutionData, type INodeType, type INodeTypeDescription } from 'n8n-workflow';

import type { Ledger } from '../../lib/ledger';
import { DedupeGate } from '../../nodes/DedupeGate/DedupeGate.node';
import { MarkStepDone } from '../../nodes/MarkStepDone/MarkStepDone.node';
import { StartStep } from '../../nodes/StartStep/StartStep.node';
import { postgresBackend, useEngineLedger, useLeaseKeeping } from '../support/engineBackends';
import { node, runWorkflow, type EngineRunResult } from '../support/engine';
import { GATE_OUTPUT, START_OUTPUT } from '../support/outputs';

const GATE = 'n8n-nodes-idempotency.dedupeGate';
const START = 'n8n-nodes-idempotency.startStep';
const MARK = 'n8n-nodes-idempotency.markStepDone';
const { CHECK_FIRST } = START_OUTPUT;
const { DUPLICATE: GATE_DUPLICATE } = GATE_OUTPUT;

/** The CRM: one contact per email, and how often each email was created. */
const contacts = new Map<string, string>();
const created = new Map<string, number>();
/** Emails for which the create call fails: before the CRM stores the contact, or after. */
const failBefore = new Set<string>();
const failAfter = new Set<string>();

const emailProperty = [{ displayName: 'Email', name: 'email', type: 'string' as const, default: '' }];
const base = (name: string, outputs = 1): INodeTypeDescription => ({
	displayName: name,
	name,
	group: ['transform'],
	version: 1,
	description: name,
	defaults: { name },
	inputs: [NodeConnectionTypes.Main],
	outputs: Array.from({ length: outputs }, () => NodeConnectionTypes.Main),
	properties: emailProperty,
});

class CreateContact implements INodeType {
	description = base('test.crmCreate');

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		return [
			this.getInputData().map((_item, i) => {
				const email = String(this.getNodeParameter('email', i));
				if (failBefore.has(email)) throw new NodeOperationError(this.getNode(), `CRM down for ${email}`, { itemIndex: i });
				const vid = contacts.get(email) ?? `vid-${contacts.size + 1}`;
				contacts.set(email, vid);
				created.set(email, (created.get(email) ?? 0) + 1);
				if (failAfter.has(email)) throw new NodeOperationError(this.getNode(), `The answer for ${email} was lost`, { itemIndex: i });
				return { json: { vid, email }, pairedItem: { item: i } };
			}),
		];
	}
}

/** Like HubSpot's search: one item per contact found, none when there is none. */
class SearchContact implements INodeType {
	description = base('test.crmSearch');

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		return [
			this.getInputData().flatMap((_item, i) => {
				const vid = contacts.get(String(this.getNodeParameter('email', i)));
				return vid ? [{ json: { id: vid }, pairedItem: { item: i } }] : [];
			}),
		];
	}
}

/** The IF: an item with an `id` goes to true (0), any other to false (1). */
class Found implements INodeType {
	description = { ...base('test.found', 2), properties: [] };

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		const out: INodeExecutionData[][] = [[], []];
		this.getInputData().forEach((item, i) => out[item.json.id ? 0 : 1].push({ json: item.json, pairedItem: { item: i } }));
		return out;
	}
}

const nodeTypes = {
	[GATE]: new DedupeGate(),
	[START]: new StartStep(),
	[MARK]: new MarkStepDone(),
	'test.crmCreate': new CreateContact(),
	'test.crmSearch': new SearchContact(),
	'test.found': new Found(),
};

useLeaseKeeping({ shortLeaseMs: 1_000, renewEveryMs: 300 });

describe('the Check First recipe (HubSpot create contact, search by email), on PostgreSQL', () => {
	const fx = useEngineLedger(postgresBackend);
	let ledger: Ledger;
	beforeAll(() => {
		ledger = fx.ledger;
	});

	const original = "={{ $('Webhook').item.json.email }}";
	function workflow(email: string) {
		const ledgerParams = { backend: 'postgres' };
		const nodes = [
			node('Webhook', 'test.items', { items: JSON.stringify([{ email, firstName: 'Ada' }]) }),
			node('Dedupe Gate', GATE, { ...ledgerParams, keyExpression: '={{ $json.email.toLowerCase().trim() }}' }),
			node('Start Step', START, { ...ledgerParams, step: 'create contact', onUncertain: 'check' }),
			node('Create Contact', 'test.crmCreate', { email: original }),
			node('Record Contact', MARK, { ...ledgerParams, externalId: '={{ $json.vid }}' }),
			node('Search Contact by Email', 'test.crmSearch', { email: original }, { alwaysOutputData: true }),
			node('Found in HubSpot?', 'test.found'),
			node('Record Contact Found', MARK, { ...ledgerParams, externalId: '={{ $json.id }}' }),
		];
		const to = (name: string) => [{ node: name, type: 'main' as const, index: 0 }];
		const connections: IConnections = {
			Webhook: { main: [to('Dedupe Gate')] },
			'Dedupe Gate': { main: [to('Start Step')] },
			'Start Step': { main: [to('Create Contact'), [], [], [], to('Search Contact by Email')] },
			'Create Contact': { main: [to('Record Contact')] },
			'Search Contact by Email': { main: [to('Found in HubSpot?')] },
			'Found in HubSpot?': { main: [to('Record Contact Found'), to('Create Contact')] },
		};
		return { nodes, connections };
	}

	let n = 0;
	const fresh = () => ({ wf: `wf-recipe-${++n}-${Date.now()}`, email: `ada-${n}-${Date.now()}@example.com` });
	const deliver = (wf: string, email: string) => runWorkflow({ id: wf, ...workflow(email) }, { credentials: fx.credentials, nodeTypes, workflowId: wf });
	const step = async (wf: string, email: string) => (await ledger.get(`workflow:${wf}`, email)).find((r) => r.step === 'create contact');
	const facts = (run: EngineRunResult, name: string) => run.items(name)[0]?.json.idempotency as Record<string, unknown> | undefined;
	const lapse = () => new Promise((r) => setTimeout(r, 1_300));

	async function dieInside(wf: string, email: string, when: Set<string>) {
		when.add(email);
		const first = await deliver(wf, email);
		when.delete(email);
		expect(first.error).toBeDefined();
		expect(await step(wf, email)).toMatchObject({ status: 'in_progress', phase: 'sending' });
		await lapse();
	}

	test('the CRM created the contact, then the run died: Check First, the search finds it, Record Contact Found records it; no second contact', async () => {
		const { wf, email } = fresh();
		await dieInside(wf, email, failAfter);
		expect(created.get(email)).toBe(1);
		const second = await deliver(wf, email);
		expect(second.error).toBeUndefined();
		expect(second.outputs('Start Step')[CHECK_FIRST]).toHaveLength(1);
		expect(second.ran('Create Contact')).toBe(false);
		expect(facts(second, 'Record Contact Found')).toMatchObject({ step: 'create contact', status: 'completed' });
		expect(await step(wf, email)).toMatchObject({ status: 'completed', externalId: contacts.get(email), phase: null });
		expect(second.outputs('Dedupe Gate')[GATE_DUPLICATE] ?? []).toHaveLength(0);
		const third = await deliver(wf, email);
		expect(third.outputs('Dedupe Gate')[GATE_DUPLICATE]).toHaveLength(1);
		expect(created.get(email)).toBe(1);
	});

	test('the run died before the CRM stored it: Check First, the search finds nothing and still hands on an item, the false branch creates the contact once, reading the original email through $(\'Webhook\').item, and Record Contact records the region', async () => {
		const { wf, email } = fresh();
		await dieInside(wf, email, failBefore);
		expect(created.get(email)).toBeUndefined();
		const second = await deliver(wf, email);
		expect(second.error).toBeUndefined();
		expect(second.outputs('Start Step')[CHECK_FIRST]).toHaveLength(1);
		expect(second.items('Search Contact by Email')).toEqual([expect.objectContaining({ json: {} })]);
		expect(created.get(email)).toBe(1);
		expect(second.items('Create Contact')[0].json).toMatchObject({ email });
		expect(second.ran('Record Contact Found')).toBe(false);
		expect(facts(second, 'Record Contact')).toMatchObject({ step: 'create contact', status: 'completed' });
		expect(await step(wf, email)).toMatchObject({ status: 'completed', externalId: contacts.get(email) });
		expect((await deliver(wf, email)).outputs('Dedupe Gate')[GATE_DUPLICATE]).toHaveLength(1);
		expect(created.get(email)).toBe(1);
	});
});
