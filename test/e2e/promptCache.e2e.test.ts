/**
 * Prompt Cache in a flow, in a real n8n (each version of test/e2e/support/matrix.js, the package installed the user's way):
 *
 *   Webhook (question) → Build request (Set) → Prompt Cache Lookup (API Request Body)
 *     ├─ Hit ──────────────────────────────────────────────────────────→ Answer (Set)
 *     └─ Miss → Ask the model (HTTP Request, POST /v1/chat/completions) → Prompt Cache Store → Answer
 *
 * The model is an OpenAI-compatible stand-in in this jest process that counts its calls and
 * numbers its answers. Proves: three identical questions, one after the other, cost ONE model
 * call and all three webhook answers carry that call's text; three identical questions at the
 * same moment also cost one call (the other two runs wait for the first run's answer); a
 * different question is a new call. The ledger rows are read with pg.
 */
import { randomUUID } from 'crypto';

import { nodeOutput, startN8n, type N8nInstance, type WorkflowJson } from './support/n8n';
import { ledgerCredentialData, LedgerTables, openAiStandIn, uniqueLedgerTable, workflowNode, type OpenAiStandIn } from './support/standIns';

const PKG = 'n8n-nodes-idempotency';
const table = uniqueLedgerTable('e2e_prompt_cache');
const ledger = new LedgerTables(table);

