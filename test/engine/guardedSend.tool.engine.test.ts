/**
 * Guarded Send as an AI Agent's tool, through n8n-core's real engine. n8n runs a node used as a
 * tool under its type name with "Tool" appended (n8n's tool generation), gives it the agent's
 * input item (here a webhook item, headers included), and hands the model only the JSON of the
 * items on its first output (n8n-core's makeHandleToolInvocation). So every outcome must be
 * answered there, in words, without the incoming item. The agent itself, in a real n8n, is in
 * test/e2e/agentTool.e2e.test.ts.
 */
import type { ICredentialDataDecryptedObject, INodeExecutionData, INodeParameters } from 'n8n-workflow';

import { GuardedSend } from '../../nodes/GuardedSend/GuardedSend.node';
import { settingsFromUrl } from '../support/db';
import { postgresBackend, useEngineLedger, useServer } from '../support/engineBackends';
import { stripeLikeServer } from '../support/destinations';
import { chain, node, runWorkflow, type EngineRunResult } from '../support/engine';
import { httpPost } from '../integration/fixtures/guarded-workflow';

const TOOL = 'n8n-nodes-idempotency.guardedSendTool';
const nodeTypes = { [TOOL]: new GuardedSend(), 'n8n-nodes-idempotency.guardedSend': new GuardedSend() };
const SECRET = 'sig-5f2c-secret-header-value';

