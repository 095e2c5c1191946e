import type { INodeProperties } from 'n8n-workflow';

import * as purge from './purge.operation';
import * as stats from './stats.operation';

export { purge, stats };

export const description: INodeProperties[] = [
	{
		displayName: 'Operation',
		name: 'operation',
		type: 'options',
		noDataExpression: true,
		displayOptions: { show: { resource: ['ledger'] } },
		options: [
			{
				name: 'Get Stats',
				value: 'stats',
				description: 'Counts by status, stuck rows, duplicates blocked and the oldest in-progress row of a namespace',
				action: 'Get ledger stats',
			},
			{
				name: 'Purge Expired',
				value: 'purge',
				description: 'Delete expired rows, a bounded number at a time',
				action: 'Purge expired rows',
			},
		],
		default: 'stats',
	},
	...stats.description,
	...purge.description,
];
