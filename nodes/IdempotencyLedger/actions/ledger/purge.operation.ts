import { updateDisplayOptions, type INodeProperties } from 'n8n-workflow';

import { perItem, readWholeNumber } from '../common';

export const MAX_PURGE = 100_000;

const properties: INodeProperties[] = [
	{
		displayName:
			'Purges expired rows of every namespace in this ledger. Expired rows already count as absent; purging only frees the space.',
		name: 'purgeNotice',
		type: 'notice',
		default: '',
	},
	{
		displayName: 'Max Rows to Delete',
		name: 'maxDelete',
		type: 'number',
		typeOptions: { minValue: 1, maxValue: MAX_PURGE },
		default: 1000,
		description: `At most this many expired rows are deleted per item (up to ${MAX_PURGE.toLocaleString('en-US')}), so one run never holds the table for long. Run it on a schedule to keep up.`,
	},
];

export const description = updateDisplayOptions({ show: { resource: ['ledger'], operation: ['purge'] } }, properties);

/** Deletes at most "Max Rows to Delete" expired rows; `more` says whether another run is likely to find some. */
export const execute = perItem(
	(ctx, i) => readWholeNumber(ctx, 'maxDelete', i, 'max rows to delete', 1, MAX_PURGE, 1000),
	async (ledger, limit) => {
		const purged = await ledger.purgeExpired(limit);
		return { purged, limit, more: purged >= limit, purgedAt: new Date().toISOString() };
	},
);
