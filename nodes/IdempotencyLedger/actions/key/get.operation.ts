import { updateDisplayOptions, type INodeProperties } from 'n8n-workflow';

import { keyProperty, namespaceProperties, perItem, readKey, recordJson } from '../common';

const properties: INodeProperties[] = [...namespaceProperties(), keyProperty];

export const description = updateDisplayOptions({ show: { resource: ['key'], operation: ['get'] } }, properties);

/** One output item per input item: the key and every live step of it (an empty list when unknown). */
export const execute = perItem(
	(ctx, i, namespace) => ({ namespace: namespace(), key: readKey(ctx, i) }),
	async (ledger, { namespace, key }) => {
		const rows = await ledger.get(namespace, key);
		const unit = rows.find((r) => r.step === '');
		return { namespace, key, found: rows.length > 0, status: unit?.status ?? null, stepCount: rows.length, steps: rows.map((r) => recordJson(r)) };
	},
);
