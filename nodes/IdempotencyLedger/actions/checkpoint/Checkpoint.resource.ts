import type { INodeProperties } from 'n8n-workflow';

import * as get from './get.operation';
import * as set from './set.operation';

export { get, set };

export const description: INodeProperties[] = [
	{
		displayName: 'Operation',
		name: 'operation',
		type: 'options',
		noDataExpression: true,
		displayOptions: { show: { resource: ['checkpoint'] } },
		options: [
			{
				name: 'Get',
				value: 'get',
				description: 'Get the cursor or high-water mark of a sync',
				action: 'Get a checkpoint',
			},
			{
				name: 'Set',
				value: 'set',
				description: 'Move the checkpoint forward; moving it back needs "Force"',
				action: 'Set a checkpoint',
			},
		],
		default: 'get',
	},
	...get.description,
	...set.description,
];
