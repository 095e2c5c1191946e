/**
 * What a person finds and adds in n8n's editor (headless Chromium against a real n8n, the package
 * installed the user's way), not what the API can build:
 *
 * - A Dedupe Gate added from the panel with nothing set, on an n8n without a single credential:
 *   Execute workflow twice gives New, then Duplicate. Version 2 of every node defaults to the
 *   Built-in ledger, which needs no credential.
 * - Prompt Cache Chat Model from an AI Agent's *Chat Model* slot: the slot's panel finds it by
 *   "cache" and "prompt cache"; clicked, it lands in the slot; from its own *Model* slot an OpenAI
 *   Chat Model is added under it. The workflow the editor saved then answers twice from one model
 *   call (the OpenAI-compatible stand-in counts them). A Basic LLM Chain's slot finds it too.
 * - The main panel's searches for the words people type, each showing the node that fits among
 *   the first three.
 */
import { randomUUID } from 'crypto';

import type { Page } from 'playwright-core';

import { inEditor, searchPanel } from './support/editor';
import { agentTypeVersion, nodeOutput, startN8n, type N8nInstance } from './support/n8n';
import { ledgerCredentialData, LedgerTables, openAiStandIn, uniqueLedgerTable, type OpenAiStandIn } from './support/standIns';

const LC = '@n8n/n8n-nodes-langchain';
const CACHE = 'Prompt Cache Chat Model';
const table = uniqueLedgerTable('e2e_editor_panel');
const ledger = new LedgerTables(table);

type WorkflowNode = { name: string; type: string; typeVersion?: number; parameters: Record<string, unknown>; credentials?: Record<string, { id: string; name: string }> };
type SavedWorkflow = { id: string; name: string; nodes: WorkflowNode[]; connections: Record<string, Record<string, Array<Array<{ node: string; type: string }>>>>; settings?: Record<string, unknown> };

/** Webhook → `root` (AI Agent or Basic LLM Chain), nothing in its slots. */
function bareFlow(root: 'agent' | 'chain', path: string) {
	const rootNode =
		root === 'agent'
			? { id: randomUUID(), name: 'AI Agent', type: `${LC}.agent`, typeVersion: agentTypeVersion(), position: [300, 0], parameters: { promptType: 'define', text: '={{ $json.body.question }}', options: {} } }
			: { id: randomUUID(), name: 'Basic LLM Chain', type: `${LC}.chainLlm`, typeVersion: 1.7, position: [300, 0], parameters: { promptType: 'define', text: '={{ $json.body.question }}' } };
	return {
		name: `editor panel ${path}`,
		settings: { executionOrder: 'v1' },
		nodes: [{ id: randomUUID(), name: 'Webhook', type: 'n8n-nodes-base.webhook', typeVersion: 2, position: [0, 0], parameters: { httpMethod: 'POST', path, responseMode: 'lastNode', options: {} }, webhookId: randomUUID() }, rootNode],
		connections: { Webhook: { main: [[{ node: rootNode.name, type: 'main', index: 0 }]] } },
	};
}

/** The canvas plus of `node`'s sub-node slot `slot` (an ai_* connection type). */
const slotPlus = (page: Page, nodeName: string, slot: string) =>
	page.locator(`[data-test-id="canvas-node"][data-node-name="${nodeName}"]`).locator('xpath=ancestor::*[contains(@class,"vue-flow__node")][1]').locator(`[data-handleid="inputs/${slot}/0"] [data-test-id="canvas-handle-plus"]`);

/**
 * Clicks the listed node `name` in the open panel, then, for a community node, "Add to workflow"
 * on the details n8n shows first; closes the node's settings n8n opens once it is added.
 */
async function addFromPanel(page: Page, name: string) {
	await page.locator('[data-test-id="node-creator-item-name"]', { hasText: new RegExp(`^${name}$`) }).first().click();
	const added = page.locator(`[data-test-id="canvas-node"][data-node-name="${name}"]`);
	const addButton = page.getByRole('button', { name: 'Add to workflow' });
	await Promise.race([added.waitFor({ state: 'attached' }), addButton.waitFor({ state: 'visible' })]);
	if (await addButton.isVisible()) await addButton.click();
	await added.waitFor({ state: 'attached' });
	if (await page.locator('[data-test-id="ndv"]').isVisible()) await page.keyboard.press('Escape');
	await page.locator('[data-test-id="ndv"]').waitFor({ state: 'hidden' });
}

