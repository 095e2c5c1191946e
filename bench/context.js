// A minimal IExecuteFunctions for timing a node's own execute() outside n8n. It answers only
// what our nodes ask for; parameters not given fall back to the node description's defaults.
// (The real-engine figures come from `npm run bench:n8n`.)
function nodeContext(nodeType, { parameters, items, credentials, executionId = 'bench', workflowId = 'bench-wf' }) {
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
	};
}

module.exports = { nodeContext };
