import {
	updateDisplayOptions,
	type IExecuteFunctions,
	type INodeExecutionData,
	type INodeProperties,
} from 'n8n-workflow';

import { checkpointJson, namespaceOf, namespaceProperties, runPerItem } from '../common';
import { checkpointNameProperty, readCheckpointName } from './shared';

const properties: INodeProperties[] = [...namespaceProperties(false, false), checkpointNameProperty];

export const description = updateDisplayOptions({ show: { resource: ['checkpoint'], operation: ['get'] } }, properties);

/** The checkpoint's value, or `found: false` and a null value when it was never set. */
export async function execute(this: IExecuteFunctions, items: INodeExecutionData[]): Promise<INodeExecutionData[]> {
	const namespace = namespaceOf(this);
	return await runPerItem(
		this,
		items,
		(i, item) => ({ namespace: namespace(i, item), name: readCheckpointName(this, i) }),
		async (ledger, { namespace, name }) => checkpointJson(namespace, name, await ledger.getCheckpoint(namespace, name)),
	);
}
