/**
 * Runs workflow JSON through n8n's REAL workflow engine (`WorkflowExecute` from n8n-core, a
 * real `Workflow` from n8n-workflow) inside jest, with no hand-made IExecuteFunctions mock.
 *
 * What n8n-core 2.40 needs to run outside the n8n CLI, and what this file does about it:
 *
 * - Expressions: n8n-workflow's `Expression` class can evaluate with the in-process "legacy"
 *   evaluator (Tournament) or in a VM ('vm' = isolated-vm, 'quickjs'). The library default is
 *   'legacy'; the n8n CLI switches engines, from `N8N_EXPRESSION_ENGINE` (default 'vm' in n8n 2.x),
 *   by calling `Expression.initExpressionEngine()` with its configuration. This harness does the
 *   same from TEST_EXPRESSION_ENGINE: 'legacy' (the default) or 'vm', with n8n's own defaults
 *   (`ExpressionEngineConfig` of @n8n/config). isolated-vm ships builds for Node 24 and later
 *   only, so 'vm' needs Node 24 (`npm test` runs the engine tests a second time that way, see
 *   scripts/test-vm-engine.js); `expressionEngine()` reports what is active and fails when the
 *   asked engine is not.
 * - Dependency injection: node execution contexts take `InstanceSettings` from the `@n8n/di`
 *   container when they are built, and the engine reports node errors to `ErrorReporter` from
 *   the container. The real `InstanceSettings` reads or creates `~/.n8n/config` (an encryption
 *   key) when constructed, so both are replaced by small hand-written stand-ins. The container
 *   is the one n8n-core itself resolves (`@n8n/di`, loaded relative to n8n-core), so the
 *   stand-ins are the ones the engine sees even if `@n8n/di` were not hoisted.
 * - Logging: a node that uses `this.logger` makes the container build n8n's real `Logger` from
 *   environment configuration; `N8N_LOG_LEVEL` is set to 'silent' (unless already set) so that
 *   never prints.
 * - Hooks: `WorkflowExecute` asserts `additionalData.hooks`; a real `ExecutionLifecycleHooks`
 *   records the node execution order and resolves on `workflowExecuteAfter`.
 * - Credentials: an in-memory `ICredentialsHelper`: `getDecrypted` returns the data given for
 *   the credential type, `getParentTypes` returns [], `authenticate` passes the request through.
 *   A node whose JSON has no `credentials` entry for a credential type its description declares
 *   and the caller supplied gets one filled in (`{ id: <type>, name: <type> }`), so test workflows
 *   need not repeat it.
 *
 * Nothing here opens a network connection or touches the n8n user folder.
 */
import { createRequire } from 'node:module';
import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { ErrorReporter, ExecutionLifecycleHooks, InstanceSettings, WorkflowExecute } from 'n8n-core';
import {
	Expression,
	ICredentialsHelper,
	NodeHelpers,
	Workflow,
	createRunExecutionData,
	deepCopy,
	type ExecutionError,
	type ICredentialDataDecryptedObject,
	type ICredentials,
	type IConnections,
	type IDataObject,
	type IExecuteFunctions,
	type IHttpRequestOptions,
	type INode,
	type INodeCredentialsDetails,
	type INodeExecutionData,
	type INodeParameters,
	type INodeProperties,
	type INodeType,
	type INodeTypes,
	type IRun,
	type ITaskData,
	type IVersionedNodeType,
	type IWorkflowBase,
	type IWorkflowExecuteAdditionalData,
	type IWorkflowSettings,
	type NodeParameterValueType,
	type WorkflowExecuteMode,
} from 'n8n-workflow';

import { fixtureNodeTypes } from './fixtureNodes';

/* ------------------------------------------------------------------------------------------ */
/* One-time environment                                                                        */
/* ------------------------------------------------------------------------------------------ */

interface DiContainer {
	set<T>(token: unknown, instance: T): void;
	get<T>(token: unknown): T;
}

/** Errors the engine handed to n8n's ErrorReporter (in n8n they would go to Sentry and logs). */
export const reportedErrors: Array<{ error: unknown; options?: unknown }> = [];

