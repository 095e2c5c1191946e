// First: refuses, with a clear message, an n8n too old to run the package.
import '../../lib/n8n/supportedN8n';
import {
	NodeConnectionTypes,
	type IExecuteFunctions,
	type INodeExecutionData,
	type INodeProperties,
	type INodeType,
	type INodeTypeDescription,
} from 'n8n-workflow';

import { backendProperties, credentialTest, ledgerCredentials, NODE_VERSIONS } from '../../lib/n8n/ledgerAccess';
import { durationOptions, scopeProperties, sharedNamespaceOption } from '../../lib/n8n/scope';
import { editorTestRunsOption } from '../../lib/n8n/testRuns';
import { executePromptCache } from './execute';
import { ANSWER_WITHIN, KEEP_ANSWERS, PRICE_OPTIONS, WAIT_UP_TO } from './options';

/**
 * Lookup has Hit and Miss; Store and Get Stats have one output. This function's source is
 * evaluated inside n8n's expression sandbox, so it may use literals only.
 */
const configuredOutputs = (parameters: { operation?: string }) => {
	if (parameters.operation === 'store') return [{ type: 'main', displayName: 'Stored' }];
	if (parameters.operation === 'stats') return [{ type: 'main', displayName: 'Stats' }];
	return [
		{ type: 'main', displayName: 'Hit' },
		{ type: 'main', displayName: 'Miss' },
	];
};

/** Adds `show` conditions to a property, keeping the ones it has. */
const showOn = (property: INodeProperties, show: Record<string, string[]>): INodeProperties => ({
	...property,
	displayOptions: { ...property.displayOptions, show: { ...property.displayOptions?.show, ...show } },
});

const lookup = { operation: ['lookup'] };
const store = { operation: ['store'] };

const promptProperties: INodeProperties[] = [
	{
		displayName: 'Prompt From',
		name: 'promptSource',
		type: 'options',
		noDataExpression: true,
		options: [
			{ name: 'Text Fields', value: 'text', description: 'A system prompt and a prompt, as in the Basic LLM Chain' },
			{ name: 'Chat Messages', value: 'messages', description: 'A list of messages with a role and content each, as the OpenAI and Anthropic nodes send' },
			{ name: 'API Request Body', value: 'body', description: 'The whole JSON body an HTTP Request node sends to the model API; the model, messages and parameters are read from it' },
		],
		default: 'text',
		description: 'How the request to the model is given. The same request gives the same key whichever form is used.',
		displayOptions: { show: lookup },
	},
	{
		displayName: 'Model',
		name: 'model',
		type: 'string',
		default: '',
		required: true,
		placeholder: 'e.g. gpt-4o-mini',
		description: 'The model the AI node uses. Part of the cache key: another model never gets this answer.',
		displayOptions: { show: { ...lookup, promptSource: ['text', 'messages'] } },
	},
	{
		displayName: 'System Prompt',
		name: 'systemPrompt',
		type: 'string',
		typeOptions: { rows: 2 },
		default: '',
		placeholder: 'e.g. You are a helpful assistant',
		description: 'The instructions for the model, if the AI node sends any. With chat messages, a system message in the list works too.',
		displayOptions: { show: { ...lookup, promptSource: ['text', 'messages'] } },
	},
	{
		displayName: 'Prompt',
		name: 'prompt',
		type: 'string',
		typeOptions: { rows: 4 },
		default: '',
		required: true,
		placeholder: 'e.g. {{ $json.question }}',
		description: 'The text sent to the model. Surrounding whitespace and line-ending style are ignored.',
		displayOptions: { show: { ...lookup, promptSource: ['text'] } },
	},
	{
		displayName: 'Messages',
		name: 'messages',
		type: 'json',
		default: '={{ $json.messages }}',
		required: true,
		description: 'The chat as a list such as [{"role": "user", "content": "Hello"}]',
		displayOptions: { show: { ...lookup, promptSource: ['messages'] } },
	},
	{
		displayName: 'Request Body',
		name: 'requestBody',
		type: 'json',
		default: '={{ $json.body }}',
		required: true,
		description: 'The JSON body sent to the model API, such as {"model": "gpt-4o-mini", "messages": [...], "temperature": 0}. Fields that never change the answer (user, stream, timeouts, metadata) are left out of the key.',
		displayOptions: { show: { ...lookup, promptSource: ['body'] } },
	},
	{
		displayName: 'Model Parameters',
		name: 'modelParameters',
		type: 'collection',
		placeholder: 'Add Parameter',
		default: {},
		description: 'Set the same values as in the AI node. Each one is part of the cache key.',
		displayOptions: { show: { ...lookup, promptSource: ['text', 'messages'] } },
		options: [
			{
				displayName: 'Frequency Penalty',
				name: 'frequencyPenalty',
				type: 'number',
				typeOptions: { numberPrecision: 2 },
				default: 0,
			},
			{
				displayName: 'Maximum Number of Tokens',
				name: 'maxTokens',
				type: 'number',
				typeOptions: { minValue: 1 },
				default: 1024,
			},
			{
				displayName: 'Other Parameters (JSON)',
				name: 'otherParameters',
				type: 'json',
				default: '{}',
				description: 'Any other request parameter, such as {"stop": ["\\n\\n"]}. Unknown parameters are part of the key, to be safe.',
			},
			{
				displayName: 'Presence Penalty',
				name: 'presencePenalty',
				type: 'number',
				typeOptions: { numberPrecision: 2 },
				default: 0,
			},
			{
				displayName: 'Reasoning Effort',
				name: 'reasoningEffort',
				type: 'options',
				options: [
					{ name: 'Minimal', value: 'minimal' },
					{ name: 'Low', value: 'low' },
					{ name: 'Medium', value: 'medium' },
					{ name: 'High', value: 'high' },
				],
				default: 'medium',
			},
			{
				displayName: 'Response Format',
				name: 'responseFormat',
				type: 'options',
				options: [
					{ name: 'Text', value: 'text' },
					{ name: 'JSON Object', value: 'json_object' },
				],
				default: 'text',
			},
			{
				displayName: 'Seed',
				name: 'seed',
				type: 'number',
				default: 0,
			},
			{
				displayName: 'Temperature',
				name: 'temperature',
				type: 'number',
				typeOptions: { minValue: 0, maxValue: 2, numberPrecision: 2 },
				default: 1,
			},
			{
				displayName: 'Tools (JSON)',
				name: 'tools',
				type: 'json',
				default: '[]',
				description: 'The tool (function) definitions the AI node sends, if any',
			},
			{
				displayName: 'Top K',
				name: 'topK',
				type: 'number',
				typeOptions: { minValue: 0 },
				default: 0,
			},
			{
				displayName: 'Top P',
				name: 'topP',
				type: 'number',
				typeOptions: { minValue: 0, maxValue: 1, numberPrecision: 2 },
				default: 1,
			},
		],
	},
];

