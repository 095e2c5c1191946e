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
import { durationOptions, sharedNamespaceOption } from '../../lib/n8n/scope';
import { editorTestRunsOption } from '../../lib/n8n/testRuns';
import { executeDedupeGate, LEASE, RETENTION } from './execute';

/**
 * Outputs follow the mismatch policy: a fourth output only when mismatches are routed. This
 * function's source is evaluated inside n8n's expression sandbox, so it may use literals only.
 */
const configuredOutputs = (parameters: { options?: { onMismatch?: string } }) => {
	const outputs = [
		{ type: 'main', displayName: 'New' },
		{ type: 'main', displayName: 'Duplicate' },
		{ type: 'main', displayName: 'In Progress' },
	];
	if ((parameters.options || {}).onMismatch === 'route') outputs.push({ type: 'main', displayName: 'Payload Mismatch' });
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
				name: 'Expression',
				value: 'expression',
				description: 'A field dragged in from the input, or any expression; the panel shows the key it reads',
			},
			{
				name: 'Field Name',
				value: 'field',
				description: 'The name of one field, typed as text, e.g. body.eventId',
			},
			{
				name: 'Hash of Chosen Fields',
				value: 'fields',
				description: 'Several fields that together identify the item',
			},
			{
				name: 'Hash of Whole Item',
				value: 'item',
				description: 'The whole item; key order and surrounding spaces do not matter',
			},
		],
		default: 'expression',
		description: 'Where the key of each item comes from: the ID of the event or order it is about (never a timestamp). Items with the same key are let through once.',
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
		description: 'The key of each item: drag the ID of the event or order here from the input. Items with the same key go to New once.',
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
		version: NODE_VERSIONS,
		// Short: the canvas cuts a subtitle at about 25 characters.
		subtitle: '={{ {"auto": "done when run succeeds", "lease": "done by Mark Step Done", "seen": "done when it passes", "newer": "only newer versions"}[$parameter["mode"]] }}',
		description: 'Let each key through once, however often a flow is retried or replayed',
		defaults: { name: 'Dedupe Gate' },
		inputs: [NodeConnectionTypes.Main],
		outputs: `={{(${configuredOutputs})($parameter)}}`,
		credentials: ledgerCredentials,
		properties: [
			...backendProperties,
			...keyProperties,
			{
				displayName: 'Mark Keys Done',
				name: 'mode',
				type: 'options',
				noDataExpression: true,
				options: [
					{
						name: 'When the Execution Succeeds',
						value: 'auto',
						description:
							'A key is held while this execution runs and counts as done when it ends without an error, unless a Guarded Send in it did not send for that key (Needs Review, In Progress) or a Mark Step Done recorded one of its steps as failed or for review: those keys, and all keys of a failed execution, are let through again at once. After a crash the key is free within 30 seconds and the work after the gate runs again (at least once): guard a node that must not run twice with Start Step or Guarded Send.',
					},
					{
						name: 'When Mark Step Done Records It',
						value: 'lease',
						description: 'A key is held until a Mark Step Done node (or Guarded Send with "Also Complete the Unit of Work") records it. If nothing records it, it is let through again within 30 seconds of the end of the execution, or once the lease has passed.',
					},
					{
						name: 'As Soon As It Passes',
						value: 'seen',
						description: 'A key counts as done the moment it passes, like Remove Duplicates but safe when executions run at the same time. A crash after the gate is not retried.',
					},
					{
						name: 'Only Newer Versions',
						value: 'newer',
						description: 'A key passes again only when its version field is greater, for webhooks that arrive out of order',
					},
				],
				default: 'auto',
				description: 'When a key that went to New counts as done, so that the next item with it goes to Duplicate',
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
						description: 'Comma-separated fields whose content must match when a key comes again, unless "When the Content Differs" is "Treat as Duplicate". Empty compares the whole item (only "body" for Webhook items).',
					},
					editorTestRunsOption(true, '"Skip the Ledger" sends every item to New.'),
					...durationOptions(LEASE),
					...durationOptions(RETENTION),
					{
						displayName: 'Let Items Through if the Ledger Is Down',
						name: 'failOpen',
						type: 'boolean',
						default: false,
						description: 'Whether to send every item to New when the ledger database cannot be reached. Off by default: then the node stops with an error and nothing is sent twice.',
					},
					sharedNamespaceOption,
					{
						displayName: 'Step',
						name: 'step',
						type: 'string',
						default: '',
						placeholder: 'e.g. import',
						description: 'Name of a step within the key to check instead of the key itself. Leave empty in most flows.',
					},
					{
						displayName: 'When the Content Differs',
						name: 'onMismatch',
						type: 'options',
						options: [
							{ name: 'Treat as Duplicate', value: 'duplicate', description: 'Send it to Duplicate like any repeat; content is not compared (the fastest)' },
							{ name: 'Send to Its Own Output', value: 'route', description: 'Add a Payload Mismatch output for these items' },
							{ name: 'Stop With an Error', value: 'error', description: 'Fail the item: one key must never carry different content' },
						],
						default: 'duplicate',
						description: 'What to do when a key comes again with different content (see Compare Fields)',
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