let environmentReady = false;

/** The expression engine these tests run n8n's under (TEST_EXPRESSION_ENGINE). */
const ENGINE = (process.env.TEST_EXPRESSION_ENGINE || 'legacy') as 'legacy' | 'vm';
if (ENGINE !== 'legacy' && ENGINE !== 'vm') throw new Error(`TEST_EXPRESSION_ENGINE must be legacy or vm, not ${ENGINE}`);
let engineReady: Promise<void> | undefined;

/**
 * Starts the asked expression engine as the n8n CLI does (once per process) and returns the name
 * n8n reports as active; throws when that is not the asked one, so a 'vm' run cannot quietly
 * evaluate with 'legacy'.
 */
export async function expressionEngine(): Promise<'legacy' | 'vm'> {
	prepareEnvironment();
	engineReady ??= (async () => {
		if (ENGINE === 'vm') {
			const fromCore = createRequire(require.resolve('n8n-core'));
			const { Container } = fromCore('@n8n/di') as { Container: DiContainer };
			const { ExpressionEngineConfig } = fromCore('@n8n/config') as { ExpressionEngineConfig: new () => Record<string, unknown> };
			const config = Container.get(ExpressionEngineConfig as never) as Record<string, number | boolean | undefined>;
			await Expression.initExpressionEngine({
				engine: 'vm',
				poolSize: config.poolSize as number,
				maxCodeCacheSize: config.maxCodeCacheSize as number,
				bridgeTimeout: config.bridgeTimeout as number,
				bridgeMemoryLimit: config.bridgeMemoryLimit as number,
				lazyAcquire: config.lazyAcquire as boolean,
				compileCache: config.compileCache as boolean,
			});
		}
		const active = Expression.getActiveImplementation();
		if (active !== ENGINE) throw new Error(`Asked for the ${ENGINE} expression engine, but n8n reports ${active}`);
	})();
	await engineReady;
	return ENGINE;
}

function prepareEnvironment(): void {
	if (environmentReady) return;
	environmentReady = true;

	process.env.N8N_LOG_LEVEL ??= 'silent';
	if (ENGINE === 'legacy') Expression.setExpressionEngine('legacy');

	const fromCore = createRequire(require.resolve('n8n-core'));
	const { Container } = fromCore('@n8n/di') as { Container: DiContainer };

	// Only file-system helpers (this.helpers.writeContentToFile and the like) use this folder.
	// One shared, empty folder: created once, never filled by the harness itself.
	const n8nFolder = path.join(tmpdir(), 'n8n-engine-harness');
	mkdirSync(n8nFolder, { recursive: true });
	const instanceSettings = {
		instanceId: 'engine-harness-instance',
		derivedInstanceId: 'engine-harness-instance',
		hostId: 'engine-harness-host',
		hmacSignatureSecret: 'engine-harness-hmac-secret',
		encryptionKey: 'engine-harness-encryption-key',
		n8nFolder,
		staticCacheDir: path.join(n8nFolder, 'cache'),
		customExtensionDir: path.join(n8nFolder, 'custom'),
		nodesDownloadDir: path.join(n8nFolder, 'nodes'),
		nodeDefinitionsDir: path.join(n8nFolder, 'node-definitions'),
		instanceType: 'main',
		instanceRole: 'leader',
		isLeader: true,
		isFollower: false,
		isWorker: false,
		isMultiMain: false,
		isSingleMain: true,
		isDocker: false,
	};
	Container.set(InstanceSettings, instanceSettings as unknown as InstanceSettings);

	const errorReporter = {
		error: (error: unknown, options?: unknown) => void reportedErrors.push({ error, options }),
		warn: (error: unknown, options?: unknown) => void reportedErrors.push({ error, options }),
		info: () => undefined,
	};
	Container.set(ErrorReporter, errorReporter as unknown as ErrorReporter);
}

/* ------------------------------------------------------------------------------------------ */
/* Registries                                                                                  */
/* ------------------------------------------------------------------------------------------ */

class InMemoryNodeTypes implements INodeTypes {
	constructor(private readonly types: Record<string, INodeType | IVersionedNodeType>) {}

