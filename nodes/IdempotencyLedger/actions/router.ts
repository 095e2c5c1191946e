import { NodeOperationError, type IExecuteFunctions, type INodeExecutionData } from 'n8n-workflow';

import * as checkpoint from './checkpoint/Checkpoint.resource';
import type { Execute } from './common';
import * as key from './key/Key.resource';
import * as ledger from './ledger/Ledger.resource';
import * as review from './review/Review.resource';

const operations: Record<string, Record<string, { execute: Execute }>> = {
	key: { get: key.get, list: key.list, release: key.release },
	ledger: { dashboard: ledger.dashboard, stats: ledger.stats, purge: ledger.purge, copyInto: ledger.copyInto },
	checkpoint: { get: checkpoint.get, set: checkpoint.set },
	review: { ask: review.ask, settle: review.settle },
};

/** Dispatches to `actions/<resource>/<operation>.operation.ts`; each runs once per input item. */
export async function router(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	const items = this.getInputData();
	const resource = this.getNodeParameter('resource', 0) as string;
	const operation = this.getNodeParameter('operation', 0) as string;
	const op = Object.prototype.hasOwnProperty.call(operations, resource) ? operations[resource][operation] : undefined;
	if (!op || !Object.prototype.hasOwnProperty.call(operations[resource], operation)) {
		throw new NodeOperationError(this.getNode(), `The operation "${operation}" of "${resource}" is not supported`, {
			description: 'Pick a resource and an operation from the lists in the node.',
		});
	}
	return [await op.execute.call(this, items)];
}
