import {
	updateDisplayOptions,
	type IExecuteFunctions,
	type INodeExecutionData,
	type INodeProperties,
} from 'n8n-workflow';

import { STATUSES } from '../../../../lib/ledger/types';
import { iso, namespaceOf, namespaceProperties, runPerItem } from '../common';

const properties: INodeProperties[] = [...namespaceProperties()];

export const description = updateDisplayOptions({ show: { resource: ['ledger'], operation: ['stats'] } }, properties);

/** Counts of live rows by status, stuck rows, duplicates blocked and the oldest in-progress row of one namespace. */
export async function execute(this: IExecuteFunctions, items: INodeExecutionData[]): Promise<INodeExecutionData[]> {
	const namespace = namespaceOf(this);
	return await runPerItem(
		this,
		items,
		(i, item) => namespace(i, item),
		async (ledger, ns) => {
			const stats = await ledger.stats(ns);
			const now = Date.now();
			const oldest = stats.oldestInProgressAt;
			return {
				namespace: ns,
				total: STATUSES.reduce((sum, s) => sum + stats.byStatus[s], 0),
				byStatus: { ...stats.byStatus },
				stuck: stats.stuck,
				duplicatesBlocked: stats.duplicatesBlocked,
				oldestInProgressAt: iso(oldest),
				oldestInProgressAgeSeconds: oldest ? Math.max(0, Math.round((now - oldest.getTime()) / 1000)) : null,
				asOf: new Date(now).toISOString(),
			};
		},
	);
}
