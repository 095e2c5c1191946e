import {
	NodeConnectionTypes,
	type IExecuteFunctions,
	type INodeExecutionData,
	type INodeProperties,
	type INodeType,
	type INodeTypeDescription,
} from 'n8n-workflow';

import { backendProperty, credentialTest } from '../../lib/n8n/ledgerAccess';
import { durationProperties, scopeProperties } from '../../lib/n8n/scope';
import { editorTestRunsOption } from '../../lib/n8n/testRuns';
import { executeDedupeGate } from './execute';

/**
 * Outputs follow the mismatch policy: a fourth output only when mismatches are routed. This
 * function's source is evaluated inside n8n's expression sandbox, so it may use literals only.
 */
const configuredOutputs = (parameters: { onMismatch?: string }) => {
	const outputs = [
		{ type: 'main', displayName: 'New' },
		{ type: 'main', displayName: 'Duplicate' },
		{ type: 'main', displayName: 'In Progress' },
	];
	if (parameters.onMismatch === 'route') outputs.push({ type: 'main', displayName: 'Payload Mismatch' });
	return outputs;
};

const keyProperties: INodeProperties[] = [
	{
		displayName: 'Key From',
		name: 'keySource',
		type: 'options',
		noDataExpression: true,
		options: [
			{
				name: 'Field Name',
				value: 'field',
				description: 'Read the key from one field of the item, for example an event or order field. Fastest.',
			},
			{
				name: 'Expression',
				value: 'expression',
				description: 'Build the key with an expression',
			},
			{
				name: 'Hash of Chosen Fields',
				value: 'fields',
				description: 'The key is a hash of the values of several fields',
			},
			{
				name: 'Hash of Whole Item',
				value: 'item',
				description: 'The key is a hash of the whole item, with key order and surrounding whitespace ignored',
			},
		],
		default: 'field',
		description: 'Where the idempotency key of each item comes from. Use the identifier of the business event (event ID, order ID), never a timestamp.',
	},
	{
		displayName: 'Key Field',
		name: 'keyField',
		type: 'string',
		default: 'id',
		required: true,
		placeholder: 'e.g. body.eventId',
		description: 'Name of the field that holds the key. Use dots for nested fields and brackets for odd names, e.g. ["order number"].',
		displayOptions: { show: { keySource: ['field'] } },
	},
	{
		displayName: 'Key',
		name: 'keyExpression',
		type: 'string',
		default: '={{ $json.id }}',
		required: true,
		placeholder: 'e.g. {{ $json.body.eventId }}',
		description: "The idempotency key. A plain field of the item, or of an earlier node's item (as n8n writes it when you drag a field in), is read directly and costs nothing. Other expressions are evaluated by n8n, for many items at once when they use no $input, arrow functions or template literals.",
		displayOptions: { show: { keySource: ['expression'] } },
	},
	{
		displayName: 'Fields to Hash',
		name: 'keyFields',
		type: 'string',
		default: '',
		required: true,
		placeholder: 'e.g. email, order.number',
		description: 'Comma-separated field names whose values together identify the item',
		displayOptions: { show: { keySource: ['fields'] } },
	},
];

// Not offered to AI agents as a tool (least privilege): an agent has no need to gate items.
// Only Guarded Send is. The rule below asks every node to declare usableAsTool.
// eslint-disable-next-line @n8n/community-nodes/node-usable-as-tool
export class DedupeGate implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Dedupe Gate',
		name: 'dedupeGate',
		icon: { light: 'file:dedupeGate.svg', dark: 'file:dedupeGate.dark.svg' },
		group: ['transform'],
		version: 1,
		subtitle: '={{ {"lease": "Claim until completed", "seen": "Mark seen now", "newer": "Only newer versions"}[$parameter["mode"]] }}',
		description: 'Let each key through once, however often a flow is retried or replayed',
		defaults: { name: 'Dedupe Gate' },
		inputs: [NodeConnectionTypes.Main],
		outputs: `={{(${configuredOutputs})($parameter)}}`,
		credentials: [
			{
				name: 'idempotencyPostgresApi',
				required: true,
				testedBy: 'idempotencyPostgresApiTest',
				displayOptions: { hide: { backend: ['redis'] } },
			},
			{
				name: 'idempotencyRedisApi',
				required: true,
				testedBy: 'idempotencyRedisApiTest',
				displayOptions: { hide: { backend: ['postgres'] } },
			},
		],
		properties: [
			backendProperty,
			...keyProperties,
			{
				displayName: 'Mode',
				name: 'mode',
				type: 'options',
				noDataExpression: true,
				options: [
					{
						name: 'Claim Until Completed',
						value: 'lease',
						description: 'Hold the key in progress until Mark Step Done or Guarded Send completes it. If the run dies, the key frees up once the lease runs out.',
					},
					{
						name: 'Mark Seen Now',
						value: 'seen',
						description: 'Record the key as done at once: at most once, like Remove Duplicates, but safe under concurrency',
					},
					{
						name: 'Only Newer Versions',
						value: 'newer',
						description: 'Let a key through again only when its version field is greater, for out-of-order webhooks',
					},
				],
				default: 'lease',
			},
			{
				displayName: 'Version Field',
				name: 'versionField',
				type: 'string',
				default: '',
				required: true,
				placeholder: 'e.g. updated_at',
				description: 'Field that orders versions of the same key: a number, or an ISO date',
				displayOptions: { show: { mode: ['newer'] } },
			},
			...durationProperties('lease', 'Lease', 10, 'minutes', 'How long a claim stays in progress before another run may take the key over', { mode: ['lease'] }),
			...scopeProperties,
			...durationProperties('retention', 'Keep Keys For', 30, 'days', 'How long a key is remembered. After that it counts as new again.'),
			{
				displayName: 'When the Payload Differs',
				name: 'onMismatch',
				type: 'options',
				noDataExpression: true,
				options: [
					{ name: 'Treat as Duplicate', value: 'duplicate', description: 'Send it to the Duplicate output, marked as a mismatch' },
					{ name: 'Send to Its Own Output', value: 'route', description: 'Add a Payload Mismatch output for these items' },
					{ name: 'Stop With an Error', value: 'error', description: 'Fail the item: the same key must never carry different content' },
				],
				default: 'duplicate',
				description: 'What to do when a key arrives again with different content',
			},
			{
				displayName: 'Options',
				name: 'options',
				type: 'collection',
				placeholder: 'Add Option',
				default: {},
				options: [
					{
						displayName: 'Compare Fields',
						name: 'compareFields',
						type: 'string',
						default: '',
						placeholder: 'e.g. body',
						description: 'Comma-separated fields whose content must match on a repeat. Empty compares the whole item (only "body" for Webhook items).',
					},
					editorTestRunsOption(true, '"Skip the Ledger" sends every item to New.'),
					{
						displayName: 'Let Items Through if the Ledger Is Down',
						name: 'failOpen',
						type: 'boolean',
						default: false,
						description: 'Whether to send every item to New when the ledger cannot be reached. Off by default: the gate fails closed and nothing is sent twice.',
					},
					{
						displayName: 'Step',
						name: 'step',
						type: 'string',
						default: '',
						placeholder: 'e.g. import',
						description: 'Ledger step to claim. Leave empty for the unit of work itself.',
					},
				],
			},
		],
	};

	methods = { credentialTest };

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		return await executeDedupeGate.call(this);
	}
}