	getByName(nodeType: string): INodeType | IVersionedNodeType {
		const type = this.types[nodeType];
		if (!type) {
			throw new Error(
				`Unknown node type "${nodeType}" (registered: ${Object.keys(this.types).join(', ')})`,
			);
		}
		return type;
	}

	getByNameAndVersion(nodeType: string, version?: number): INodeType {
		return NodeHelpers.getVersionedNodeType(this.getByName(nodeType), version);
	}

	getKnownTypes(): IDataObject {
		return {};
	}
}

class InMemoryCredentialsHelper extends ICredentialsHelper {
	constructor(private readonly byType: Record<string, ICredentialDataDecryptedObject>) {
		super();
	}

	getParentTypes(): string[] {
		return [];
	}

	isCredentialUsableByNode(): boolean {
		return true;
	}

	async authenticate(
		_credentials: ICredentialDataDecryptedObject,
		_typeName: string,
		requestOptions: IHttpRequestOptions,
	): Promise<IHttpRequestOptions> {
		return requestOptions;
	}

	async preAuthentication(): Promise<ICredentialDataDecryptedObject | undefined> {
		return undefined;
	}

	async runPreAuthentication(): Promise<ICredentialDataDecryptedObject | undefined> {
		return undefined;
	}

	async getCredentials(nodeCredentials: INodeCredentialsDetails, type: string): Promise<ICredentials> {
		throw new Error(
			`The engine harness does not provide encrypted credentials (asked for "${type}" of ${JSON.stringify(nodeCredentials)})`,
		);
	}

	async getDecrypted(
		_additionalData: IWorkflowExecuteAdditionalData,
		_nodeCredentials: INodeCredentialsDetails,
		type: string,
	): Promise<ICredentialDataDecryptedObject> {
		const data = this.byType[type];
		if (!data) {
			throw new Error(`No credentials of type "${type}" were given to the engine harness`);
		}
		return deepCopy(data);
	}

	async updateCredentials(): Promise<void> {}

	async updateCredentialsOauthTokenData(): Promise<void> {}

	getCredentialsProperties(): INodeProperties[] {
		return [];
	}
}

/* ------------------------------------------------------------------------------------------ */
/* runWorkflow                                                                                 */
/* ------------------------------------------------------------------------------------------ */

export interface EngineWorkflow {
	nodes: INode[];
	connections: IConnections;
	settings?: IWorkflowSettings;
	staticData?: IDataObject;
	id?: string;
	name?: string;
}

export interface RunWorkflowOptions {
	/** Decrypted credential data by credential type name, e.g. `{ idempotencyPostgresApi: {...} }`. */
	credentials?: Record<string, ICredentialDataDecryptedObject>;
	/** Extra node types by full type name (`n8n-nodes-idempotency.dedupeGate`); override fixtures. */
	nodeTypes?: Record<string, INodeType | IVersionedNodeType>;
	/** `$execution.id` and `getExecutionId()`. Default: a fresh id per run. */
	executionId?: string;
	/** `$workflow.id`. Default 'engine-harness-workflow'. */
	workflowId?: string;
	/**
	 * Name of the node the run starts from. Default: n8n's own choice (trigger/poll nodes and
	 * known start types), else the first enabled node without an incoming main connection.
	 */
	startNode?: string;
	/** Items given to the start node. Default `[{ json: {} }]`, as n8n does. */
	startItems?: INodeExecutionData[];
	/**
	 * Execution mode. Default 'trigger': a production run, as when a trigger starts the workflow.
	 * 'manual' is an editor test run ("Execute workflow"), which the nodes keep out of the
	 * production namespaces (lib/n8n/testRuns.ts).
	 */
	mode?: WorkflowExecuteMode;
}

