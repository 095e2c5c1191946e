/**
 * Prompt Cache Chat Model in a real n8n (the newest version; the package installed the user's way),
 * between n8n's own nodes:
 *
 *   Webhook → AI Agent ─┬─ Chat Model: Prompt Cache Chat Model ← OpenAI Chat Model (lmChatOpenAi)
 *                       └─ Tool: Calculator
 *   Webhook → Basic LLM Chain ── Chat Model: Prompt Cache Chat Model ← OpenAI Chat Model
 *
 * The OpenAI Chat Model points (credential "openAiApi" with a custom base URL) at an
 * OpenAI-compatible stand-in in this jest process that counts its calls and answers questions
 * that ask to calculate with a tool call first. Proves, over 50 runs of which 20 repeat an
 * earlier question (10 of them at the same moment as the run they repeat): the model is called
 * exactly once per distinct request (tool-call rounds included), every repeat gets the answer
 * the first run got, and Get Stats of the Idempotency Ledger node counts the hits and the tokens
 * saved; in shadow mode all 50 runs reach the model and the would-have-hit rate is reported.
 * Faults: no model connected, a model that fails, and a ledger that is down (by default the
 * agent still answers with a warning on the run; with "Stop if the Ledger Is Down" it stops).
 */
import { createHash, randomUUID } from 'crypto';

import { agentTypeVersion, startN8n, type N8nExecution, type N8nInstance, type WorkflowJson } from './support/n8n';
import { ledgerCredentialData, LedgerTables, openAiStandIn, uniqueLedgerTable, workflowNode, type ChatCall, type ChatAnswer, type OpenAiStandIn } from './support/standIns';

const PKG = 'n8n-nodes-idempotency';
const LC = '@n8n/n8n-nodes-langchain';
const table = uniqueLedgerTable('e2e_chat_cache');
const ledger = new LedgerTables(table);
const CACHE = 'Prompt Cache Chat Model';

