/**
 * Guarded Send as the tool of n8n's own AI Agent, in a REAL n8n (the newest version of
 * test/e2e/support/matrix.js), with n8n's OpenAI Chat Model pointed at a local OpenAI-compatible
 * server that plays the model: for each conversation it calls the tool 2 or 3 times for the same
 * lead (sometimes reworded, as models do), then answers. The server records every tool result the
 * agent hands back to it, which is what a real model provider would receive.
 *
 *   Webhook (a secret signature header) → AI Agent ─ ai_languageModel ← OpenAI Chat Model
 *                                                  └ ai_tool ← Guarded Send (HTTP, Key = $fromAI recipient + purpose)
 *
 * Required: one send per lead at the destination; every tool result a sentence (never empty) and
 * none carries the webhook's headers.
 */
import { randomUUID } from 'crypto';
import http from 'http';
import type { AddressInfo } from 'net';

import { readBody, stripeLikeServer, type StripeLikeServer } from '../support/destinations';
import { agentTypeVersion, startN8n, type N8nInstance, type WorkflowJson } from './support/n8n';
import { ledgerCredentialData, LedgerTables, nodePlacer, uniqueLedgerTable } from './support/standIns';

const PKG = 'n8n-nodes-idempotency';
const table = uniqueLedgerTable('e2e_agent');
const ledger = new LedgerTables(table);
const SECRET = `sig-${randomUUID()}`;
const PATH = 'agent-tool';

/* ------------------------------------------------------------------------------------------ */
/* The model: an OpenAI-compatible chat completions server that calls the tool as scripted     */
/* ------------------------------------------------------------------------------------------ */

interface Model {
	url: string;
	/** Every tool result the agent sent back, by conversation (the lead). */
	toolResults: Map<string, string[]>;
	calls: number;
	close(): Promise<void>;
}

interface Message {
	role: string;
	content?: string | null;
	tool_call_id?: string;
}

async function model(): Promise<Model> {
	const toolResults = new Map<string, string[]>();
	let calls = 0;
	const server = http.createServer(async (req, res) => {
		const body = JSON.parse((await readBody(req)) || '{}') as { messages?: Message[]; tools?: Array<{ function: { name: string } }> };
		calls++;
		const messages = body.messages ?? [];
		const user = messages.find((m) => m.role === 'user')?.content ?? '';
		const spec = /lead=(\S+); calls=(\d); reword=(\d)/.exec(user);
		const answer = (message: Record<string, unknown>, finish: string) => {
			res.writeHead(200, { 'content-type': 'application/json' });
			res.end(
				JSON.stringify({
					id: `chatcmpl-${calls}`,
					object: 'chat.completion',
					created: Math.floor(Date.now() / 1000),
					model: 'gpt-4o-mini',
					choices: [{ index: 0, message: { role: 'assistant', ...message }, finish_reason: finish }],
					usage: { prompt_tokens: 50, completion_tokens: 10, total_tokens: 60 },
				}),
			);
		};
		if (!spec) return answer({ content: 'I do not know what to do.' }, 'stop');
		const [, lead, wanted, reword] = spec;
		const results = messages.filter((m) => m.role === 'tool').map((m) => String(m.content ?? ''));
		toolResults.set(lead, results);
		if (results.length >= Number(wanted) || !body.tools?.length) return answer({ content: `Done with ${lead}.` }, 'stop');
		const text = reword === '1' && results.length > 0 ? `Hi ${lead}, a warm welcome from all of us (${results.length})` : `Welcome, ${lead}!`;
		answer(
			{
				content: null,
				tool_calls: [
					{
						id: `call_${calls}`,
						type: 'function',
						function: { name: body.tools[0].function.name, arguments: JSON.stringify({ recipient: lead, purpose: 'welcome', text }) },
					},
				],
			},
			'tool_calls',
		);
	});
	await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
	return {
		url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
		toolResults,
		get calls() {
			return calls;
		},
		close: () => new Promise<void>((resolve) => server.close(() => resolve())),
	};
}

/* ------------------------------------------------------------------------------------------ */