export interface EngineRunResult {
	/** The full run as the engine returned it (also what `workflowExecuteAfter` received). */
	run: IRun;
	/** Node names in the order the engine finished them (repeats for nodes that ran more than once). */
	executionOrder: string[];
	/** The node's items per output index, from its first run. [] when the node did not run. */
	outputs(nodeName: string): INodeExecutionData[][];
	/** Items of output 0 of the node's first run (shorthand for `outputs(name)[0] ?? []`). */
	items(nodeName: string): INodeExecutionData[];
	/** Every run of the node (n8n keeps one ITaskData per run). */
	runs(nodeName: string): ITaskData[];
	/** The error that ended the run, if any (`run.data.resultData.error`). */
	error?: ExecutionError;
	/** The error recorded on the node's first run, if it failed. */
	nodeError(nodeName: string): ExecutionError | undefined;
	/** Whether the node ran at all. */
	ran(nodeName: string): boolean;
}

let executionCounter = 0;

function chooseStartNode(workflow: Workflow, nodes: INode[], startNode?: string): INode {
	if (startNode !== undefined) {
		const node = workflow.getNode(startNode);
		if (!node) throw new Error(`Start node "${startNode}" is not in the workflow`);
		return node;
	}
	const byN8n = workflow.getStartNode();
	if (byN8n) return byN8n;
	const withInput = new Set(Object.keys(workflow.connectionsByDestinationNode));
	const first = nodes.find((node) => !node.disabled && !withInput.has(node.name));
	if (!first) throw new Error('No start node: every node has an incoming connection');
	return workflow.getNode(first.name) as INode;
}

function fillCredentials(
	nodes: INode[],
	nodeTypes: INodeTypes,
	credentials: Record<string, ICredentialDataDecryptedObject>,
): void {
	for (const node of nodes) {
		const declared = nodeTypes.getByNameAndVersion(node.type, node.typeVersion).description.credentials ?? [];
		for (const { name } of declared) {
			if (!(name in credentials) || node.credentials?.[name]) continue;
			node.credentials = { ...(node.credentials ?? {}), [name]: { id: name, name } };
		}
	}
}

/**
 * Runs the workflow through n8n-core's `WorkflowExecute` and resolves when the engine has
 * finished (after `workflowExecuteAfter`). Node failures do not reject: they are in `error` /
 * `nodeError()`, as n8n records them. The workflow JSON is copied, never changed.
 */
