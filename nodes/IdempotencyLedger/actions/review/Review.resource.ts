import type { INodeProperties } from 'n8n-workflow';

import * as ask from './ask.operation';
import * as settle from './settle.operation';

export { ask, settle };

export const description: INodeProperties[] = [
	{
		displayName: 'Operation',
		name: 'operation',
		type: 'options',
		noDataExpression: true,
		displayOptions: { show: { resource: ['review'] } },
		options: [
			{
				name: 'Ask Once',
				value: 'ask',
				description: 'Put the evidence of a Needs Review item in words for a person, once per step, for Send and Wait',
				action: 'Ask a person once',
			},
			{
				name: 'Settle',
				value: 'settle',
				description: 'Apply the person\'s answer: it was sent, send it again, or drop it; who and when are recorded',
				action: 'Settle a review',
			},
		],
		default: 'ask',
	},
	...ask.description,
	...settle.description,
];
