/**
 * The workflows the README and docs screenshots show: the package's nodes in the flows they are
 * made for. Node ids are fixed so the editor's /workflow/<id>/<nodeId> URLs are known in advance.
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const PKG = 'n8n-nodes-idempotency';

/** Node ids (stable, so each parameter panel can be opened by URL). */
export const ids = {
	webhook: '6f1c2a8e-0d4b-4c1e-9a51-000000000001',
	dedupeGate: '6f1c2a8e-0d4b-4c1e-9a51-000000000002',
	guardedSend: '6f1c2a8e-0d4b-4c1e-9a51-000000000003',
	markStepDone: '6f1c2a8e-0d4b-4c1e-9a51-000000000004',
	alreadyHandled: '6f1c2a8e-0d4b-4c1e-9a51-000000000005',
	retryLater: '6f1c2a8e-0d4b-4c1e-9a51-000000000006',
	alreadySent: '6f1c2a8e-0d4b-4c1e-9a51-000000000007',
	flagForReview: '6f1c2a8e-0d4b-4c1e-9a51-000000000008',
	chatTrigger: '6f1c2a8e-0d4b-4c1e-9a51-000000000011',
	cacheLookup: '6f1c2a8e-0d4b-4c1e-9a51-000000000012',
	askModel: '6f1c2a8e-0d4b-4c1e-9a51-000000000013',
	cacheStore: '6f1c2a8e-0d4b-4c1e-9a51-000000000014',
	useCached: '6f1c2a8e-0d4b-4c1e-9a51-000000000015',
	schedule: '6f1c2a8e-0d4b-4c1e-9a51-000000000021',
	ledger: '6f1c2a8e-0d4b-4c1e-9a51-000000000022',
	notifyOps: '6f1c2a8e-0d4b-4c1e-9a51-000000000023',
};

/**
 * The parameter-panel images: one node of each type in a fresh state, every setting at its
 * default, as a node is when it is first put on the canvas (only the ledger credential is set).
 */
export const panels = [
	{ file: 'dedupe-gate.png', full: 'dedupe-gate-editor.png', type: 'dedupeGate', name: 'Dedupe Gate' },
	{ file: 'guarded-send.png', type: 'guardedSend', name: 'Guarded Send' },
	{ file: 'mark-step-done.png', type: 'markStepDone', name: 'Mark Step Done' },
	{ file: 'prompt-cache.png', type: 'promptCache', name: 'Prompt Cache' },
	{ file: 'idempotency-ledger.png', type: 'idempotencyLedger', name: 'Idempotency Ledger' },
	{ file: 'start-step.png', type: 'startStep', name: 'Start Step' },
];

/** The workflow of fresh nodes that the panel images open (no connections). */
export function freshWorkflow({ credential }) {
	const ledger = { idempotencyPostgresApi: { id: credential.id, name: credential.name } };
	return {
		name: 'Fresh nodes (parameter panels)',
		nodes: panels.map((panel, i) => ({
			id: randomUUID(),
			name: panel.name,
			type: `${PKG}.${panel.type}`,
			typeVersion: 1,
			position: [i * 260, 0],
			parameters: {},
			credentials: ledger,
		})),
		connections: {},
		settings: { executionOrder: 'v1' },
	};
}

/** The flows, by the names of their nodes; a workflow may hold any of them. */
export const flows = {
	orders: ['Webhook', 'Dedupe Gate', 'Guarded Send', 'Mark Step Done', 'Already Handled', 'Retry Later', 'Already Sent', 'Flag for Review'],
	llm: ['When Clicking Execute', 'Prompt Cache Lookup', 'Use Cached Answer', 'Ask the Model', 'Prompt Cache Store'],
	operator: ['Every Hour', 'List Stuck Keys', 'Notify Ops'],
};

/**
 * The workflow JSON for the public API (name, nodes, connections, settings), holding the given
 * flows (all by default); `credential` is the Idempotency PostgreSQL credential the nodes use.
 */