/** Lookup's Options for when the same prompt is being asked in another run right now. */
const singleFlightOptions: INodeProperties[] = [
	...durationOptions(ANSWER_WITHIN),
	{
		displayName: 'When Another Run Is Asking',
		name: 'whileComputing',
		type: 'options',
		options: [
			{
				name: 'Wait for Its Answer',
				value: 'wait',
				description: 'Wait until that run stores the answer, then go to Hit. Only one run pays for the call.',
			},
			{
				name: 'Go to Miss',
				value: 'miss',
				description: 'Do not wait: ask the model again. Its answer is not stored over the other run\'s.',
			},
		],
		default: 'wait',
		description: 'What to do when another run asked the model the same prompt moments ago and its answer is not stored yet',
	},
	...durationOptions(WAIT_UP_TO),
];

const storeProperties: INodeProperties[] = [
	{
		displayName: 'Prompt Hash From',
		name: 'hashSource',
		type: 'options',
		noDataExpression: true,
		options: [
			{
				name: 'The Prompt Cache Lookup It Follows',
				value: 'lookup',
				description: 'Follow the item back to the Miss output of the Lookup it came through. Works through the AI node.',
			},
			{
				name: 'A Field',
				value: 'field',
				description: 'Read the hash from the item, e.g. a field set with the Lookup\'s "idempotency.promptHash"',
			},
		],
		default: 'lookup',
		displayOptions: { show: store },
	},
	{
		displayName: 'Lookup Node Name',
		name: 'lookupNode',
		type: 'string',
		default: '',
		placeholder: 'e.g. Prompt Cache Lookup',
		description: 'Name of the Prompt Cache Lookup node to follow back to. Leave empty to use the nearest one before this node.',
		displayOptions: { show: { ...store, hashSource: ['lookup'] } },
	},
	{
		displayName: 'Prompt Hash',
		name: 'promptHash',
		type: 'string',
		default: '={{ $json.promptHash }}',
		required: true,
		description: 'The 64-character hash the Lookup put on its Miss items under idempotency.promptHash',
		displayOptions: { show: { ...store, hashSource: ['field'] } },
	},
];