const node = (name: string, type: string, typeVersion: number, x: number, y: number, parameters: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
	workflowNode(name, type, typeVersion, [x, y], parameters, extra);

interface Creds {
	ledger: string;
	openAi: string;
}

/** Webhook → AI Agent (with the Calculator) or Basic LLM Chain, its Chat Model the cache around OpenAI Chat Model. */
function flow(kind: 'agent' | 'chain', path: string, creds: Creds, cacheOptions: Record<string, unknown>, opts: { noModel?: boolean; ledgerCredential?: string } = {}): WorkflowJson {
	const root =
		kind === 'agent'
			? node('AI Agent', `${LC}.agent`, agentTypeVersion(), 220, 0, { promptType: 'define', text: '={{ $json.body.question }}', options: {} })
			: node('Basic LLM Chain', `${LC}.chainLlm`, 1.7, 220, 0, { promptType: 'define', text: '={{ $json.body.question }}' });
	const nodes = [
		node('Webhook', 'n8n-nodes-base.webhook', 2, 0, 0, { httpMethod: 'POST', path, responseMode: 'lastNode', options: {} }, { webhookId: randomUUID() }),
		root,
		node(CACHE, `${PKG}.promptCacheChatModel`, 1, 220, 220, { options: cacheOptions }, { credentials: { idempotencyPostgresApi: { id: opts.ledgerCredential ?? creds.ledger, name: 'Ledger' } } }),
		node(
			'OpenAI Chat Model',
			`${LC}.lmChatOpenAi`,
			1.3,
			220,
			440,
			{ model: { __rl: true, value: 'gpt-4o-mini', mode: 'list', cachedResultName: 'gpt-4o-mini' }, responsesApiEnabled: false, options: { temperature: 0, maxRetries: 0 } },
			{ credentials: { openAiApi: { id: creds.openAi, name: 'OpenAI stand-in' } } },
		),
	];
	const connections: Record<string, unknown> = {
		Webhook: { main: [[{ node: root.name, type: 'main', index: 0 }]] },
		[CACHE]: { ai_languageModel: [[{ node: root.name, type: 'ai_languageModel', index: 0 }]] },
	};
	if (!opts.noModel) connections['OpenAI Chat Model'] = { ai_languageModel: [[{ node: CACHE, type: 'ai_languageModel', index: 0 }]] };
	if (kind === 'agent') {
		nodes.push(node('Calculator', `${LC}.toolCalculator`, 1, 440, 220, {}));
		connections.Calculator = { ai_tool: [[{ node: root.name, type: 'ai_tool', index: 0 }]] };
	}
	return { name: `e2e chat cache ${path}`, nodes, connections, settings: { executionOrder: 'v1' } };
}

/** Webhook → Idempotency Ledger Get Stats of a shared namespace. */
function statsFlow(path: string, creds: Creds, namespace: string): WorkflowJson {
	return {
		name: `e2e chat cache stats ${path}`,
		nodes: [
			node('Webhook', 'n8n-nodes-base.webhook', 2, 0, 0, { httpMethod: 'POST', path, responseMode: 'lastNode', options: {} }, { webhookId: randomUUID() }),
			node('Stats', `${PKG}.idempotencyLedger`, 1, 220, 0, { resource: 'ledger', operation: 'stats', scope: 'shared', namespace }, { credentials: { idempotencyPostgresApi: { id: creds.ledger, name: 'Ledger' } } }),
		],
		connections: { Webhook: { main: [[{ node: 'Stats', type: 'main', index: 0 }]] } },
		settings: { executionOrder: 'v1' },
	};
}

const lastMessage = (call: ChatCall) => call.body.messages?.at(-1);


/**
 * The stand-in's answers: "calculate X" → a call of the calculator tool (its id from the question,
 * as a real model's differs per call but the cache replays it), then, given the tool's result,
 * the result in words; a question with "fail" → HTTP 400; anything else → `answer #n to: …`.
 */
function answer(call: ChatCall): ChatAnswer | undefined {
	const last = lastMessage(call);
	if (last?.role === 'tool') return { content: `The result is ${String(last.content)}.` };
	const text = String(last?.content ?? '');
	if (text.includes('fail')) return { status: 400, error: 'The stand-in refuses this request' };
	const calc = /calculate (.+)$/.exec(text);
	if (calc && Array.isArray(call.body.tools) && call.body.tools.length > 0) {
		const id = `call_${createHash('sha256').update(text).digest('hex').slice(0, 12)}`;
		const tool = call.body.tools[0] as { function?: { name?: string } };
		return { toolCalls: [{ id, name: tool.function?.name ?? 'calculator', arguments: JSON.stringify({ input: calc[1] }) }] };
	}
	return undefined;
}

/** The request as the model sees it, to count distinct requests. */
const requestKey = (call: ChatCall) => JSON.stringify({ messages: call.body.messages, tools: call.body.tools ?? null, model: call.body.model, temperature: call.body.temperature });

interface Run {
	kind: 'agent' | 'chain';
	question: string;
}

/**
 * The 50 runs: 25 distinct questions one after the other (10 agent, 5 agent with a tool call, 10
 * chain), 10 sequential repeats of them, then 5 new questions asked 3 times each at the same
 * moment (5 distinct + 10 concurrent repeats). 30 distinct runs, 20 repeats.
 */
function schedule(tag: string): { sequential: Run[]; concurrent: Run[][] } {
	const agent = (i: number): Run => ({ kind: 'agent', question: `${tag} agent question ${i}?` });
	const calc = (i: number): Run => ({ kind: 'agent', question: `${tag} please calculate ${i} * 7` });
	const chain = (i: number): Run => ({ kind: 'chain', question: `${tag} chain question ${i}?` });
	const first = [...Array.from({ length: 10 }, (_, i) => agent(i)), ...Array.from({ length: 5 }, (_, i) => calc(i)), ...Array.from({ length: 10 }, (_, i) => chain(i))];
	const repeats = [agent(0), agent(1), agent(2), calc(0), calc(1), chain(0), chain(1), chain(2), chain(3), chain(4)];
	const groups = [agent(10), agent(11), calc(5), chain(10), chain(11)].map((r) => [r, r, r]);
	return { sequential: [...first, ...repeats], concurrent: groups };
}

/** Model calls a run makes uncached: two for a tool-call question (the call, then the answer). */
const callsOf = (run: Run) => (run.question.includes('calculate') ? 2 : 1);

describe('e2e: Prompt Cache Chat Model between OpenAI Chat Model and AI Agent / Basic LLM Chain (real n8n)', () => {
	let n8n: N8nInstance | undefined;
	let model: OpenAiStandIn;
	let creds: Creds;
	const figures: string[] = [];

	beforeAll(async () => {
		model = await openAiStandIn({ delayMs: 300, answer });
		n8n = await startN8n({ withPackage: true });
		await n8n.setupOwner();
		await n8n.createApiKey();
		const ledgerCred = await n8n.createCredential({ name: 'Ledger', type: 'idempotencyPostgresApi', data: ledgerCredentialData(table) });
		const openAi = await n8n.createCredential({ name: 'OpenAI stand-in', type: 'openAiApi', data: { apiKey: 'sk-e2e', url: `${model.url}/v1`, header: false } });
		creds = { ledger: ledgerCred.id, openAi: openAi.id };
		figures.push(`n8n boot ${Math.round(n8n.bootMs)} ms`);
	});

	afterAll(async () => {
		if (n8n) console.log(`n8n log: ${n8n.logFile}\nchat model cache e2e figures:\n${figures.join('\n')}`);
		await n8n?.stop();
		await model?.close();
		await ledger.drop();
	});

	/** Deploys the agent and chain flows and the stats flow for one namespace; returns how to ask. */
	async function deployAll(tag: string, cacheOptions: Record<string, unknown>) {
		const namespace = `e2e-chat-${tag}`;
		const ids = {
			agent: await n8n!.deploy(flow('agent', `agent-${tag}`, creds, { namespace, ...cacheOptions })),
			chain: await n8n!.deploy(flow('chain', `chain-${tag}`, creds, { namespace, ...cacheOptions })),
		};
		await n8n!.deploy(statsFlow(`stats-${tag}`, creds, namespace));
		const ask = async (run: Run) => {
			const res = await n8n!.post(`${run.kind}-${tag}`, { question: run.question });
			if (res.status !== 200) throw new Error(`${run.kind} "${run.question}" answered ${res.status}: ${res.text.slice(0, 500)}`);
			return String(res.body.output ?? res.body.text ?? JSON.stringify(res.body));
		};
		const stats = async () => (await n8n!.post(`stats-${tag}`, {})).body;
		return { ids, ask, stats, namespace };
	}

	async function runSchedule(tag: string, ask: (run: Run) => Promise<string>) {
		const { sequential, concurrent } = schedule(tag);
		const answers = new Map<string, string[]>();
		const note = (run: Run, text: string) => answers.set(run.question, [...(answers.get(run.question) ?? []), text]);
		for (const run of sequential) note(run, await ask(run));
		for (const group of concurrent) {
			// The three copies of a question start together; the groups follow each other.
			const texts = await Promise.all(group.map((run) => ask(run)));
			group.forEach((run, k) => note(run, texts[k]));
		}
		const runs = [...sequential, ...concurrent.flat()];
		return { answers, runs };
	}

	test('50 runs, 20 repeats (10 concurrent): one model call per distinct request, the same answers, hits and tokens saved in Get Stats', async () => {
		const tag = `c${Date.now().toString(36)}`;
		const { ids, ask, stats } = await deployAll(tag, {});
		const before = model.calls.length;
		const started = Date.now();
		const { answers, runs } = await runSchedule(tag, ask);
		const calls = model.calls.slice(before);
		const distinctRuns = new Map(runs.map((r) => [r.question, r]));
		const expectedCalls = [...distinctRuns.values()].reduce((n, r) => n + callsOf(r), 0);
		const uncachedCalls = runs.reduce((n, r) => n + callsOf(r), 0);
		figures.push(`cached: ${runs.length} runs (${distinctRuns.size} distinct), ${calls.length} model calls for ${new Set(calls.map(requestKey)).size} distinct requests (uncached would be ${uncachedCalls}), ${Date.now() - started} ms`);

		expect(runs).toHaveLength(50);
		expect(distinctRuns.size).toBe(30);
		// Each distinct request reached the model exactly once.
		expect(new Set(calls.map(requestKey)).size).toBe(calls.length);
		expect(calls).toHaveLength(expectedCalls);
		expect(expectedCalls).toBe(36);
		// The tool-call rounds went through the cache too, and the calculator's result came back.
		expect(calls.filter((c) => lastMessage(c)?.role === 'tool')).toHaveLength(6);
		for (const [question, texts] of answers) {
			expect(new Set(texts).size).toBe(1);
			// The calculator ran on the replayed tool call too: its result (n8n's tool output) is in the answer.
			const product = /calculate (\d+) \* 7/.exec(question);
			if (product) expect(texts[0]).toBe(`The result is [{"response":"${Number(product[1]) * 7}"}].`);
		}

		// What n8n recorded: each model call through the cache node is a run of it, with its outcome.
		const agentRuns = runs.filter((r) => r.kind === 'agent').length;
		expect(agentRuns).toBe(29);
		const executions = [...(await n8n!.waitForExecutions(ids.agent, agentRuns, { includeData: true })), ...(await n8n!.waitForExecutions(ids.chain, runs.length - agentRuns, { includeData: true }))];
		expect(executions.every((e) => e.status === 'success')).toBe(true);
		const outcomes = cacheOutcomes(executions);
		expect(outcomes.hit).toBe(uncachedCalls - expectedCalls);
		expect(outcomes.stored).toBe(expectedCalls);

		const s = await stats();
		expect(s.promptCache).toMatchObject({ lookups: uncachedCalls, hits: uncachedCalls - expectedCalls, misses: expectedCalls, tokensSaved: (uncachedCalls - expectedCalls) * 28 });
		figures.push(`runs of the cache node: ${JSON.stringify(outcomes)}`);
		figures.push(`Get Stats: hits ${s.promptCache.hits}, misses ${s.promptCache.misses}, hit rate ${s.promptCache.hitRate}, tokens saved ${s.promptCache.tokensSaved}`);
		const rows = await ledger.rows(`step = 'prompt-cache-chat' AND status = 'completed'`);
		expect(rows.length).toBeGreaterThanOrEqual(expectedCalls);
	}, 600_000);

	test('shadow mode: all 50 runs reach the model, and the would-have-hit rate is reported', async () => {
		const tag = `s${Date.now().toString(36)}`;
		const { ask, stats } = await deployAll(tag, { shadowMode: true });
		const before = model.calls.length;
		const { runs } = await runSchedule(tag, ask);
		const calls = model.calls.slice(before);
		const uncachedCalls = runs.reduce((n, r) => n + callsOf(r), 0);
		const distinctCalls = new Set(calls.map(requestKey)).size;
		expect(calls).toHaveLength(uncachedCalls);
		const s = await stats();
		expect(s.promptCache).toMatchObject({ hits: 0, lookups: uncachedCalls, shadow: { lookups: uncachedCalls, wouldHit: uncachedCalls - distinctCalls } });
		expect(s.promptCache.shadow.wouldHitRate).toBeCloseTo((uncachedCalls - distinctCalls) / uncachedCalls, 3);
		figures.push(`shadow: ${runs.length} runs, ${calls.length} model calls (all), would-have-hit ${s.promptCache.shadow.wouldHit}/${s.promptCache.shadow.lookups} = ${s.promptCache.shadow.wouldHitRate}, compared ${s.promptCache.shadow.compared}, differed ${s.promptCache.shadow.differed}`);
	}, 600_000);

	test('a model that fails: the error reaches the agent, nothing is cached, the next run asks the model again', async () => {
		const tag = `f${Date.now().toString(36)}`;
		const { ids } = await deployAll(tag, {});
		const before = model.calls.length;
		for (let i = 0; i < 2; i++) {
			const res = await n8n!.post(`agent-${tag}`, { question: 'please fail' });
			expect(res.status).toBeGreaterThanOrEqual(400);
		}
		expect(model.calls.length - before).toBe(2);
		const executions = await n8n!.waitForExecutions(ids.agent, 2, { includeData: true });
		for (const e of executions) {
			expect(e.status).toBe('error');
			expect(JSON.stringify(e.data?.resultData.error ?? {})).toContain('The stand-in refuses this request');
		}
		expect(await ledger.rows(`step = 'prompt-cache-chat' AND status = 'completed' AND namespace = 'e2e-chat-${tag}'`)).toHaveLength(0);
	}, 180_000);

	test('no Chat Model connected to the cache node: the run stops with a clear error', async () => {
		const tag = `n${Date.now().toString(36)}`;
		const id = await n8n!.deploy(flow('chain', `chain-${tag}`, creds, {}, { noModel: true }));
		const res = await n8n!.post(`chain-${tag}`, { question: 'anything' });
		expect(res.status).toBeGreaterThanOrEqual(400);
		const [execution] = await n8n!.waitForExecutions(id, 1, { includeData: true });
		expect(execution.status).toBe('error');
		const error = JSON.stringify(execution.data?.resultData.error ?? {});
		expect(error).toMatch(/Model sub-node must be connected|No Chat Model is connected/);
		figures.push(`no model: ${execution.data?.resultData.error?.message} / ${execution.data?.resultData.error?.description ?? ''}`);
	}, 180_000);

	test('ledger down: by default the agent still answers and the run shows a warning; "Stop if the Ledger Is Down" stops it', async () => {
		const tag = `d${Date.now().toString(36)}`;
		const down = await n8n!.createCredential({ name: 'Ledger (down)', type: 'idempotencyPostgresApi', data: { ...ledgerCredentialData(table), port: 1 } });
		const open = await n8n!.deploy(flow('agent', `agent-${tag}`, creds, {}, { ledgerCredential: down.id }));
		const closed = await n8n!.deploy(flow('agent', `agent-closed-${tag}`, creds, { failClosed: true }, { ledgerCredential: down.id }));
		const before = model.calls.length;

		const res = await n8n!.post(`agent-${tag}`, { question: 'is the ledger needed?' });
		expect(res.status).toBe(200);
		expect(String(res.body.output)).toContain('answer #');
		expect(model.calls.length - before).toBe(1);
		const [ran] = await n8n!.waitForExecutions(open, 1, { includeData: true });
		expect(ran.status).toBe('success');
		const reports = cacheReports(ran);
		if (reports.length !== 1) console.log(JSON.stringify(ran.data?.resultData.runData[CACHE] ?? ran.data?.resultData.runData, null, 1).slice(0, 3000));
		expect(reports).toHaveLength(1);
		expect(reports[0]).toMatchObject({ outcome: 'uncached', warning: expect.stringContaining('The ledger could not be reached') });

		const stopped = await n8n!.post(`agent-closed-${tag}`, { question: 'is the ledger needed?' });
		expect(stopped.status).toBeGreaterThanOrEqual(400);
		expect(model.calls.length - before).toBe(1);
		const [failed] = await n8n!.waitForExecutions(closed, 1, { includeData: true });
		expect(failed.status).toBe('error');
		expect(JSON.stringify(failed.data?.resultData.error ?? {})).toContain('unavailable');
		// The stop is shown on the cache node, where its reason is; the model node never ran, and shows nothing.
		expect(failed.data?.resultData.runData['OpenAI Chat Model']).toBeUndefined();
		expect(JSON.stringify(failed.data?.resultData.runData[CACHE] ?? [])).toContain('Stop if the Ledger Is Down');
	}, 180_000);
});

/** The cache node's record of each model call in an execution (its runs' output). */
function cacheReports(execution: N8nExecution): Array<Record<string, unknown>> {
	const runs = execution.data?.resultData.runData[CACHE] ?? [];
	return runs.map((r) => r.data?.ai_languageModel?.[0]?.[0]?.json?.cache).filter((c): c is Record<string, unknown> => !!c);
}

function cacheOutcomes(executions: N8nExecution[]): Record<string, number> {
	const counts: Record<string, number> = {};
	for (const e of executions) for (const r of cacheReports(e)) counts[String(r.outcome)] = (counts[String(r.outcome)] ?? 0) + 1;
	return counts;
}