export async function runWorkflow(
	workflowJson: EngineWorkflow,
	options: RunWorkflowOptions = {},
): Promise<EngineRunResult> {
	await expressionEngine();

	const nodeTypes = new InMemoryNodeTypes({ ...fixtureNodeTypes(), ...(options.nodeTypes ?? {}) });
	const credentials = options.credentials ?? {};
	const nodes = deepCopy(workflowJson.nodes);
	fillCredentials(nodes, nodeTypes, credentials);

	const workflowId = options.workflowId ?? workflowJson.id ?? 'engine-harness-workflow';
	const executionId = options.executionId ?? `engine-harness-${++executionCounter}`;
	const mode = options.mode ?? 'trigger';
	const settings: IWorkflowSettings = { executionOrder: 'v1', ...(workflowJson.settings ?? {}) };

	const workflow = new Workflow({
		id: workflowId,
		name: workflowJson.name ?? 'Engine harness workflow',
		nodes,
		connections: deepCopy(workflowJson.connections),
		active: false,
		nodeTypes,
		settings,
		staticData: workflowJson.staticData ? deepCopy(workflowJson.staticData) : undefined,
	});

	const workflowData: IWorkflowBase = {
		id: workflowId,
		name: workflow.name ?? '',
		active: false,
		isArchived: false,
		createdAt: new Date(),
		updatedAt: new Date(),
		nodes,
		connections: workflow.connectionsBySourceNode,
		settings,
		activeVersionId: null,
	};
	const hooks = new ExecutionLifecycleHooks(mode, executionId, workflowData);
	const executionOrder: string[] = [];
	hooks.addHandler('nodeExecuteAfter', (nodeName) => {
		executionOrder.push(nodeName);
	});
	let afterHookRan: (fullRunData: IRun) => void = () => undefined;
	const afterHook = new Promise<IRun>((resolve) => (afterHookRan = resolve));
	hooks.addHandler('workflowExecuteAfter', (fullRunData) => afterHookRan(fullRunData));

	const notAvailable = (what: string) => () => {
		throw new Error(`${what} is not available in the engine harness`);
	};
	const additionalData = {
		credentialsHelper: new InMemoryCredentialsHelper(credentials),
		hooks,
		executionId,
		workflowId,
		currentNodeExecutionIndex: 0,
		restApiUrl: 'http://localhost:5678/rest',
		instanceBaseUrl: 'http://localhost:5678/',
		formBaseUrl: 'http://localhost:5678/form',
		formWaitingBaseUrl: 'http://localhost:5678/form-waiting',
		formTestBaseUrl: 'http://localhost:5678/form-test',
		webhookBaseUrl: 'http://localhost:5678/webhook',
		webhookWaitingBaseUrl: 'http://localhost:5678/webhook-waiting',
		webhookTestBaseUrl: 'http://localhost:5678/webhook-test',
		mcpBaseUrl: 'http://localhost:5678/mcp',
		mcpTestBaseUrl: 'http://localhost:5678/mcp-test',
		currentNodeParameters: undefined,
		variables: {},
		executeWorkflow: notAvailable('executeWorkflow (sub-workflows)'),
		getRunExecutionData: async () => undefined,
		getRuntimeCredential: async () => undefined,
		logAiEvent: () => undefined,
		startRunnerTask: notAvailable('startRunnerTask (Code node task runners)'),
		externalSecretsProxy: {
			hasProvider: () => false,
			getSecret: () => undefined,
			hasSecret: () => false,
			listProviders: () => [],
			listSecrets: () => [],
		},
	} as unknown as IWorkflowExecuteAdditionalData;

	const startNode = chooseStartNode(workflow, nodes, options.startNode);
	let run: IRun;
	if (options.startItems) {
		const runExecutionData = createRunExecutionData({
			executionData: {
				nodeExecutionStack: [
					{ node: startNode, data: { main: [deepCopy(options.startItems)] }, source: null },
				],
			},
		});
		run = await new WorkflowExecute(additionalData, mode, runExecutionData).processRunExecutionData(workflow);
	} else {
		run = await new WorkflowExecute(additionalData, mode).run({ workflow, startNode });
	}
	// The engine awaits `workflowExecuteAfter` before it resolves, with the same IRun; prefer the
	// hook's copy, but never wait for a hook the engine skipped.
	const fromHook = await Promise.race([afterHook, new Promise<undefined>((resolve) => setImmediate(() => resolve(undefined)))]);
	if (fromHook) run = fromHook;

	const runData = run.data.resultData.runData;
	const runs = (nodeName: string): ITaskData[] => runData[nodeName] ?? [];
	const outputs = (nodeName: string): INodeExecutionData[][] =>
		(runs(nodeName)[0]?.data?.main ?? []).map((items) => items ?? []);
	return {
		run,
		executionOrder,
		outputs,
		items: (nodeName) => outputs(nodeName)[0] ?? [],
		runs,
		error: run.data.resultData.error,
		nodeError: (nodeName) => runs(nodeName)[0]?.error,
		ran: (nodeName) => runs(nodeName).length > 0,
	};
}

/* ------------------------------------------------------------------------------------------ */
/* evaluateParameter                                                                           */
/* ------------------------------------------------------------------------------------------ */

export type ParameterOutcome =
	| { ok: true; value: NodeParameterValueType | object }
	| { ok: false; error: Error };

export interface EvaluateParameterOptions {
	/**
	 * Declared properties of the probe node. Default: every key of `nodeParameters` declared as
	 * `{ type: 'string', default: '' }` (a plain string parameter).
	 */
	properties?: INodeProperties[];
	/** Name of the node that emits the item; `$('<sourceName>')` refers to it. Default 'Source'. */
	sourceName?: string;
	/** Name of the node that reads the parameter. Default 'Probe'. */
	probeName?: string;
	/**
	 * How Probe reads the parameter: made once per execution from Probe's context, then called
	 * per item. Default: `getNodeParameter(parameterName, i)`.
	 */
	reader?: (ctx: IExecuteFunctions) => (itemIndex: number) => unknown;
	/**
	 * A node named 'Relay' between Source and Probe that turns Source's items into the items
	 * Probe reads, each with the `pairedItem` it sets (its index into Source's items), so that
	 * `$('Source').item` and `$json` are different items. Default: no Relay.
	 */
	relay?: (sourceItems: INodeExecutionData[]) => INodeExecutionData[];
	/** Workflow settings (default: execution order v1 only). */
	settings?: IWorkflowSettings;
}

