import { updateDisplayOptions, type INodeProperties } from 'n8n-workflow';

import { actorProperty, checkpointJson, namespaceProperties, perItem, readActor, readBoolean, readText } from '../common';
import { MAX_CHECKPOINT_VALUE, checkpointNameProperty, readCheckpointName } from './shared';

const properties: INodeProperties[] = [
	...namespaceProperties(false, false),
	checkpointNameProperty,
	{
		displayName: 'Value',
		name: 'checkpointValue',
		type: 'string',
		default: '',
		required: true,
		placeholder: 'e.g. {{ $json.lastInvoiceDate }}',
		description:
			'The new cursor or high-water mark. Numbers are compared as numbers, anything else as text (ISO dates sort correctly). Set it only after the page\'s items are recorded.',
	},
	{
		displayName: 'Force',
		name: 'force',
		type: 'boolean',
		default: false,
		description: 'Whether to move the checkpoint backwards too, e.g. to re-sync a period on purpose. Off: a lower value is refused with an error.',
	},
	actorProperty('updatedBy', 'Updated By', 'Who moved the checkpoint, stored with it.'),
];

export const description = updateDisplayOptions({ show: { resource: ['checkpoint'], operation: ['set'] } }, properties);

/** Moves the checkpoint forward; a lower value is that item's error unless "Force" is on. */
export const execute = perItem(
	(ctx, i, namespace) => ({
		namespace: namespace(),
		name: readCheckpointName(ctx, i),
		value: readText(ctx, 'checkpointValue', i, 'checkpoint value', { max: MAX_CHECKPOINT_VALUE }),
		force: readBoolean(ctx, 'force', i, 'Force'),
		updatedBy: readActor(ctx, 'updatedBy', i, 'updated by'),
	}),
	async (ledger, { namespace, name, value, force, updatedBy }) => {
		const checkpoint = await ledger.setCheckpoint(namespace, name, value, { force, updatedBy });
		return { ...checkpointJson(namespace, name, checkpoint), forced: force };
	},
);
