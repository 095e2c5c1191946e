const { time } = require('./util');

// A minimal IExecuteFunctions for timing a node's own execute() outside n8n. It answers only
// what our nodes ask for; parameters not given fall back to the node description's defaults.
// (The real-engine figures come from `npm run bench:n8n`.)
//
// With `executionEnds: true` it carries n8n's execution lifecycle hooks, as far as our nodes use
// them, and endExecution(ctx) runs what they left for the end of the execution, as n8n does after
// the last node: a gate's lease keeper stops renewing the keys it let through. Without an end, a
// gate's 10,000 keys would stay held for its whole lease, renewed every 10 s in the background of
// every timing that follows.
function nodeContext(nodeType, { parameters, items, credentials, executionId = 'bench', workflowId = 'bench-wf', executionEnds = false }) {
	const defaults = Object.fromEntries(nodeType.description.properties.map((p) => [p.name, p.default]));
	const params = { ...defaults, ...parameters };
	const node = { id: 'n1', name: nodeType.description.defaults.name, type: `n8n-nodes-idempotency.${nodeType.description.name}`, typeVersion: 1, position: [0, 0], parameters: params };
	return {
		getInputData: () => items,
		getNode: () => node,
		// Dotted paths ("options.namespace") read inside a collection, as n8n's own does.
		getNodeParameter: (name, _i, fallback) => {
			const value = name.split('.').reduce((at, part) => (at !== null && typeof at === 'object' && part in at ? at[part] : undefined), params);
			return value === undefined ? fallback : value;
		},
		continueOnFail: () => false,
		getCredentials: async () => credentials,
		getExecutionId: () => executionId,
		// A production run (a trigger fired it), not an editor test run.
		getMode: () => 'trigger',
		getWorkflow: () => ({ id: workflowId, name: 'bench', active: false }),
		addExecutionHints: () => undefined,
		getTimezone: () => 'UTC',
		logger: { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined },
		...(executionEnds ? { additionalData: { hooks: new ExecutionHooks('trigger', executionId, { id: workflowId }) } } : {}),
	};
}

/** n8n's ExecutionLifecycleHooks, as far as our nodes call them. */
class ExecutionHooks {
	constructor(mode, executionId, workflowData) {
		this.mode = mode;
		this.executionId = executionId;
		this.workflowData = workflowData;
		this.handlers = {};
	}

	addHandler(name, handler) {
		(this.handlers[name] ??= []).push(handler);
	}

	async runHook(name, parameters) {
		for (const handler of this.handlers[name] ?? []) await handler.apply(this, parameters);
	}
}

/** The execution of `ctx` (made with `executionEnds: true`) ends, successfully. */
const endExecution = (ctx) => ctx.additionalData.hooks.runHook('workflowExecuteAfter', [{ status: 'success', data: { resultData: {} } }]);

/**
 * One execution of `node` in a context of its own (nodeContext's options), ended as n8n ends it;
 * answers execute()'s time in ms. `check` sees the output, which is then let go, so that nothing
 * one execution made is alive while the next one is timed: in n8n a repeat is another execution.
 */
async function timedExecution(node, options, check) {
	const ctx = nodeContext(node, { ...options, executionEnds: true });
	let out;
	const ms = await time(async () => (out = await node.execute.call(ctx)));
	check(out);
	await endExecution(ctx);
	return ms;
}

/**
 * The gate on `n` new items `{ id, amount, customer }` keyed by `id` (`parameters` says the rest),
 * twice: a delivery, then its repeat as another execution, which finds the keys the first one
 * holds (In Progress). Answers both times in ms; `afterFirst` runs in between, untimed.
 */
async function deliveryAndRepeat(gate, { parameters, credentials, namespace, n, afterFirst = () => undefined }) {
	const items = Array.from({ length: n }, (_, i) => ({ json: { id: `evt_${namespace}_${i}`, amount: i, customer: { email: `c${i}@example.com` } } }));
	const what = parameters.backend ? `${parameters.backend} ` : '';
	const execution = (name, check) =>
		timedExecution(gate, { parameters: { ...parameters, keySource: 'field', keyField: 'id', options: { namespace } }, items, credentials, executionId: `${namespace}-${name}` }, check);
	const first = await execution('first', (out) => {
		if (out[0].length !== n) throw new Error(`${what}first sight: ${out[0].length} new, expected ${n}`);
	});
	afterFirst();
	const dup = await execution('repeat', (out) => {
		if (out[2].length !== n) throw new Error(`${what}repeat: ${out[2].length} in progress, expected ${n}`);
	});
	return { first, dup };
}

module.exports = { nodeContext, endExecution, deliveryAndRepeat };