const PROBE_SOURCE_TYPE = 'engineHarness.probeSource';
const RELAY_TYPE = 'engineHarness.relay';
const PROBE_TYPE = 'engineHarness.probe';

/**
 * Evaluates one parameter for each item exactly as `this.getNodeParameter(parameterName, i)` in a
 * node's `execute` would: a two-node workflow (Source emits the items, Probe reads the
 * parameter) runs through the real engine, and Probe calls `getNodeParameter` per item. Errors
 * thrown by `getNodeParameter` (e.g. a bad expression) are returned per item, not thrown.
 */
export async function evaluateParameterForItems(
	nodeParameters: INodeParameters,
	items: INodeExecutionData[],
	parameterName: string,
	options: EvaluateParameterOptions = {},
): Promise<ParameterOutcome[]> {
	const sourceName = options.sourceName ?? 'Source';
	const probeName = options.probeName ?? 'Probe';
	const inputItems: INodeExecutionData[] = items.map((item, index) => ({ ...item, pairedItem: { item: index } }));
	const properties: INodeProperties[] =
		options.properties ??
		Object.keys(nodeParameters).map((name) => ({ displayName: name, name, type: 'string', default: '' }));

	const outcomes: ParameterOutcome[] = [];
	const probeSource: INodeType = {
		description: {
			displayName: 'Probe Source',
			name: PROBE_SOURCE_TYPE,
			group: ['transform'],
			version: 1,
			description: 'Emits the items under test',
			defaults: { name: 'Probe Source' },
			inputs: ['main'],
			outputs: ['main'],
			properties: [],
		},
		async execute() {
			return [deepCopy(inputItems)];
		},
	};
	const probe: INodeType = {
		description: {
			displayName: 'Probe',
			name: PROBE_TYPE,
			group: ['transform'],
			version: 1,
			description: 'Reads one parameter per item',
			defaults: { name: 'Probe' },
			inputs: ['main'],
			outputs: ['main'],
			properties,
		},
		async execute(this: IExecuteFunctions) {
			const input = this.getInputData();
			const read = options.reader ? options.reader(this) : (i: number) => this.getNodeParameter(parameterName, i);
			for (let i = 0; i < input.length; i++) {
				try {
					outcomes.push({ ok: true, value: read(i) as NodeParameterValueType | object });
				} catch (error) {
					outcomes.push({ ok: false, error: error as Error });
				}
			}
			return [input];
		},
	};

	const relay: INodeType = {
		description: { ...probeSource.description, displayName: 'Relay', name: RELAY_TYPE, description: 'Re-pairs the items', defaults: { name: 'Relay' } },
		async execute(this: IExecuteFunctions) {
			return [options.relay!(this.getInputData())];
		},
	};
	const nodes: INode[] = [
		{ id: 'source', name: sourceName, type: PROBE_SOURCE_TYPE, typeVersion: 1, position: [0, 0], parameters: {} },
		...(options.relay ? [{ id: 'relay', name: 'Relay', type: RELAY_TYPE, typeVersion: 1, position: [100, 0] as [number, number], parameters: {} }] : []),
		{ id: 'probe', name: probeName, type: PROBE_TYPE, typeVersion: 1, position: [200, 0], parameters: nodeParameters },
	];
	const result = await runWorkflow(
		{ nodes, connections: chain(...nodes.map((n) => n.name)), settings: options.settings },
		{ nodeTypes: { [PROBE_SOURCE_TYPE]: probeSource, [RELAY_TYPE]: relay, [PROBE_TYPE]: probe } },
	);
	if (result.error && outcomes.length === 0) throw result.error;
	return outcomes;
}

/**
 * Evaluates one parameter for one item as `this.getNodeParameter(parameterName, 0)` would (see
 * `evaluateParameterForItems`). Resolves with the value, rejects with the error n8n raised.
 */
