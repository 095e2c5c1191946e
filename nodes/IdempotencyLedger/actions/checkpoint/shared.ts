import type { IExecuteFunctions, INodeProperties } from 'n8n-workflow';

import { readText } from '../common';

export const MAX_CHECKPOINT_NAME = 200;
export const MAX_CHECKPOINT_VALUE = 2000;

export const checkpointNameProperty: INodeProperties = {
	displayName: 'Checkpoint Name',
	name: 'checkpointName',
	type: 'string',
	default: '',
	required: true,
	placeholder: 'e.g. invoices-sync',
	description: 'Name of the sync this checkpoint belongs to',
};

export const readCheckpointName = (ctx: IExecuteFunctions, itemIndex: number): string =>
	readText(ctx, 'checkpointName', itemIndex, 'checkpoint name', { max: MAX_CHECKPOINT_NAME, trim: true });
