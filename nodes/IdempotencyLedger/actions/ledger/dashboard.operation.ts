import { updateDisplayOptions, type INodeProperties } from 'n8n-workflow';

import { readDashboard, type DashboardRequest } from '../../../../lib/dashboard/read';
import { renderDashboard } from '../../../../lib/dashboard/render';
import { COUNTS_KEPT_DAYS } from '../../../../lib/ledger/types';
import { flushCounts } from '../../../../lib/n8n/countBuffer';
import { STATS_DAYS } from '../../../PromptCache/stats';
import { type Execute, readText, readWholeNumber, runPerItem } from '../common';
import { isAskedNamespace } from '../review/evidence';

export const MAX_NAMESPACES = 200;
export const MAX_ROWS_PER_LIST = 50;

const properties: INodeProperties[] = [
	{
		displayName:
			'Outputs one item whose "html" field is the whole page. Serve it with Respond to Webhook (Respond With: Text, header Content-Type: text/html) behind the Webhook\'s Basic or Header Auth: the page shows keys and what was sent.',
		name: 'dashboardNotice',
		type: 'notice',
		default: '',
	},
	{
		displayName: 'Title',
		name: 'title',
		type: 'string',
		default: 'Idempotency Ledger',
		description: 'The heading of the page',
	},
	{
		displayName: 'Max Namespaces',
		name: 'maxNamespaces',
		type: 'number',
		typeOptions: { minValue: 1, maxValue: MAX_NAMESPACES },
		default: 20,
		description: 'How many namespaces the page shows at most, in name order (each workflow has its own, "workflow:" followed by its ID)',
	},
	{
		displayName: 'Rows per List',
		name: 'rowsPerList',
		type: 'number',
		typeOptions: { minValue: 1, maxValue: MAX_ROWS_PER_LIST },
		default: 5,
		description: 'How many of the oldest stuck rows, and of the oldest Needs Review rows, the page shows per namespace',
	},
	{
		displayName: 'Days',
		name: 'days',
		type: 'number',
		typeOptions: { minValue: 1, maxValue: COUNTS_KEPT_DAYS },
		default: STATS_DAYS,
		description: 'How many days the charts cover, ending today',
	},
];

export const description = updateDisplayOptions({ show: { resource: ['ledger'], operation: ['dashboard'] } }, properties);

/**
 * Renders the ledger as one HTML page: counts by status per namespace, the oldest stuck and Needs
 * Review rows with their destination check, and charts of the day counters. Reads counts and
 * short pages only (lib/dashboard/read.ts); the page is lib/dashboard/render.ts.
 */
export const execute: Execute = async function (items) {
	const workflow = this.getWorkflow();
	// n8n tells a node its own workflow's name only; other workflows show as their namespace.
	const nameOf = (namespace: string) => (workflow.id && namespace === `workflow:${workflow.id}` && workflow.name ? workflow.name : null);
	return await runPerItem(
		this,
		items,
		(i): DashboardRequest => ({
			title: readText(this, 'title', i, 'title', { max: 200, trim: true }),
			maxNamespaces: readWholeNumber(this, 'maxNamespaces', i, 'max namespaces', 1, MAX_NAMESPACES, 20),
			rowsPerList: readWholeNumber(this, 'rowsPerList', i, 'rows per list', 1, MAX_ROWS_PER_LIST, 5),
			days: readWholeNumber(this, 'days', i, 'days', 1, COUNTS_KEPT_DAYS, STATS_DAYS),
			nameOf,
			hidden: isAskedNamespace,
		}),
		async (ledger, request) => {
			// Counts this process has not written yet (lib/n8n/countBuffer.ts) go first.
			await flushCounts(ledger);
			const data = await readDashboard(ledger, request);
			return {
				html: renderDashboard(data),
				namespaces: data.namespaces.length,
				moreNamespaces: data.moreNamespaces,
				generatedAt: data.generatedAt.toISOString(),
			};
		},
	);
};
