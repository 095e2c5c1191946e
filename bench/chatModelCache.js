// Prompt Cache Chat Model: a cache hit through the sub-node, beside a call of the model itself.
// The model is a LangChain chat model (a BaseChatModel of @langchain/core, as n8n's Chat Model
// nodes are) that calls an OpenAI-compatible stand-in over HTTP on loopback, answering at once.
// Both sides are timed the same way: model.invoke() of one human message, LangChain's own
// overhead included. The hit side is the model the node's supplyData() hands to the agent.
const http = require('http');
const { BaseChatModel } = require('@langchain/core/language_models/chat_models');
const { AIMessage, HumanMessage } = require('@langchain/core/messages');
const { PromptCacheChatModel } = require('../dist/nodes/PromptCacheChatModel/PromptCacheChatModel.node');
const { nodeContext } = require('./context');
const { percentile, time } = require('./util');

const PROMPTS = 100;

function standIn() {
	let calls = 0;
	const agent = new http.Agent({ keepAlive: true });
	const server = http.createServer((req, res) => {
		let raw = '';
		req.on('data', (c) => (raw += c));
		req.on('end', () => {
			calls++;
			const body = JSON.parse(raw);
			const content = `answer to: ${body.messages.at(-1).content}`;
			res.writeHead(200, { 'Content-Type': 'application/json' });
			res.end(JSON.stringify({ id: `c${calls}`, object: 'chat.completion', model: body.model, choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }], usage: { prompt_tokens: 20, completion_tokens: 8, total_tokens: 28 } }));
		});
	});
	return new Promise((resolve) =>
		server.listen(0, '127.0.0.1', () => {
			const { port } = server.address();
			const post = (body) =>
				new Promise((ok, fail) => {
					const req = http.request({ host: '127.0.0.1', port, path: '/v1/chat/completions', method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
						let text = '';
						res.on('data', (c) => (text += c));
						res.on('end', () => ok(JSON.parse(text)));
					});
					req.on('error', fail);
					req.end(JSON.stringify(body));
				});
			resolve({ post, calls: () => calls, close: () => new Promise((r) => (agent.destroy(), server.close(r))) });
		}),
	);
}

/** An OpenAI-style chat model over HTTP, the bare minimum of ChatOpenAI. */
function modelClass(api) {
	return class StandInOpenAi extends BaseChatModel {
		constructor() {
			super({});
		}
		_llmType() {
			return 'openai';
		}
		invocationParams() {
			return { model: 'gpt-4o-mini', temperature: 0 };
		}
		async _generate(messages) {
			const body = { ...this.invocationParams(), messages: messages.map((m) => ({ role: m._getType() === 'human' ? 'user' : 'assistant', content: m.content })) };
			const data = await api.post(body);
			const choice = data.choices[0];
			const u = data.usage;
			const message = new AIMessage({ content: choice.message.content, response_metadata: { finish_reason: choice.finish_reason }, usage_metadata: { input_tokens: u.prompt_tokens, output_tokens: u.completion_tokens, total_tokens: u.total_tokens } });
			return { generations: [{ text: choice.message.content, message, generationInfo: { finish_reason: choice.finish_reason } }], llmOutput: { tokenUsage: { promptTokens: u.prompt_tokens, completionTokens: u.completion_tokens, totalTokens: u.total_tokens } } };
		}
	};
}

async function chatModelLatency({ backend, credentials, hits }) {
	const api = await standIn();
	const Model = modelClass(api);
	const node = new PromptCacheChatModel();
	const namespace = `bench-chat-${Date.now().toString(36)}`;
	const supplied = (executionId) => {
		const ctx = nodeContext(node, { parameters: { backend, options: { namespace, priceInputPer1k: 0.00015, priceOutputPer1k: 0.0006 } }, items: [{ json: {} }], credentials, executionId });
		ctx.getInputConnectionData = async () => new Model();
		ctx.addInputData = () => ({ index: 0 });
		ctx.addOutputData = () => undefined;
		return node.supplyData.call(ctx, 0).then((s) => s.response);
	};
	try {
		// Seed: one miss (stored) per prompt.
		for (let p = 0; p < PROMPTS; p++) await (await supplied(`seed${p}`)).invoke([new HumanMessage(`Classify ticket ${p}`)]);
		const seeded = api.calls();
		if (seeded !== PROMPTS) throw new Error(`chat model cache: ${seeded} model calls to seed ${PROMPTS} prompts`);
		const samples = [];
		const baseSamples = [];
		const bare = new Model();
		for (let i = 0; i < hits; i++) {
			const model = await supplied(`b${i}`);
			const prompt = [new HumanMessage(`Classify ticket ${i % PROMPTS}`)];
			let out;
			samples.push(await time(async () => (out = await model.invoke(prompt))));
			if (out.content !== `answer to: Classify ticket ${i % PROMPTS}`) throw new Error(`chat model cache: wrong answer ${out.content}`);
			baseSamples.push(await time(() => bare.invoke(prompt)));
		}
		// Every timed hit was answered from the ledger: the stand-in saw only the baseline's calls.
		if (api.calls() !== seeded + hits) throw new Error(`chat model cache: ${api.calls() - seeded - hits} hits reached the model`);
		return { samples, baseSamples };
	} finally {
		await api.close();
	}
}

module.exports = { chatModelLatency };
