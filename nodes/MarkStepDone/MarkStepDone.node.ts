// First: refuses, with a clear message, an n8n too old to run the package.
import '../../lib/n8n/supportedN8n';
import {
	NodeConnectionTypes,
	type IExecuteFunctions,
	type INodeExecutionData,
	type INodeType,
	type INodeTypeDescription,
} from 'n8n-workflow';

import { backendProperties, credentialTest, ledgerCredentials, NODE_VERSIONS } from '../../lib/n8n/ledgerAccess';
import { unitKeyNamespaceOption, unitKeyProperties } from '../../lib/n8n/lineage';
import { durationOptions } from '../../lib/n8n/scope';
import { editorTestRunsOption } from '../../lib/n8n/testRuns';
import { executeMarkStepDone } from './execute';
import { KEEP_RECORD } from './options';

// Not offered to AI agents as a tool (least privilege): an agent has no need to record steps.
// Only Guarded Send is. The rule below asks every node to declare usableAsTool.
// eslint-disable-next-line @n8n/community-nodes/node-usable-as-tool
export class MarkStepDone implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Mark Step Done',
		name: 'markStepDone',
		icon: { light: 'file:markStepDone.svg', dark: 'file:markStepDone.dark.svg' },
		group: ['transform'],
		version: NODE_VERSIONS,
		// An empty Step records the region's step at the end of a Start Step region, and the unit of
		// work anywhere else: the subtitle cannot see the canvas, so it names both. Short: the canvas
		// cuts a subtitle at about 25 characters, and the status must stay in view.
		subtitle: '={{ ($parameter["step"] ? $parameter["step"] : "region or unit") + ": " + $parameter["status"] }}',
		description: 'Record that a step of a unit of work happened, with its result, so that a retry skips it',
		defaults: { name: 'Mark Step Done' },
		inputs: [NodeConnectionTypes.Main],
		outputs: [NodeConnectionTypes.Main],
		credentials: ledgerCredentials,
		properties: [
			...backendProperties,
			...unitKeyProperties,
			{
				displayName: 'Step',
				name: 'step',
				type: 'string',
				default: '',
				placeholder: 'e.g. invoiceCreate',
				description: 'Name of the step to record. Leave empty to record the step its Start Step started (at the end of a region), or else the unit of work itself: the key the Dedupe Gate let through is then done.',
			},
			{
				displayName: 'Status',
				name: 'status',
				type: 'options',
				noDataExpression: true,
				options: [
					{ name: 'Completed', value: 'completed', description: 'It happened; a repeat is skipped and gets the stored result' },
					{ name: 'Failed, Retry Later', value: 'failed_retryable', description: 'It did not happen; the next run may try again' },
					{ name: 'Needs Review', value: 'needs_review', description: 'A person has to look before anything is tried again' },
				],
				default: 'completed',
			},
			{
				displayName: 'External ID',
				name: 'externalId',
				type: 'string',
				default: '',
				placeholder: 'e.g. {{ $json.invoiceId }}',
				description: 'ID the other system gave the result, such as an invoice or message ID. Optional.',
			},
			{
				displayName: 'Store Result',
				name: 'resultFrom',
				type: 'options',
				noDataExpression: true,
				options: [
					{ name: 'This Item\'s Data', value: 'item', description: 'Store the incoming item; a repeat gets it back' },
					{ name: 'Custom JSON', value: 'json', description: 'Store what you enter below' },
					{ name: 'Nothing', value: 'none' },
				],
				default: 'item',
				description: 'What is kept as the stored result and replayed on a repeat',
			},
			{
				displayName: 'Result',
				name: 'resultJson',
				type: 'json',
				default: '{}',
				description: 'JSON to store as the result',
				displayOptions: { show: { resultFrom: ['json'] } },
			},
			{
				displayName: 'Options',
				name: 'options',
				type: 'collection',
				placeholder: 'Add Option',
				default: {},
				options: [
					{
						displayName: 'Also Record the Unit of Work',
						name: 'completeUnit',
						type: 'boolean',
						default: false,
						description: 'Whether to give the unit of work itself (the key the Dedupe Gate let through) the same status, so the gate treats that key as done. Only used when a step name is set.',
					},
					...durationOptions(KEEP_RECORD),
					{
						displayName: 'Items With an Error',
						name: 'errorItems',
						type: 'options',
						options: [
							{
								name: 'Record as Failed, Retry Later',
								value: 'failed',
								description: 'The action did not happen; the next run does it again',
							},
							{
								name: 'Record With the Status Above',
								value: 'status',
								description: 'The error still means the action happened (for example "already exists")',
							},
						],
						default: 'failed',
						description: 'At the end of a region: what an item that carries the error of a node set to "On Error: Continue" is recorded as',
					},
					editorTestRunsOption(false, 'When the key comes from the Dedupe Gate (automatic), the gate\'s own setting applies, so this matters only for a key given as an expression.'),
					{
						displayName: 'Record Even if Another Run Holds the Key',
						name: 'overrideClaim',
						type: 'boolean',
						default: false,
						description: 'Whether to write the record even while another execution is still working on the key. Off by default: that run is left alone and the item fails. It never writes once another run has taken over the key this run\'s Dedupe Gate let through: only the Idempotency Ledger node changes what another run recorded.',
					},
					unitKeyNamespaceOption,
				],
			},
		],
	};

	methods = { credentialTest };

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		return await executeMarkStepDone.call(this);
	}
}