export function buildWorkflow({ credential, name = 'Idempotency: safe to run twice', only = Object.keys(flows) }) {
	const keep = new Set(only.flatMap((flow) => flows[flow]));
	const ledger = { idempotencyPostgresApi: { id: credential.id, name: credential.name } };
	const noOp = (id, name, position) => ({ id, name, type: 'n8n-nodes-base.noOp', typeVersion: 1, position, parameters: {} });
	const nodes = [
		// Main flow: an order webhook, claimed once, a CRM call sent once, the unit of work completed.
		{
			id: ids.webhook,
			name: 'Webhook',
			type: 'n8n-nodes-base.webhook',
			typeVersion: 2,
			position: [0, 200],
			webhookId: randomUUID(),
			parameters: { httpMethod: 'POST', path: 'orders', options: {} },
		},
		{
			id: ids.dedupeGate,
			name: 'Dedupe Gate',
			type: `${PKG}.dedupeGate`,
			typeVersion: 1,
			position: [260, 200],
			credentials: ledger,
			parameters: { backend: 'postgres', keySource: 'field', keyField: 'body.orderId', mode: 'lease' },
		},
		{
			id: ids.guardedSend,
			name: 'Guarded Send',
			type: `${PKG}.guardedSend`,
			typeVersion: 1,
			position: [560, 80],
			credentials: ledger,
			parameters: {
				backend: 'postgres',
				channel: 'http',
				method: 'POST',
				url: 'https://crm.example.com/api/orders',
				sendBody: true,
				bodyContentType: 'json',
				jsonBody: '={{ JSON.stringify({ orderId: $json.body.orderId, total: $json.body.total }) }}',
				options: { step: 'crm' },
			},
		},
		{
			id: ids.markStepDone,
			name: 'Mark Step Done',
			type: `${PKG}.markStepDone`,
			typeVersion: 1,
			position: [880, -40],
			credentials: ledger,
			parameters: { backend: 'postgres', status: 'completed', resultFrom: 'item' },
		},
		noOp(ids.alreadyHandled, 'Already Handled', [560, 300]),
		noOp(ids.retryLater, 'Retry Later', [560, 460]),
		noOp(ids.alreadySent, 'Already Sent', [880, 120]),
		noOp(ids.flagForReview, 'Flag for Review', [880, 280]),

		// An LLM call asked once per distinct prompt: Lookup, the model on a miss, Store.
		{
			id: ids.chatTrigger,
			name: 'When Clicking Execute',
			type: 'n8n-nodes-base.manualTrigger',
			typeVersion: 1,
			position: [0, 760],
			parameters: {},
		},
		{
			id: ids.cacheLookup,
			name: 'Prompt Cache Lookup',
			type: `${PKG}.promptCache`,
			typeVersion: 1,
			position: [260, 760],
			credentials: ledger,
			parameters: {
				backend: 'postgres',
				operation: 'lookup',
				promptSource: 'text',
				model: 'gpt-4o-mini',
				systemPrompt: 'You summarise support tickets in one sentence.',
				prompt: '={{ $json.ticket }}',
			},
		},
		{
			id: ids.useCached,
			name: 'Use Cached Answer',
			type: 'n8n-nodes-base.noOp',
			typeVersion: 1,
			position: [560, 680],
			parameters: {},
		},
		{
			id: ids.askModel,
			name: 'Ask the Model',
			type: 'n8n-nodes-base.httpRequest',
			typeVersion: 4.2,
			position: [560, 860],
			parameters: {
				method: 'POST',
				url: 'https://api.openai.com/v1/chat/completions',
				sendBody: true,
				specifyBody: 'json',
				jsonBody: '={{ JSON.stringify($json.request) }}',
				options: {},
			},
		},
		{
			id: ids.cacheStore,
			name: 'Prompt Cache Store',
			type: `${PKG}.promptCache`,
			typeVersion: 1,
			position: [860, 860],
			credentials: ledger,
			parameters: { backend: 'postgres', operation: 'store', hashSource: 'lookup', lookupNode: 'Prompt Cache Lookup' },
		},

		// The operator's side: every hour, list keys whose lease ran out.
		{
			id: ids.schedule,
			name: 'Every Hour',
			type: 'n8n-nodes-base.scheduleTrigger',
			typeVersion: 1.2,
			position: [0, 1120],
			parameters: { rule: { interval: [{ field: 'hours' }] } },
		},
		{
			id: ids.ledger,
			name: 'List Stuck Keys',
			type: `${PKG}.idempotencyLedger`,
			typeVersion: 1,
			position: [260, 1120],
			credentials: ledger,
			parameters: { backend: 'postgres', resource: 'key', operation: 'list', status: 'stuck' },
		},
		noOp(ids.notifyOps, 'Notify Ops', [560, 1120]),
	];
	const to = (node, index = 0) => ({ node, type: 'main', index });
	const connections = {
		Webhook: { main: [[to('Dedupe Gate')]] },
		'Dedupe Gate': { main: [[to('Guarded Send')], [to('Already Handled')], [to('Retry Later')]] },
		'Guarded Send': { main: [[to('Mark Step Done')], [to('Already Sent')], [to('Flag for Review')]] },
		'When Clicking Execute': { main: [[to('Prompt Cache Lookup')]] },
		'Prompt Cache Lookup': { main: [[to('Use Cached Answer')], [to('Ask the Model')]] },
		'Ask the Model': { main: [[to('Prompt Cache Store')]] },
		'Every Hour': { main: [[to('List Stuck Keys')]] },
		'List Stuck Keys': { main: [[to('Notify Ops')]] },
	};
	for (const [from, { main }] of Object.entries(connections)) {
		if (!keep.has(from)) delete connections[from];
		else connections[from] = { main: main.map((targets) => targets.filter((t) => keep.has(t.node))) };
	}
	return { name, nodes: nodes.filter((n) => keep.has(n.name)), connections, settings: { executionOrder: 'v1' } };
}