function promptCacheFlow(webhookPath: string, modelUrl: string, credentialId: string, lookupOptions: Record<string, unknown> = {}): WorkflowJson {
	const ledgerCredential = { idempotencyPostgresApi: { id: credentialId, name: 'Ledger (e2e)' } };
	const node = (name: string, type: string, typeVersion: number, x: number, y: number, parameters: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
		workflowNode(name, type, typeVersion, [x, y], parameters, extra);
	return {
		name: `e2e prompt cache ${webhookPath}`,
		nodes: [
			node('Webhook', 'n8n-nodes-base.webhook', 2, 0, 0, { httpMethod: 'POST', path: webhookPath, responseMode: 'lastNode', options: {} }, { webhookId: randomUUID() }),
			node('Build request', 'n8n-nodes-base.set', 3.4, 220, 0, {
				assignments: {
					assignments: [
						{
							id: randomUUID(),
							name: 'body',
							type: 'object',
							value: '={{ { model: "gpt-4o-mini", temperature: 0, messages: [{ role: "system", content: "Answer in one sentence." }, { role: "user", content: $json.body.question }] } }}',
						},
					],
				},
				options: {},
			}),
			node(
				'Prompt Cache Lookup',
				`${PKG}.promptCache`,
				1,
				440,
				0,
				{ operation: 'lookup', promptSource: 'body', requestBody: '={{ $json.body }}', options: lookupOptions },
				{ credentials: ledgerCredential },
			),
			node('Ask the model', 'n8n-nodes-base.httpRequest', 4.2, 660, 120, {
				method: 'POST',
				url: `${modelUrl}/v1/chat/completions`,
				sendBody: true,
				specifyBody: 'json',
				jsonBody: '={{ JSON.stringify($json.body) }}',
				options: {},
			}),
			node('Prompt Cache Store', `${PKG}.promptCache`, 1, 880, 120, { operation: 'store' }, { credentials: ledgerCredential }),
			node('Answer', 'n8n-nodes-base.set', 3.4, 1100, 0, {
				assignments: {
					assignments: [
						{ id: randomUUID(), name: 'answer', type: 'string', value: '={{ $json.choices[0].message.content }}' },
						{ id: randomUUID(), name: 'cache', type: 'string', value: '={{ $json.idempotency.outcome }}' },
						{ id: randomUUID(), name: 'promptHash', type: 'string', value: '={{ $json.idempotency.promptHash }}' },
					],
				},
				options: {},
			}),
		],
		connections: {
			Webhook: { main: [[{ node: 'Build request', type: 'main', index: 0 }]] },
			'Build request': { main: [[{ node: 'Prompt Cache Lookup', type: 'main', index: 0 }]] },
			'Prompt Cache Lookup': {
				main: [
					[{ node: 'Answer', type: 'main', index: 0 }],
					[{ node: 'Ask the model', type: 'main', index: 0 }],
				],
			},
			'Ask the model': { main: [[{ node: 'Prompt Cache Store', type: 'main', index: 0 }]] },
			'Prompt Cache Store': { main: [[{ node: 'Answer', type: 'main', index: 0 }]] },
		},
		settings: { executionOrder: 'v1' },
	};
}

/** Webhook → Prompt Cache Get Stats of a shared namespace, answered with the stats. */
function statsFlow(webhookPath: string, credentialId: string, namespace: string): WorkflowJson {
	return {
		name: `e2e prompt cache stats ${webhookPath}`,
		nodes: [
			{ id: randomUUID(), name: 'Webhook', type: 'n8n-nodes-base.webhook', typeVersion: 2, position: [0, 0], webhookId: randomUUID(), parameters: { httpMethod: 'POST', path: webhookPath, responseMode: 'lastNode', options: {} } },
			{
				id: randomUUID(),
				name: 'Stats',
				type: `${PKG}.promptCache`,
				typeVersion: 1,
				position: [220, 0],
				parameters: { operation: 'stats', scope: 'shared', namespace },
				credentials: { idempotencyPostgresApi: { id: credentialId, name: 'Ledger (e2e)' } },
			},
		],
		connections: { Webhook: { main: [[{ node: 'Stats', type: 'main', index: 0 }]] } },
		settings: { executionOrder: 'v1' },
	};
}

describe('e2e: Prompt Cache in a flow (real n8n, OpenAI-compatible stand-in)', () => {
	let n8n: N8nInstance | undefined;
	let model: OpenAiStandIn;
	let workflowId: string;
	let credentialId: string;
	const figures: string[] = [];

	beforeAll(async () => {
		model = await openAiStandIn({ delayMs: 1500 });
		n8n = await startN8n({ withPackage: true });
		await n8n.setupOwner();
		await n8n.createApiKey();
		const credential = await n8n.createCredential({ name: 'Ledger (e2e)', type: 'idempotencyPostgresApi', data: ledgerCredentialData(table) });
		credentialId = credential.id;
		workflowId = await n8n.deploy(promptCacheFlow('ask', model.url, credential.id));
		figures.push(`n8n boot ${Math.round(n8n.bootMs)} ms`);
	});

	afterAll(async () => {
		if (n8n) console.log(`n8n log: ${n8n.logFile}\nprompt cache e2e figures: ${figures.join('; ')}`);
		await n8n?.stop();
		await model?.close();
		await ledger.drop();
	});

	test('three identical questions one after the other: one model call, three identical answers', async () => {
		const question = 'What does idempotent mean?';
		const answers: Array<{ answer: string; cache: string; promptHash: string }> = [];
		for (let i = 0; i < 3; i++) {
			const res = await n8n!.post('ask', { question });
			expect(res.status).toBe(200);
			answers.push(res.body);
			figures.push(`sequential call ${i + 1}: ${Math.round(res.ms)} ms (${res.body?.cache})`);
		}
		expect(model.calls).toHaveLength(1);
		expect(model.calls[0].body.messages?.at(-1)?.content).toBe(question);
		// All three carry the text of that one call; the first paid for it, the other two were Hits.
		expect(answers.map((a) => a.answer)).toEqual(Array(3).fill(`answer #1 to: ${question}`));
		expect(answers.map((a) => a.cache)).toEqual(['stored', 'hit', 'hit']);
		expect(new Set(answers.map((a) => a.promptHash)).size).toBe(1);

		// What n8n recorded: the model node ran in the first execution only.
		const executions = await n8n!.waitForExecutions(workflowId, 3, { includeData: true });
		const ranModel = executions.filter((e) => e.data?.resultData.runData['Ask the model']);
		expect(ranModel).toHaveLength(1);
		expect(executions.every((e) => e.status === 'success')).toBe(true);
		const hitExecutions = executions.filter((e) => nodeOutput(e, 'Prompt Cache Lookup', 0).length === 1);
		expect(hitExecutions).toHaveLength(2);

		// One cache entry in the ledger, completed, holding the answer.
		const rows = await ledger.rows(`step = 'prompt-cache'`);
		expect(rows).toHaveLength(1);
		expect(rows[0]).toMatchObject({ key: answers[0].promptHash, status: 'completed' });
		expect(JSON.stringify(rows[0].result)).toContain(`answer #1 to: ${question}`);
	});

	test('three identical questions at the same moment: still one model call, the other runs wait for its answer', async () => {
		const before = model.calls.length;
		const question = 'Name one prime number.';
		const responses = await Promise.all([0, 1, 2].map(() => n8n!.post('ask', { question })));
		expect(responses.map((r) => r.status)).toEqual([200, 200, 200]);
		const calls = model.calls.slice(before);
		expect(calls).toHaveLength(1);
		const expected = `answer #${calls[0].n} to: ${question}`;
		expect(responses.map((r) => r.body.answer)).toEqual([expected, expected, expected]);
		expect(responses.map((r) => r.body.cache).sort()).toEqual(['hit', 'hit', 'stored']);
		figures.push(`concurrent: ${responses.map((r) => `${Math.round(r.ms)} ms (${r.body.cache})`).join(', ')}`);
	});

	test('a different question is a new model call; the first question still hits', async () => {
		const before = model.calls.length;
		const other = await n8n!.post('ask', { question: 'What does idempotent mean in HTTP?' });
		expect(other.body.cache).toBe('stored');
		expect(model.calls.length).toBe(before + 1);
		const again = await n8n!.post('ask', { question: 'What does idempotent mean?' });
		expect(again.body).toMatchObject({ cache: 'hit', answer: 'answer #1 to: What does idempotent mean?' });
		expect(model.calls.length).toBe(before + 1);
	});

	test('shadow mode, 100 prompts with 40 repeats: 100 model calls and a would-have-hit rate of 40 %; the cache then makes 60 calls for the same prompts', async () => {
		const fast = await openAiStandIn({ reply: (call) => `answer to: ${call.body.messages?.at(-1)?.content}` });
		try {
			const run = Date.now().toString(36);
			const questions = [...Array.from({ length: 60 }, (_, i) => `Question ${i}?`), ...Array.from({ length: 40 }, (_, i) => `Question ${(i * 7) % 60}?`)];
			const namespaces = { shadow: `e2e-shadow-${run}`, normal: `e2e-normal-${run}` };
			await n8n!.deploy(promptCacheFlow(`shadow-${run}`, fast.url, credentialId, { namespace: namespaces.shadow, shadowMode: true }));
			await n8n!.deploy(promptCacheFlow(`normal-${run}`, fast.url, credentialId, { namespace: namespaces.normal }));
			await n8n!.deploy(statsFlow(`stats-shadow-${run}`, credentialId, namespaces.shadow));
			await n8n!.deploy(statsFlow(`stats-normal-${run}`, credentialId, namespaces.normal));

			const outcomes: Record<string, number> = {};
			for (const question of questions) {
				const res = await n8n!.post(`shadow-${run}`, { question });
				expect(res.status).toBe(200);
				outcomes[res.body.cache] = (outcomes[res.body.cache] ?? 0) + 1;
			}
			const shadowCalls = fast.calls.length;
			// Every prompt went to the model; the 40 repeats found an answer, kept it, and compared.
			expect(shadowCalls).toBe(100);
			expect(outcomes).toEqual({ stored: 60, not_stored: 40 });
			const shadowStats = (await n8n!.post(`stats-shadow-${run}`, {})).body;
			expect(shadowStats).toMatchObject({ lookups: 100, hits: 0, misses: 100 });
			expect(shadowStats.shadow).toMatchObject({ lookups: 100, wouldHit: 40, wouldHitRate: 0.4, compared: 40, differed: 0, differedRate: 0 });

			for (const question of questions) expect((await n8n!.post(`normal-${run}`, { question })).status).toBe(200);
			const normalCalls = fast.calls.length - shadowCalls;
			expect(normalCalls).toBe(60);
			const normalStats = (await n8n!.post(`stats-normal-${run}`, {})).body;
			expect(normalStats).toMatchObject({ lookups: 100, hits: 40, misses: 60, hitRate: 0.4, tokensSaved: 40 * 28 });
			figures.push(`shadow: ${shadowCalls} model calls, would-have-hit ${shadowStats.shadow.wouldHitRate}; normal: ${normalCalls} calls, hit rate ${normalStats.hitRate}`);
		} finally {
			await fast.close();
		}
	}, 300_000);
});
