import type { INodeProperties } from 'n8n-workflow';

import * as copyInto from './copy.operation';
import * as dashboard from './dashboard.operation';
import * as purge from './purge.operation';
import * as stats from './stats.operation';

export { copyInto, dashboard, purge, stats };

export const description: INodeProperties[] = [
	{
		displayName: 'Operation',
		name: 'operation',
		type: 'options',
		noDataExpression: true,
		displayOptions: { show: { resource: ['ledger'] } },
		options: [
			{
				name: 'Copy Into Another Ledger',
				value: 'copyInto',
				description: 'Copy every key, checkpoint and counter of this ledger into a PostgreSQL or Redis ledger (safe to run twice)',
				action: 'Copy the ledger into another ledger',
			},
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
			{
				name: 'Render Dashboard',
				value: 'dashboard',
				description: 'One HTML page of counts by status, stuck and Needs Review rows, and charts of duplicates blocked and Prompt Cache savings',
				action: 'Render the ledger dashboard',
			},
		],
		default: 'stats',
	},
	...stats.description,
	...dashboard.description,
	...purge.description,
	...copyInto.description,
];
