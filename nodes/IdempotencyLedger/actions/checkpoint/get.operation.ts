import { updateDisplayOptions, type INodeProperties } from 'n8n-workflow';

import { checkpointJson, namespaceProperties, perItem } from '../common';
import { checkpointNameProperty, readCheckpointName } from './shared';

const properties: INodeProperties[] = [...namespaceProperties(false, false), checkpointNameProperty];

export const description = updateDisplayOptions({ show: { resource: ['checkpoint'], operation: ['get'] } }, properties);

/** The checkpoint's value, or `found: false` and a null value when it was never set. */
export const execute = perItem(
	(ctx, i, namespace) => ({ namespace: namespace(), name: readCheckpointName(ctx, i) }),
	async (ledger, { namespace, name }) => checkpointJson(namespace, name, await ledger.getCheckpoint(namespace, name)),
);
