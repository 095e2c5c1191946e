// First: refuses, with a clear message, an n8n too old to run the package.
import '../../lib/n8n/supportedN8n';
import {
	NodeConnectionTypes,
	NodeOperationError,
	type INodeType,
	type INodeTypeDescription,
	type ISupplyDataFunctions,
	type SupplyData,
} from 'n8n-workflow';

import { toNodeError } from '../../lib/n8n/errors';
import { backendProperties, credentialTest, NODE_VERSIONS } from '../../lib/n8n/ledgerAccess';
import { durationOptions, sharedNamespaceOption } from '../../lib/n8n/scope';
import { editorTestRunsOption } from '../../lib/n8n/testRuns';
import { ANSWER_WITHIN, KEEP_ANSWERS, PRICE_OPTIONS, WAIT_UP_TO } from '../PromptCache/options';
import { installChatCache, type ChatCacheSettings } from './cachedModel';
import { hostFor, readSettings } from './supply';

// A Chat Model for AI nodes, not a tool.
// eslint-disable-next-line @n8n/community-nodes/node-usable-as-tool
export class PromptCacheChatModel implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Prompt Cache Chat Model',
		name: 'promptCacheChatModel',
		icon: { light: 'file:promptCacheChatModel.svg', dark: 'file:promptCacheChatModel.dark.svg' },
		group: ['transform'],
		version: NODE_VERSIONS,
		subtitle: '={{ $parameter.options?.shadowMode ? "Shadow mode: measuring only" : "Caching model calls" }}',
		description: 'Answer repeated Chat Model calls of an AI Agent or LLM Chain from the ledger instead of paying for them again',
		defaults: { name: 'Prompt Cache Chat Model' },
		codex: {
			categories: ['AI'],
			// As n8n's own chat models: the editor's AI views list a sub-node only where these put it.
			subcategories: { AI: ['Language Models', 'Root Nodes'], 'Language Models': ['Chat Models (Recommended)'] },
			resources: {
				primaryDocumentation: [{ url: 'https://github.com/n8n-nodes-idempotency/n8n-nodes-idempotency/blob/main/docs/nodes/prompt-cache-chat-model.md' }],
			},
		},
		inputs: [{ displayName: 'Model', type: NodeConnectionTypes.AiLanguageModel, required: true, maxConnections: 1 }],
		outputs: [{ displayName: 'Model', type: NodeConnectionTypes.AiLanguageModel }],
		credentials: [
			{
				name: 'idempotencyPostgresApi',
				required: true,
				testedBy: 'idempotencyPostgresApiTest',
				displayOptions: { hide: { backend: ['redis', 'builtin'] } },
			},
			{
				name: 'idempotencyRedisApi',
				required: true,
				testedBy: 'idempotencyRedisApiTest',
				displayOptions: { hide: { backend: ['postgres', 'builtin'] } },
			},
			{
				name: 'idempotencyBuiltinApi',
				required: false,
				testedBy: 'idempotencyBuiltinApiTest',
				displayOptions: { hide: { backend: ['postgres', 'redis'] } },
			},
		],
		properties: [
			{
				displayName:
					'Connect a Chat Model to the Model input, and this node to the Chat Model slot of an AI Agent or LLM Chain. Only calls at temperature 0 are cached unless you turn on "Cache at Any Temperature".',
				name: 'notice',
				type: 'notice',
				default: '',
			},
			...backendProperties,
			{
				displayName: 'Options',
				name: 'options',
				type: 'collection',
				placeholder: 'Add Option',
				default: {},
				options: [
					...durationOptions(ANSWER_WITHIN),
					{
						displayName: 'Cache at Any Temperature',
						name: 'anyTemperature',
						type: 'boolean',
						default: false,
						description: 'Whether to cache answers also when the model\'s temperature is above 0 or not set. Off by default: such a model is meant to vary, and its calls go to the model uncached.',
					},
					{
						displayName: 'Count Hits and Misses',
						name: 'recordStats',
						type: 'boolean',
						default: true,
						description: 'Whether to add each call\'s hit or miss, tokens and money saved to the cache stats (Prompt Cache\'s Get Stats, Idempotency Ledger\'s Get Stats)',
					},
					editorTestRunsOption(true, '"Skip the Ledger" sends every call to the model uncached.'),
					{
						displayName: 'Force Refresh',
						name: 'forceRefresh',
						type: 'boolean',
						default: false,
						description: 'Whether to ignore stored answers: every call asks the model, and its answer replaces the stored one',
					},
					...durationOptions(KEEP_ANSWERS),
					{
						displayName: 'Max Answer Size (KB)',
						name: 'maxResponseKb',
						type: 'number',
						typeOptions: { minValue: 1 },
						default: 256,
						description: 'Largest answer stored, measured as JSON. A larger answer reaches the agent but is not stored.',
					},
					...PRICE_OPTIONS,
					{
						displayName: 'Shadow Mode (Measure Only)',
						name: 'shadowMode',
						type: 'boolean',
						default: false,
						description: 'Whether to ask the model on every call, while counting how often the cache would have answered and how often the fresh answer differs from the cached one',
					},
					{
						...sharedNamespaceOption,
						description: 'Share answers with every workflow that uses this same name. Leave it out to share answers only within this workflow.',
					},
					{
						displayName: 'Skip the Cache',
						name: 'skipCache',
						type: 'boolean',
						default: false,
						description: 'Whether to send every call to the model without reading or storing the cache. Can be an expression.',
					},
					{
						displayName: 'Stop if the Ledger Is Down',
						name: 'failClosed',
						type: 'boolean',
						default: false,
						description: 'Whether to stop the agent with an error when the ledger cannot be reached. Off by default: the model is asked uncached and the run shows a warning.',
					},
					...durationOptions(WAIT_UP_TO).map((p) =>
						p.name === WAIT_UP_TO.name
							? { ...p, description: `How long a call waits for an identical call that is asking the model right now; after that it asks the model itself. In ${WAIT_UP_TO.unit}, unless you also add "${WAIT_UP_TO.displayName} Unit".` }
							: p,
					),
				],
			},
		],
	};

	methods = { credentialTest };

	async supplyData(this: ISupplyDataFunctions, itemIndex: number): Promise<SupplyData> {
		const node = this.getNode();
		const connected = (await this.getInputConnectionData(NodeConnectionTypes.AiLanguageModel, itemIndex)) as unknown;
		const model = Array.isArray(connected) ? connected[0] : connected;
		if (!model || typeof (model as { _generate?: unknown })._generate !== 'function' || typeof (model as { _streamResponseChunks?: unknown })._streamResponseChunks !== 'function') {
			throw new NodeOperationError(node, model ? 'The node connected to "Model" is not a Chat Model' : 'No Chat Model is connected', {
				itemIndex,
				description: 'Connect a Chat Model sub-node (for example OpenAI Chat Model) to the "Model" input of Prompt Cache Chat Model.',
			});
		}
		let settings: ChatCacheSettings;
		try {
			settings = readSettings(this, itemIndex);
		} catch (error) {
			throw toNodeError(node, error, itemIndex);
		}
		return { response: installChatCache(model as Parameters<typeof installChatCache>[0], settings, hostFor(this)) };
	}
}
