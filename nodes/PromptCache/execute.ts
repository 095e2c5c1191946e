import type { IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

import { LedgerInputError } from '../../lib/ledger/errors';
import { toNodeError } from '../../lib/n8n/errors';
import { executeLookup } from './lookup';
import { executeStats } from './stats';
import { executeStore } from './store';

/** Dispatches to the operation. */
export async function executePromptCache(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	const operation = this.getNodeParameter('operation', 0, 'lookup') as string;
	switch (operation) {
		case 'lookup':
			return await executeLookup.call(this);
		case 'store':
			return await executeStore.call(this);
		case 'stats':
			return await executeStats.call(this);
		default:
			throw toNodeError(this.getNode(), new LedgerInputError(`Unknown operation "${operation}"`));
	}
}