/**
 * Guarded Send as the tool of n8n's AI Agent, as test/e2e/agentTool.e2e.test.ts runs it: the key
 * is built from what the model fills in for the recipient and the purpose, never from its text.
 * `openAi` is an OpenAI credential (the model node shows a warning without one).
 */
export function agentWorkflow({ credential, openAi }) {
	const recipient = "$fromAI('recipient', 'Email address of the lead', 'string')";
	return {
		name: 'AI Agent with Guarded Send as its tool',
		nodes: [
			{
				id: randomUUID(),
				name: 'Webhook',
				type: 'n8n-nodes-base.webhook',
				typeVersion: 2,
				position: [0, 0],
				webhookId: randomUUID(),
				parameters: { httpMethod: 'POST', path: 'new-lead', responseMode: 'lastNode', options: {} },
			},
			{
				id: randomUUID(),
				name: 'AI Agent',
				type: '@n8n/n8n-nodes-langchain.agent',
				typeVersion: 3.1,
				position: [260, 0],
				parameters: { promptType: 'define', text: '={{ $json.body.message }}', options: {} },
			},
			{
				id: randomUUID(),
				name: 'OpenAI Chat Model',
				type: '@n8n/n8n-nodes-langchain.lmChatOpenAi',
				typeVersion: 1.2,
				position: [180, 240],
				credentials: { openAiApi: { id: openAi.id, name: openAi.name } },
				parameters: { model: { __rl: true, mode: 'id', value: 'gpt-4o-mini' }, options: {} },
			},
			{
				id: randomUUID(),
				name: 'Guarded Send',
				type: `${PKG}.guardedSendTool`,
				typeVersion: 1,
				position: [440, 240],
				credentials: { idempotencyPostgresApi: { id: credential.id, name: credential.name } },
				parameters: {
					channel: 'http',
					method: 'POST',
					url: 'https://mail.example.com/api/messages',
					sendBody: true,
					bodyContentType: 'json',
					jsonBody: `={{ JSON.stringify({ to: ${recipient}, text: $fromAI('text', 'The welcome message', 'string') }) }}`,
					keyFrom: 'expression',
					keyExpression: `={{ ${recipient} }}-{{ $fromAI('purpose', 'What the message is for, e.g. welcome', 'string') }}`,
				},
			},
		],
		connections: {
			Webhook: { main: [[{ node: 'AI Agent', type: 'main', index: 0 }]] },
			'OpenAI Chat Model': { ai_languageModel: [[{ node: 'AI Agent', type: 'ai_languageModel', index: 0 }]] },
			'Guarded Send': { ai_tool: [[{ node: 'AI Agent', type: 'ai_tool', index: 0 }]] },
		},
		settings: { executionOrder: 'v1' },
	};
}

/**
 * A Start Step region: examples/region-http-invoice.json as a user imports it, with the ledger
 * credential on our nodes and `billing` (an HTTP Header Auth credential) on the HTTP Request nodes.
 */
export function regionWorkflow({ credential, billing }) {
	const file = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'examples', 'region-http-invoice.json');
	const example = JSON.parse(fs.readFileSync(file, 'utf8'));
	const nodes = example.nodes.map((node) => {
		if (node.credentials?.idempotencyPostgresApi) return { ...node, credentials: { idempotencyPostgresApi: { id: credential.id, name: credential.name } } };
		if (node.credentials?.httpHeaderAuth) return { ...node, credentials: { httpHeaderAuth: { id: billing.id, name: billing.name } } };
		return node;
	});
	return { name: example.name, nodes, connections: example.connections, settings: example.settings ?? { executionOrder: 'v1' } };
}