export async function evaluateParameter(
	nodeParameters: INodeParameters,
	item: INodeExecutionData,
	parameterName: string,
	options?: EvaluateParameterOptions,
): Promise<NodeParameterValueType | object> {
	const [outcome] = await evaluateParameterForItems(nodeParameters, [item], parameterName, options);
	if (!outcome.ok) throw outcome.error;
	return outcome.value;
}

/** A node of a test workflow: its name is also its id, version 1, at the origin. */
/**
 * `nodeType` as it is, but each `getNodeParameter` call of its `execute` is counted by parameter
 * name in `reads`: what shows whether a setting is read once per execution or once per item.
 */
export function countingParameterReads<T extends INodeType>(nodeType: T): { node: T; reads: Map<string, number> } {
	const reads = new Map<string, number>();
	const execute = nodeType.execute!;
	const node = Object.assign(Object.create(nodeType) as T, {
		async execute(this: IExecuteFunctions) {
			const counted = new Proxy(this, {
				get(target, property) {
					const value = Reflect.get(target, property);
					if (property === 'getNodeParameter') {
						return (name: string, ...rest: unknown[]) => {
							reads.set(name, (reads.get(name) ?? 0) + 1);
							return (value as (...args: unknown[]) => unknown).apply(target, [name, ...rest]);
						};
					}
					return typeof value === 'function' ? value.bind(target) : value;
				},
			});
			return await execute.call(counted as IExecuteFunctions);
		},
	});
	return { node, reads };
}

export const node = (name: string, type: string, parameters: INodeParameters = {}, extra: Partial<INode> = {}): INode => ({
	id: name,
	name,
	type,
	typeVersion: 1,
	position: [0, 0],
	parameters,
	...extra,
});

/** Connects the nodes in a line, output 0 to input 0. */
export const chain = (...names: string[]): IConnections => {
	const connections: IConnections = {};
	for (let i = 0; i + 1 < names.length; i++) {
		connections[names[i]] = { main: [[{ node: names[i + 1], type: 'main', index: 0 }]] };
	}
	return connections;
};

/** Adds a connection to `connections`: `from`'s output `output` to `to`'s input 0. */
export const connect = (connections: IConnections, from: string, to: string, output = 0): IConnections => {
	const main = (connections[from] ??= { main: [] }).main;
	while (main.length <= output) main.push([]);
	main[output]!.push({ node: to, type: 'main', index: 0 });
	return connections;
};

/**
 * Lets this test process make its once-per-process check of each key-reading shortcut
 * (lib/n8n/shortcutCheck.ts) and expects this n8n to pass every one, so that a test counting
 * engine calls or parameter reads afterwards measures the steady state of a process that has.
 */
export async function settleShortcutChecks(): Promise<void> {
	// Imported here so that the harness does not load the package's modules for tests that never call this.
	const { expressionSource } = await import('../../lib/n8n/keySource');
	const small = Array.from({ length: 3 }, (_, i) => ({ json: { id: `e${i}` } }));
	// More items than go to the engine whole: read in chunks through $item(k).
	const many = Array.from({ length: 10_001 }, (_, i) => ({ json: { id: `e${i}` } }));
	const relay = (source: INodeExecutionData[]) => source.map((item, k) => ({ json: { n: k }, pairedItem: { item: k } }));
	const cases: Array<[string, INodeExecutionData[], EvaluateParameterOptions['relay']]> = [
		["={{ 'k-' + $json.id }}", small, undefined],
		["={{ 'k-' + $json.id }}", many, undefined],
		["={{ 'k-' + $('Source').item.json.id }}", small, relay],
		["={{ $('Source').item.json.id }}", small, relay],
	];
	for (const [expression, items, withRelay] of cases) {
		let kind = '';
		await evaluateParameterForItems({ key: expression }, items, 'key', {
			relay: withRelay,
			reader: (ctx) => {
				const source = expressionSource(ctx, 'key', expression);
				kind = source.kind;
				return (i) => source.read(i, ctx.getInputData()[i]);
			},
		});
		if (kind === 'engine') throw new Error(`This n8n failed the package's check of the shortcut for ${expression} on ${items.length} items`);
	}
}
