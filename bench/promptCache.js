// Prompt Cache lookup latency: 10,000 one-item Lookup executions that hit, on each backend,
// beside the cheapest read of the same backend (a primary-key SELECT / a GET), same process.
const { PromptCache } = require('../dist/nodes/PromptCache/PromptCache.node');
const { nodeContext } = require('./context');
const { percentile, time } = require('./util');

const PROMPTS = 100;

async function lookupLatency({ backend, credentials, lookups, baseline }) {
	const node = new PromptCache();
	const namespace = `bench-prompts-${Date.now().toString(36)}`;
	// Savings on: prices set, so every hit counts tokens and money; every item carries its key receipt.
	const base = { backend, promptSource: 'text', model: 'gpt-4o-mini', options: { namespace, whileComputing: 'miss', priceInputPer1k: 0.00015, priceOutputPer1k: 0.0006 } };
	const creds = credentials;
	// Seed: Lookup (Miss, reserves) then Store the answer, for each prompt.
	for (let p = 0; p < PROMPTS; p++) {
		const lookup = nodeContext(node, { parameters: { ...base, operation: 'lookup', prompt: `Classify ticket ${p}` }, items: [{ json: {} }], credentials: creds });
		const [hit, miss] = await node.execute.call(lookup);
		if (hit.length) continue;
		const answered = { ...miss[0].json, choices: [{ message: { role: 'assistant', content: `label-${p}` } }], usage: { prompt_tokens: 21, completion_tokens: 9, total_tokens: 30 } };
		const store = nodeContext(node, { parameters: { ...base, operation: 'store' }, items: [{ json: answered, pairedItem: { item: 0 } }], credentials: creds });
		await node.execute.call(store);
	}
	const samples = [];
	const baseSamples = [];
	let hits = 0;
	for (let i = 0; i < lookups; i++) {
		const ctx = nodeContext(node, { parameters: { ...base, operation: 'lookup', prompt: `Classify ticket ${i % PROMPTS}` }, items: [{ json: {} }], credentials: creds, executionId: `b${i}` });
		let out;
		samples.push(await time(async () => (out = await node.execute.call(ctx))));
		hits += out[0].length;
		const facts = out[0][0]?.json.idempotency;
		if (!(facts?.moneySaved > 0 && facts.keyReceipt?.length > 0)) throw new Error(`${backend}: a hit without savings or key receipt`);
		baseSamples.push(await time(() => baseline(i % PROMPTS)));
	}
	if (hits !== lookups) throw new Error(`${backend}: ${hits} hits of ${lookups} lookups`);
	return { samples, baseSamples };
}

function latencyRows(name, baseName, { samples, baseSamples }) {
	const f = (x) => `${x.toFixed(2)} ms`;
	const p50 = percentile(samples, 50);
	const p99 = percentile(samples, 99);
	const b50 = percentile(baseSamples, 50);
	const b99 = percentile(baseSamples, 99);
	return [
		`| ${name} | ${f(p50)} | ${f(p99)} | ${(p50 / b50).toFixed(1)}× | ${(p99 / b99).toFixed(1)}× |`,
		`| ${baseName} | ${f(b50)} | ${f(b99)} | 1.0× | 1.0× |`,
	];
}

module.exports = { lookupLatency, latencyRows };