describe('engine: Guarded Send as an AI Agent\'s tool answers every outcome in words, on its first output, without the incoming item', () => {
	const fx = useEngineLedger(postgresBackend);
	const api = useServer(() => stripeLikeServer());
	const wf = `wf-tool-${Date.now()}`;


	/** One tool call: the agent's input item (a webhook's, with a secret header) and what the model filled in. */
	function call(lead: string, text: string, parameters: INodeParameters = {}, type = TOOL, credentialOverride?: Record<string, ICredentialDataDecryptedObject>): Promise<EngineRunResult> {
		const input = [{ headers: { 'x-signature': SECRET, authorization: `Bearer ${SECRET}` }, body: { lead, text } }];
		const nodes = [
			node('Agent Input', 'test.items', { items: JSON.stringify(input) }),
			node('Email Lead', type, {
				...httpPost(`${api.url}/v1/charges`),
				// Stands for {{ $fromAI('text') }}: the model's wording.
				jsonBody: '={{ JSON.stringify({ to: $json.body.lead, text: $json.body.text }) }}',
				keyFrom: 'expression',
				keyExpression: "={{ $json.body.lead }}-welcome",
				...parameters,
			}),
		];
		return runWorkflow({ id: wf, nodes, connections: chain('Agent Input', 'Email Lead') }, { credentials: credentialOverride ?? fx.credentials, nodeTypes, workflowId: wf });
	}

	/** What the agent would read: n8n passes JSON.stringify of the first output's JSON. */
	function answer(run: EngineRunResult): { text: string; items: Array<Record<string, unknown>> } {
		expect(run.error).toBeUndefined();
		const outputs = run.outputs('Email Lead');
		for (let o = 1; o < outputs.length; o++) expect(outputs[o] ?? []).toEqual([]);
		const items = (outputs[0] ?? []).map((item: INodeExecutionData) => item.json);
		const text = JSON.stringify(items);
		expect(items).toHaveLength(1);
		expect(String(items[0].response)).not.toBe('');
		expect(text).not.toContain(SECRET);
		expect(text).not.toContain('headers');
		return { text, items };
	}

	test('sent, then already sent (same words, then other words): one request; each answer says what happened and not to retry', async () => {
		const before = api.actions.length;
		const sent = answer(await call('ana@example.com', 'Welcome, Ana!'));
		expect(sent.items[0]).toMatchObject({ outcome: 'sent', status: 'completed' });
		expect(String(sent.items[0].response)).toMatch(/^Sent \(message ID ch_[^)]+\)\. It is done; do not send it again\.$/);

		const again = answer(await call('ana@example.com', 'Welcome, Ana!'));
		expect(again.items[0]).toMatchObject({ outcome: 'skipped', reason: 'already_sent' });
		expect(String(again.items[0].response)).toMatch(/^Already sent on \d{4}-\d\d-\d\dT[^ ]+ \(message ID ch_[^)]+\); it was not sent again\. Do not retry\.$/);

		const reworded = await call('ana@example.com', 'Hi Ana, welcome aboard!');
		const words = answer(reworded);
		expect(words.items[0]).toMatchObject({ outcome: 'skipped', reason: 'mismatch' });
		expect(String(words.items[0].response)).toMatch(/with other wording; this wording was not sent\. It is done; do not retry\.$/);
		expect(api.actions.length - before).toBe(1);
	});

	test('with "When the Content Differs" set to Needs Review, a reworded repeat answers that a person must look', async () => {
		await call('bo@example.com', 'Welcome, Bo!');
		const review = answer(await call('bo@example.com', 'Hey Bo', { options: { onMismatch: 'review' } }));
		expect(review.items[0]).toMatchObject({ outcome: 'needs_review', reason: 'mismatch' });
		expect(String(review.items[0].response)).toMatch(/^Not sent: it needs a person, because the key "bo@example\.com-welcome" was used before with different content; this content was not sent\. Do not retry; tell the user that a person will look at it\.$/);
	});

	test('another run sending it right now', async () => {
		await fx.ledger.claim([{ namespace: `workflow:${wf}`, key: 'cy@example.com-welcome', step: 'Email Lead', fingerprint: null }], { mode: 'lease', holder: 'execution:other', leaseMs: 60_000, ttlMs: 60_000 });
		const busy = answer(await call('cy@example.com', 'Welcome, Cy!'));
		expect(busy.items[0]).toMatchObject({ outcome: 'in_progress' });
		expect(String(busy.items[0].response)).toBe('Being sent right now by another run; it was not sent here. Do not retry.');
	});

	test('a destination that refuses: not sent, and whether a retry may help', async () => {
		api.setPlan(() => ({ kind: 'status', status: 400, body: { error: { message: 'invalid recipient' } } }));
		try {
			const refused = answer(await call('dee@example.com', 'Welcome, Dee!'));
			expect(refused.items[0]).toMatchObject({ outcome: 'needs_review', status: 'needs_review' });
			expect(String(refused.items[0].response)).toMatch(/^Not sent: it needs a person, because HTTP 400: .*invalid recipient.*\. Do not retry;/);
		} finally {
			api.setPlan(() => ({ kind: 'normal' }));
		}
	});

	test('a ledger that cannot be reached: the agent is told in words that nothing was sent, with no driver text', async () => {
		const down = { idempotencyPostgresApi: { ...settingsFromUrl(fx.table), port: 1 } };
		const before = api.actions.length;
		const run = answer(await call('eve@example.com', 'Welcome, Eve!', {}, TOOL, down));
		expect(run.items[0]).toMatchObject({ outcome: 'error' });
		expect(String(run.items[0].response)).toMatch(/^Not sent: .*ledger.*Nothing was sent by this call; do not retry until the problem above is fixed\.$/is);
		expect(String(run.items[0].response)).not.toMatch(/ECONNREFUSED|connect\(\)|errno/);
		expect(api.actions.length).toBe(before);
	});

	test('"Key From: Dedupe Gate (Automatic)" cannot work for a tool: the node says to build the key from $fromAI', async () => {
		const run = await call('fay@example.com', 'Welcome, Fay!', { keyFrom: 'lineage' });
		expect(run.nodeError('Email Lead')?.message).toMatch(/As an AI Agent's tool, Guarded Send needs a key of its own for each message/);
		expect((run.nodeError('Email Lead') as { description?: string })?.description).toMatch(/\$fromAI\("recipient"\)/);
	});

	test('the same node in a flow (not a tool) is unchanged: a reworded repeat goes to Needs Review on its own output', async () => {
		const type = 'n8n-nodes-idempotency.guardedSend';
		await call('gus@example.com', 'Welcome, Gus!', {}, type);
		const run = await call('gus@example.com', 'Hey Gus', {}, type);
		expect(run.outputs('Email Lead')[2]).toHaveLength(1);
		expect(run.outputs('Email Lead')[0]).toEqual([]);
	});
});
