import {
	updateDisplayOptions,
	type IExecuteFunctions,
	type INodeExecutionData,
	type INodeProperties,
} from 'n8n-workflow';

import { keyProperty, namespaceOf, namespaceProperties, readKey, recordJson, runPerItem } from '../common';

const properties: INodeProperties[] = [...namespaceProperties(), keyProperty];

export const description = updateDisplayOptions({ show: { resource: ['key'], operation: ['get'] } }, properties);

/** One output item per input item: the key and every live step of it (an empty list when unknown). */
export async function execute(this: IExecuteFunctions, items: INodeExecutionData[]): Promise<INodeExecutionData[]> {
	const namespace = namespaceOf(this);
	return await runPerItem(
		this,
		items,
		(i, item) => ({ namespace: namespace(i, item), key: readKey(this, i) }),
		async (ledger, { namespace, key }) => {
			const rows = await ledger.get(namespace, key);
			const unit = rows.find((r) => r.step === '');
			return {
				namespace,
				key,
				found: rows.length > 0,
				status: unit?.status ?? null,
				stepCount: rows.length,
				steps: rows.map((r) => recordJson(r)),
			};
		},
	);
}
