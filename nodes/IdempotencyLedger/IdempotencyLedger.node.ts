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
import * as checkpoint from './actions/checkpoint/Checkpoint.resource';
import * as key from './actions/key/Key.resource';
import * as ledger from './actions/ledger/Ledger.resource';
import { copyDirectionProperty } from './actions/ledger/copy.operation';
import * as review from './actions/review/Review.resource';
import { router } from './actions/router';

// Not offered to AI agents as a tool (least privilege): an agent has no need to release, reset or purge rows.
// Only Guarded Send is. The rule below asks every node to declare usableAsTool.
/** The operator's node: inspect and repair the idempotency ledger. Each operation lives in actions/. */
// eslint-disable-next-line @n8n/community-nodes/node-usable-as-tool
export class IdempotencyLedger implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Idempotency Ledger',
		name: 'idempotencyLedger',
		icon: { light: 'file:idempotencyLedger.svg', dark: 'file:idempotencyLedger.dark.svg' },
		group: ['transform'],
		version: NODE_VERSIONS,
		subtitle:
			'={{ (({"key": {"get": "Get key", "list": "List keys", "release": "Release key" }, "ledger": {"dashboard": "Render dashboard", "stats": "Get stats", "purge": "Purge expired", "copyInto": "Copy into another ledger" }, "checkpoint": {"get": "Get checkpoint", "set": "Set checkpoint" }, "review": {"ask": "Ask a person once", "settle": "Settle a review" } })[$parameter["resource"]] || {})[$parameter["operation"]] }}',
		description: 'Look up, list, release and purge idempotency keys, ask a person about Needs Review, see stats, keep sync checkpoints, and copy a ledger into another',
		defaults: { name: 'Idempotency Ledger' },
		inputs: [NodeConnectionTypes.Main],
		outputs: [NodeConnectionTypes.Main],
		credentials: ledgerCredentials,
		properties: [
			// The copy puts its direction in the place of the ledger selector (see copy.operation.ts).
			...backendProperties.map((p) => ({ ...p, displayOptions: { ...p.displayOptions, hide: { operation: ['copyInto'] } } })),
			copyDirectionProperty,
			{
				displayName: 'Resource',
				name: 'resource',
				type: 'options',
				noDataExpression: true,
				options: [
					{ name: 'Checkpoint', value: 'checkpoint', description: 'The cursor or high-water mark of a paginated sync' },
					{ name: 'Key', value: 'key', description: 'Idempotency keys and their steps' },
					{ name: 'Ledger', value: 'ledger', description: 'Stats, a dashboard page, clean-up, and copying into another ledger' },
					{ name: 'Review', value: 'review', description: 'Ask a person about a Needs Review step, and apply their answer' },
				],
				default: 'key',
			},
			...key.description,
			...ledger.description,
			...checkpoint.description,
			...review.description,
		],
	};

	methods = { credentialTest };

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		return await router.call(this);
	}
}