describe('e2e: the node panel in the editor (real n8n, Chromium)', () => {
	let n8n: N8nInstance | undefined;
	let model: OpenAiStandIn;
	let cookie = '';
	const creds = { ledger: '', openAi: '' };

	beforeAll(async () => {
		model = await openAiStandIn({ reply: (call) => `answer to ${String(call.body.messages?.at(-1)?.content)}` });
		n8n = await startN8n({ withPackage: true });
		cookie = await n8n.setupOwner();
		await n8n.createApiKey();
	});

	afterAll(async () => {
		if (n8n) console.log(`n8n log: ${n8n.logFile}`);
		await n8n?.stop();
		await model?.close();
		await ledger.drop();
	});

	test('a Dedupe Gate added from the panel, nothing set, no credential in the instance: New, then Duplicate (the Built-in ledger)', async () => {
		expect(await n8n!.api<{ data: unknown[] }>('GET', '/credentials').then((r) => r.data)).toEqual([]);
		const { id } = await n8n!.createWorkflow({
			name: 'editor panel built-in',
			settings: { executionOrder: 'v1' },
			nodes: [
				{ id: randomUUID(), name: 'When clicking \u2018Execute workflow\u2019', type: 'n8n-nodes-base.manualTrigger', typeVersion: 1, position: [0, 0], parameters: {} },
				{ id: randomUUID(), name: 'Order', type: 'n8n-nodes-base.set', typeVersion: 3.4, position: [220, 0], parameters: { assignments: { assignments: [{ id: randomUUID(), name: 'id', value: 'order-1', type: 'string' }] }, options: {} } },
			],
			connections: { 'When clicking \u2018Execute workflow\u2019': { main: [[{ node: 'Order', type: 'main', index: 0 }]] } },
		} as never);
		let outcomes: string[] = [];
		await inEditor(n8n!, cookie, `/workflow/${id}`, async (page) => {
			// The plus at the end of "Order", as a person continues a flow.
			await page.locator('[data-test-id="canvas-node"][data-node-name="Order"]').locator('xpath=ancestor::*[contains(@class,"vue-flow__node")][1]').locator('[data-handleid="outputs/main/0"] [data-test-id="canvas-handle-plus"]').click();
			await searchPanel(page, 'Dedupe Gate', ['Dedupe Gate']);
			await addFromPanel(page, 'Dedupe Gate');
			await page.keyboard.press('Control+s');
			for (let run = 0; run < 2; run++) {
				const before = (await n8n!.executions(id, { includeData: false })).length;
				await page.locator('[data-test-id="execute-workflow-button"]:not([aria-busy="true"]):enabled').click();
				const [latest] = await n8n!.waitForExecutions(id, before + 1, { includeData: true, timeoutMs: 60_000 });
				expect({ run, status: latest.status, error: JSON.stringify((latest as { data?: { resultData?: { error?: unknown } } }).data?.resultData?.error ?? null).slice(0, 400) }).toEqual({ run, status: 'success', error: 'null' });
				outcomes.push(['New', 'Duplicate', 'In Progress'].filter((_, output) => nodeOutput(latest, 'Dedupe Gate', output).length > 0).join());
			}
		});
		expect(outcomes).toEqual(['New', 'Duplicate']);
		const saved = await n8n!.api<SavedWorkflow>('GET', `/workflows/${id}`);
		const gate = saved.nodes.find((n) => n.name === 'Dedupe Gate')!;
		// Version 2, Ledger left at its default (n8n does not save it), and no credential.
		expect({ typeVersion: gate.typeVersion, backend: gate.parameters.backend, credentials: gate.credentials ?? null }).toEqual({ typeVersion: 2, backend: undefined, credentials: null });
	});

	test('AI Agent: "cache" in the Chat Model slot finds Prompt Cache Chat Model; added there with an OpenAI Chat Model under it, two runs make one model call', async () => {
		// One credential of each kind: the editor picks it for a node it adds, as for a person with one account.
		creds.ledger = (await n8n!.createCredential({ name: 'Idempotency Ledger', type: 'idempotencyPostgresApi', data: ledgerCredentialData(table) })).id;
		creds.openAi = (await n8n!.createCredential({ name: 'OpenAI stand-in', type: 'openAiApi', data: { apiKey: 'sk-e2e', url: `${model.url}/v1`, header: false } })).id;
		const path = `editor-agent-${randomUUID().slice(0, 8)}`;
		const { id } = await n8n!.createWorkflow(bareFlow('agent', path) as never);
		let saved: SavedWorkflow | undefined;
		await inEditor(n8n!, cookie, `/workflow/${id}`, async (page) => {
			await slotPlus(page, 'AI Agent', 'ai_languageModel').click();
			for (const term of ['cache', 'prompt cache']) {
				const shown = await searchPanel(page, term, [CACHE]);
				expect({ term, shown, found: shown.includes(CACHE) }).toMatchObject({ term, found: true });
			}
			await addFromPanel(page, CACHE);
			await slotPlus(page, CACHE, 'ai_languageModel').click();
			await searchPanel(page, 'OpenAI Chat Model', ['OpenAI Chat Model']);
			await addFromPanel(page, 'OpenAI Chat Model');
			await page.keyboard.press('Control+s');
			// Saved once the API has what the canvas shows.
			for (let i = 0; i < 40; i++) {
				saved = await n8n!.api<SavedWorkflow>('GET', `/workflows/${id}`);
				if (saved.nodes.some((n) => n.name === 'OpenAI Chat Model')) break;
				await page.waitForTimeout(250);
			}
		});

		// What the editor saved: the chain of slots, and the credentials it picked.
		if (!saved) return; // no Chromium outside CI: inEditor warned and skipped
		expect(saved.connections[CACHE]?.ai_languageModel?.[0]?.map((c) => c.node)).toEqual(['AI Agent']);
		expect(saved.connections['OpenAI Chat Model']?.ai_languageModel?.[0]?.map((c) => c.node)).toEqual([CACHE]);
		const cacheNode = saved.nodes.find((n) => n.name === CACHE)!;
		const openAiNode = saved.nodes.find((n) => n.name === 'OpenAI Chat Model')!;
		expect(cacheNode.type).toBe('n8n-nodes-idempotency.promptCacheChatModel');

		// The two settings a person types in the panels: the model's temperature 0 (only such calls
		// are cached) and a model name the stand-in takes; the credentials the editor picked are kept.
		// The stand-in speaks Chat Completions, not the Responses API the node now defaults to.
		openAiNode.parameters = { ...openAiNode.parameters, model: { __rl: true, mode: 'id', value: 'gpt-4o-mini' }, responsesApiEnabled: false, options: { temperature: 0, maxRetries: 0 } };
		openAiNode.credentials ??= { openAiApi: { id: creds.openAi, name: 'OpenAI stand-in' } };
		cacheNode.credentials ??= { idempotencyPostgresApi: { id: creds.ledger, name: 'Idempotency Ledger' } };
		await n8n!.api('PUT', `/workflows/${id}`, { name: saved.name, nodes: saved.nodes, connections: saved.connections, settings: saved.settings ?? { executionOrder: 'v1' } });
		await n8n!.activate(id);
		await n8n!.waitForWebhook(path);

		const before = model.calls.length;
		const answers = [];
		for (let run = 0; run < 2; run++) {
			const res = await n8n!.post(path, { question: 'What is the capital of France?' });
			expect({ status: res.status, text: res.status === 200 ? '' : res.text.slice(0, 800) }).toEqual({ status: 200, text: '' });
			answers.push(res.body.output);
		}
		expect(model.calls.length - before).toBe(1);
		expect(answers).toEqual(['answer to What is the capital of France?', 'answer to What is the capital of France?']);
	});

	test('Basic LLM Chain: its Chat Model slot finds Prompt Cache Chat Model by "cache"', async () => {
		const { id } = await n8n!.createWorkflow(bareFlow('chain', `editor-chain-${randomUUID().slice(0, 8)}`) as never);
		await inEditor(n8n!, cookie, `/workflow/${id}`, async (page) => {
			await slotPlus(page, 'Basic LLM Chain', 'ai_languageModel').click();
			expect(await searchPanel(page, 'cache', [CACHE])).toContain(CACHE);
		});
	});

	test('the main panel shows the node that fits among the first three for the words people type, and lists each node by its other names', async () => {
		await inEditor(n8n!, cookie, '/workflow/new', async (page) => {
			await page.locator('[data-test-id="node-creator-plus-button"]').click();
			// [term, node, where]: 3 = among the first three, 0 = anywhere in the list.
			const expected: Array<[string, string, 3 | 0]> = [
				['dedupe', 'Dedupe Gate', 3],
				['duplicate', 'Dedupe Gate', 3],
				['idempotent', 'Dedupe Gate', 3],
				['once', 'Dedupe Gate', 3],
				['exactly once', 'Dedupe Gate', 3],
				['retry', 'Dedupe Gate', 3],
				['cache', 'Prompt Cache', 3],
				['prompt cache', 'Prompt Cache', 3],
				['send once', 'Guarded Send', 3],
				['remove duplicates', 'Dedupe Gate', 0],
				['LLM', 'Prompt Cache', 0],
				['prompt', 'Prompt Cache', 0],
				['idempotency', 'Mark Step Done', 0],
				['idempotency', 'Idempotency Ledger', 0],
			];
			const found: Array<{ term: string; name: string; where: number; place: number }> = [];
			for (const [term, name, where] of expected) {
				const shown = await searchPanel(page, term, [name]);
				found.push({ term, name, where, place: shown.indexOf(name) + 1 });
			}
			console.log(`main panel, place of each node:\n${found.map((f) => `${f.term}: ${f.name} ${f.place || 'not listed'}`).join('\n')}`);
			for (const f of found) expect({ ...f, ok: f.place > 0 && (f.where === 0 || f.place <= f.where) }).toMatchObject({ term: f.term, name: f.name, ok: true });
		});
	});
});
