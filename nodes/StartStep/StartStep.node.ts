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
import { executeStartStep } from './execute';
import { HOLD_STEP, KEEP_RECORDS } from './options';

/**
 * A Check First output only when the builder chose to check: then it is the fifth, so the other
 * four keep their places. Evaluated inside n8n's expression sandbox: literals only.
 */
const configuredOutputs = (parameters: { onUncertain?: string }) => {
	const outputs = [
		{ type: 'main', displayName: 'Run' },
		{ type: 'main', displayName: 'Skipped' },
		{ type: 'main', displayName: 'Needs Review' },
		{ type: 'main', displayName: 'In Progress' },
	];
	if (parameters.onUncertain === 'check') outputs.push({ type: 'main', displayName: 'Check First' });
	return outputs;
};

// Not offered to AI agents as a tool: a region is built on the canvas. Guarded Send is the agent's tool.
// eslint-disable-next-line @n8n/community-nodes/node-usable-as-tool
export class StartStep implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Start Step',
		name: 'startStep',
		icon: { light: 'file:startStep.svg', dark: 'file:startStep.dark.svg' },
		group: ['transform'],
		version: NODE_VERSIONS,
		subtitle: '={{ $parameter["step"] ? $parameter["step"] + " (once per key)" : "once per key" }}',
		description: 'Run the nodes after it once per key, even after a crash: end the region with Mark Step Done',
		defaults: { name: 'Start Step' },
		inputs: [NodeConnectionTypes.Main],
		outputs: `={{(${configuredOutputs})($parameter)}}`,
		credentials: ledgerCredentials,
		properties: [
			{
				displayName:
					'The nodes after <b>Run</b> form a region that runs once per key. End it with a Mark Step Done (Step left empty). A run that dies inside the region never makes the next run act blindly: that run goes to Check First or Needs Review.',
				name: 'regionNotice',
				type: 'notice',
				default: '',
			},
			...backendProperties,
			...unitKeyProperties,
			{
				displayName: 'Step',
				name: 'step',
				type: 'string',
				default: '',
				required: true,
				placeholder: 'e.g. create contact',
				description: 'Name of what the region does, such as "create contact". Mark Step Done at the end of the region records this step.',
			},
			{
				displayName: 'If a Run Died Inside the Region',
				name: 'onUncertain',
				type: 'options',
				noDataExpression: true,
				options: [
					{
						name: 'Send to Needs Review',
						value: 'review',
						description: 'A person finds out whether it happened and releases the key with the Idempotency Ledger node',
					},
					{
						name: 'Send to Check First',
						value: 'check',
						description:
							'Adds a Check First output: look the action up at the destination (a search, a GET, a SELECT), then record it with Mark Step Done if it is there, or run the region\'s nodes if not',
					},
				],
				default: 'review',
				description: 'What happens to the next item with the key when an earlier run started the region and stopped before Mark Step Done recorded it: its nodes may have acted',
			},
			{
				displayName: 'Options',
				name: 'options',
				type: 'collection',
				placeholder: 'Add Option',
				default: {},
				options: [
					...durationOptions(HOLD_STEP),
					...durationOptions(KEEP_RECORDS),
					editorTestRunsOption(false, 'When the key comes from the Dedupe Gate (automatic), the gate\'s own setting applies, so this matters only for a key given as an expression.'),
					unitKeyNamespaceOption,
				],
			},
		],
	};

	methods = { credentialTest };

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		return await executeStartStep.call(this);
	}
}