// Not offered to AI agents as a tool (least privilege): an agent has no need to read or write the cache.
// Only Guarded Send is. The rule below asks every node to declare usableAsTool.
// eslint-disable-next-line @n8n/community-nodes/node-usable-as-tool
export class PromptCache implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Prompt Cache',
		name: 'promptCache',
		icon: { light: 'file:promptCache.svg', dark: 'file:promptCache.dark.svg' },
		group: ['transform'],
		version: NODE_VERSIONS,
		subtitle: '={{ {"lookup": "Lookup", "store": "Store", "stats": "Get stats"}[$parameter["operation"]] }}',
		description: 'Answer a repeated LLM prompt from the ledger instead of paying for it again',
		defaults: { name: 'Prompt Cache' },
		inputs: [NodeConnectionTypes.Main],
		outputs: `={{(${configuredOutputs})($parameter)}}`,
		credentials: ledgerCredentials,
		properties: [
			...backendProperties,
			{
				displayName: 'Operation',
				name: 'operation',
				type: 'options',
				noDataExpression: true,
				options: [
					{
						name: 'Lookup',
						value: 'lookup',
						description: 'Send each item to Hit with the stored answer, or to Miss so it goes on to the AI node',
						action: 'Look up a prompt',
					},
					{
						name: 'Store',
						value: 'store',
						description: 'Save the AI node\'s answer for the prompt its item came from',
						action: 'Store an answer',
					},
					{
						name: 'Get Stats',
						value: 'stats',
						description: 'Hits, misses, tokens and money saved, and shadow mode\'s findings, per day and in total, for this workflow or a shared name',
						action: 'Get cache stats',
					},
				],
				default: 'lookup',
			},
			...promptProperties,
			...scopeProperties.map((p) => showOn(p, { operation: ['stats'] })),
			// With an explicit hash, Store needs the namespace too; following the Lookup, it uses the Lookup's.
			...scopeProperties.map((p) => showOn(p, { operation: ['store'], hashSource: ['field'] })),
			...storeProperties,
			{
				displayName: 'Options',
				name: 'options',
				type: 'collection',
				placeholder: 'Add Option',
				default: {},
				displayOptions: { show: lookup },
				options: [
					...singleFlightOptions,
					{
						...sharedNamespaceOption,
						description:
							'Share answers with every workflow that uses this same name. Leave it out to share answers only within this workflow.',
					},
					{
						displayName: 'Count Hits and Misses',
						name: 'recordStats',
						type: 'boolean',
						default: true,
						description: 'Whether to add this run\'s hits, misses, tokens and money saved to Get Stats. Written after the answer, with other runs\' counts, when the execution ends.',
					},
					{
						displayName: 'Force Refresh',
						name: 'forceRefresh',
						type: 'boolean',
						default: false,
						description: 'Whether to ignore a stored answer and send the item to Miss, so the AI node answers again and Store replaces the answer. Can be an expression per item.',
					},
					editorTestRunsOption(true, '"Skip the Ledger" sends every item to Miss.'),
					{
						displayName: 'Go to Miss if the Ledger Is Down',
						name: 'failOpen',
						type: 'boolean',
						default: false,
						description: 'Whether to send every item to Miss when the ledger cannot be reached, so the flow still gets answers (and pays for them). Off by default: the node stops with an error instead.',
					},
					{
						displayName: 'Hash Only',
						name: 'hashOnly',
						type: 'boolean',
						default: false,
						description: 'Whether to keep only the hash of the prompt, never its text, in the ledger and on Miss items (for privacy)',
					},
					{
						displayName: 'Ignore Parameters',
						name: 'ignoreParameters',
						type: 'string',
						default: '',
						placeholder: 'e.g. logit_bias, parallel_tool_calls',
						description: 'Comma-separated request parameters to leave out of the cache key. User ID, stream, timeouts and metadata are always left out.',
					},
					...PRICE_OPTIONS,
					{
						displayName: 'Shadow Mode (Measure Only)',
						name: 'shadowMode',
						type: 'boolean',
						default: false,
						description: 'Whether to send every item to Miss, so the model is always asked, while counting how often the cache would have answered and how often the fresh answer differs from the cached one. See Get Stats.',
					},
					{
						displayName: 'Skip the Cache',
						name: 'skipCache',
						type: 'boolean',
						default: false,
						description: 'Whether to send the item to Miss without reading the cache, and have Store keep its answer out of the cache. Can be an expression per item.',
					},
				],
			},
			{
				displayName: 'Options',
				name: 'storeOptions',
				type: 'collection',
				placeholder: 'Add Option',
				default: {},
				displayOptions: { show: store },
				options: [
					{
						displayName: 'Answer Field',
						name: 'responseField',
						type: 'string',
						default: '',
						placeholder: 'e.g. choices[0].message',
						description: 'Store only this field of the AI node\'s output. Leave empty to store the whole output, so a Hit looks exactly like the AI node\'s output.',
					},
					editorTestRunsOption(true, 'When Store follows its Lookup, the Lookup\'s setting applies. "Skip the Ledger" stores nothing.'),
					...durationOptions(KEEP_ANSWERS),
					{
						displayName: 'Max Answer Size (KB)',
						name: 'maxResponseKb',
						type: 'number',
						typeOptions: { minValue: 1 },
						default: 256,
						description: 'Largest answer stored, measured as JSON. A larger one fails the item with a clear error.',
					},
				],
			},
			{
				displayName: 'Options',
				name: 'statsOptions',
				type: 'collection',
				placeholder: 'Add Option',
				default: {},
				displayOptions: { show: { operation: ['stats'] } },
				options: [
					{
						displayName: 'Days',
						name: 'days',
						type: 'number',
						typeOptions: { minValue: 1, maxValue: 400 },
						default: 30,
						description: 'How many of the last days (UTC, today included) to report. Stats are kept 400 days.',
					},
					editorTestRunsOption(false, 'A test run that keeps its records apart shows the stats of test runs only.'),
				],
			},
		],
};

	methods = { credentialTest };

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		return await executePromptCache.call(this);
	}
}
