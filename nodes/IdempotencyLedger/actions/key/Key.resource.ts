import type { INodeProperties } from 'n8n-workflow';

import * as get from './get.operation';
import * as list from './list.operation';
import * as release from './release.operation';

export { get, list, release };

export const description: INodeProperties[] = [
	{
		displayName: 'Operation',
		name: 'operation',
		type: 'options',
		noDataExpression: true,
		displayOptions: { show: { resource: ['key'] } },
		options: [
			{
				name: 'Get',
				value: 'get',
				description: 'Get a key with all its steps: status, attempts, lease, stored result',
				action: 'Get a key with its steps',
			},
			{
				name: 'List',
				value: 'list',
				description: 'List rows by status and age, e.g. stuck or needs review, page by page',
				action: 'List keys by status',
			},
			{
				name: 'Release',
				value: 'release',
				description: 'Reset a key or one step so that a deliberate replay is let through; who and when are recorded',
				action: 'Release a key',
			},
		],
		default: 'get',
	},
	...get.description,
	...list.description,
	...release.description,
];