function workflow(ledgerRef: { id: string; name: string }, openAiRef: { id: string; name: string }, destinationUrl: string): WorkflowJson {
	const node = nodePlacer();
	const recipient = "$fromAI('recipient', 'Email address of the lead', 'string')";
	return {
		name: 'agent with Guarded Send as its tool',
		nodes: [
			node('Webhook', 'n8n-nodes-base.webhook', 2, { httpMethod: 'POST', path: PATH, responseMode: 'lastNode', options: {} }, { webhookId: randomUUID() }),
			node('AI Agent', '@n8n/n8n-nodes-langchain.agent', agentTypeVersion(), { promptType: 'define', text: '={{ $json.body.message }}', options: {} }),
			node('OpenAI Chat Model', '@n8n/n8n-nodes-langchain.lmChatOpenAi', 1.2, { model: { __rl: true, mode: 'id', value: 'gpt-4o-mini' }, options: {} }, { credentials: { openAiApi: openAiRef } }),
			node(
				'Email Lead',
				`${PKG}.guardedSendTool`,
				1,
				{
					channel: 'http',
					method: 'POST',
					url: `${destinationUrl}/v1/charges`,
					sendBody: true,
					bodyContentType: 'json',
					jsonBody: `={{ JSON.stringify({ to: ${recipient}, text: $fromAI('text', 'The welcome message', 'string') }) }}`,
					keyFrom: 'expression',
					keyExpression: `={{ ${recipient} }}-{{ $fromAI('purpose', 'What the message is for, e.g. welcome', 'string') }}`,
				},
				{ credentials: { idempotencyPostgresApi: ledgerRef } },
			),
		],
		connections: {
			Webhook: { main: [[{ node: 'AI Agent', type: 'main', index: 0 }]] },
			'OpenAI Chat Model': { ai_languageModel: [[{ node: 'AI Agent', type: 'ai_languageModel', index: 0 }]] },
			'Email Lead': { ai_tool: [[{ node: 'AI Agent', type: 'ai_tool', index: 0 }]] },
		},
		settings: { executionOrder: 'v1' },
	} as WorkflowJson;
}

let n8n: N8nInstance | undefined;
let llm: Model;
let destination: StripeLikeServer;

beforeAll(async () => {
	llm = await model();
	destination = await stripeLikeServer();
	n8n = await startN8n({ withPackage: true });
	await n8n.setupOwner();
	await n8n.createApiKey();
	const ledgerCredential = await n8n.createCredential({ name: `Ledger ${table}`, type: 'idempotencyPostgresApi', data: ledgerCredentialData(table) });
	const openAi = await n8n.createCredential({ name: 'OpenAI (local)', type: 'openAiApi', data: { apiKey: 'sk-local', url: `${llm.url}/v1` } });
	await n8n.deploy(workflow({ id: ledgerCredential.id, name: ledgerCredential.name }, { id: openAi.id, name: openAi.name }, destination.url));
}, 300_000);

afterAll(async () => {
	if (n8n) console.log(`n8n ${n8n.runtime.version} log: ${n8n.logFile}`);
	await n8n?.stop();
	await llm?.close();
	await destination?.close();
	await ledger.drop();
});

test('10 conversations, each calling the tool 2 or 3 times for one lead (some reworded): 1 send per lead; every tool result is a sentence and none carries the webhook\'s headers', async () => {
	const run = Date.now().toString(36);
	const conversations = Array.from({ length: 10 }, (_, i) => ({ lead: `lead${i}-${run}@example.com`, calls: 2 + (i % 2), reword: i % 3 === 0 ? 1 : 0 }));
	const answers = await Promise.all(
		conversations.map((c) =>
			n8n!.post(PATH, { message: `lead=${c.lead}; calls=${c.calls}; reword=${c.reword}` }, { headers: { 'x-signature': SECRET }, timeoutMs: 120_000 }),
		),
	);
	expect(answers.map((a) => a.status)).toEqual(conversations.map(() => 200));

	const sends = (lead: string) => destination.actions.filter((a) => (a.body as { to?: string })?.to === lead).length;
	const report = conversations.map((c) => ({ lead: c.lead, sends: sends(c.lead), results: llm.toolResults.get(c.lead) ?? [] }));
	console.log(`agent tool results:\n${report.map((r) => `  ${r.lead}: ${r.sends} send(s); ${r.results.join(' | ')}`).join('\n')}`);

	for (const [i, r] of report.entries()) {
		expect(r.sends).toBe(1);
		expect(r.results).toHaveLength(conversations[i].calls);
		for (const result of r.results) {
			expect(result.trim()).not.toBe('');
			expect(result).not.toContain(SECRET);
			expect(result.toLowerCase()).not.toContain('x-signature');
			expect(result).toMatch(/"response":"(Sent|Already sent)/);
		}
		expect(r.results[0]).toMatch(/Sent \(message ID ch_/);
		for (const later of r.results.slice(1)) expect(later).toMatch(/Already sent on .*do not retry/i);
	}
}, 300_000);
