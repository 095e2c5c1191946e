import { updateDisplayOptions, type IDataObject, type INodeProperties } from 'n8n-workflow';

import type { ListFilter, Status } from '../../../../lib/ledger/types';
import { namespaceReader } from '../../../../lib/n8n/scope';
import {
	type Execute,
	namespaceProperties,
	readChoice,
	readCursor,
	readOptionalDuration,
	readWholeNumber,
	recordJson,
	runPerItem,
	unitOptions,
} from '../common';

export const LIST_STATUSES = ['stuck', 'stuck_sending', 'needs_review', 'in_progress', 'failed_retryable', 'completed', 'any'] as const;
type ListStatus = (typeof LIST_STATUSES)[number];

export const MAX_PAGE_SIZE = 1000;
export const MAX_RETURN_ALL = 10_000;
/** Rows fetched per round trip when "Return All" walks the pages. */
const RETURN_ALL_PAGE = 500;

const properties: INodeProperties[] = [
	...namespaceProperties(true),
	{
		displayName: 'Status',
		name: 'status',
		type: 'options',
		options: [
			{ name: 'Any Status', value: 'any', description: 'Every live row' },
			{ name: 'Completed', value: 'completed', description: 'Done; a repeat is skipped and gets the stored result' },
			{ name: 'Failed (Retryable)', value: 'failed_retryable', description: 'Failed; the next run may try again' },
			{ name: 'In Progress', value: 'in_progress', description: 'Claimed by a run, with a live or a lapsed lease' },
			{ name: 'Needs Review', value: 'needs_review', description: 'A person must decide: it may or may not have happened' },
			{
				name: 'Stuck Before Sending (Safe to Release)',
				value: 'stuck',
				description: 'Claimed by a run that stopped before anything was sent. Releasing these cannot cause a second message.',
			},
			{
				name: 'Stuck While Sending (Needs a Decision)',
				value: 'stuck_sending',
				description: 'A run stopped in the middle of sending: the message may have gone out. Check the destination, then release with "It Was Sent" or "It Was Not Sent".',
			},
		],
		default: 'stuck',
		description: 'Which rows to list',
	},
	{
		displayName: 'Not Updated For',
		name: 'notUpdatedFor',
		type: 'number',
		typeOptions: { minValue: 0 },
		default: 0,
		description: 'Only rows last changed at least this long ago. 0 lists rows of any age.',
	},
	{
		displayName: 'Not Updated For Unit',
		name: 'notUpdatedForUnit',
		type: 'options',
		options: unitOptions,
		default: 'minutes',
	},
	{
		displayName: 'Return All',
		name: 'returnAll',
		type: 'boolean',
		default: false,
		description: 'Whether to return all results or only up to a given limit',
	},
	{
		displayName: 'Limit',
		name: 'limit',
		type: 'number',
		typeOptions: { minValue: 1, maxValue: MAX_PAGE_SIZE },
		default: 50,
		description: 'Max number of results to return',
		displayOptions: { show: { returnAll: [false] } },
	},
	{
		displayName: 'Max Rows',
		name: 'maxRows',
		type: 'number',
		typeOptions: { minValue: 1, maxValue: MAX_RETURN_ALL },
		default: 1000,
		description: `Stop after this many rows even if more match (at most ${MAX_RETURN_ALL.toLocaleString('en-US')}). The next cursor is returned so you can go on.`,
		displayOptions: { show: { returnAll: [true] } },
	},
	{
		displayName: 'Cursor',
		name: 'cursor',
		type: 'string',
		default: '',
		placeholder: 'e.g. {{ $json.nextCursor }}',
		description: 'Where to go on from: the Next Cursor of the previous page. Leave empty for the first page.',
	},
	{
		displayName: 'Output',
		name: 'output',
		type: 'options',
		noDataExpression: true,
		options: [
			{
				name: 'One Item per Page',
				value: 'page',
				description: 'One item with the rows in "records" and the cursor of the next page in "nextCursor"',
			},
			{
				name: 'One Item per Row',
				value: 'rows',
				description: 'Each row is its own item. Use with Return All: no cursor is output.',
			},
		],
		default: 'page',
	},
];

export const description = updateDisplayOptions({ show: { resource: ['key'], operation: ['list'] } }, properties);

interface ListParams {
	namespace: string | undefined;
	status: ListStatus;
	filter: Omit<ListFilter, 'limit' | 'cursor'>;
	returnAll: boolean;
	limit: number;
	cursor: string | null;
}

function toFilter(status: ListStatus, namespace: string | undefined, olderThanMs: number): ListParams['filter'] {
	const filter: ListParams['filter'] = {};
	if (namespace !== undefined) filter.namespace = namespace;
	if (status === 'stuck' || status === 'stuck_sending') {
		filter.status = 'in_progress';
		filter.stuckOnly = true;
		filter.sending = status === 'stuck_sending';
	} else if (status !== 'any') {
		filter.status = status as Status;
	}
	if (olderThanMs > 0) filter.notUpdatedForMs = olderThanMs;
	return filter;
}

/**
 * Lists live rows by status and age, one page per input item (or every page up to "Max Rows").
 * The next page's cursor is part of the output, so a loop can walk any number of pages.
 */
export const execute: Execute = async function (items) {
	const all = this.getNodeParameter('scope', 0) === 'all';
	const namespace = all ? () => undefined : namespaceReader(this);
	const output = this.getNodeParameter('output', 0) as 'page' | 'rows';
	let hinted = false;
	return await runPerItem(
		this,
		items,
		(i, item): ListParams => {
			const ns = namespace(i, item);
			const status = readChoice(this, 'status', i, 'status', LIST_STATUSES);
			const olderThanMs = readOptionalDuration(this, 'notUpdatedFor', i, '"Not Updated For" age');
			const returnAll = this.getNodeParameter('returnAll', i, false) === true;
			const limit = returnAll
				? readWholeNumber(this, 'maxRows', i, 'max rows', 1, MAX_RETURN_ALL, 1000)
				: readWholeNumber(this, 'limit', i, 'limit', 1, MAX_PAGE_SIZE, 50);
			return { namespace: ns, status, filter: toFilter(status, ns, olderThanMs), returnAll, limit, cursor: readCursor(this, i) };
		},
		async (ledger, p) => {
			const records: IDataObject[] = [];
			let cursor = p.cursor;
			let pages = 0;
			do {
				const size = p.returnAll ? Math.min(RETURN_ALL_PAGE, p.limit - records.length) : p.limit;
				const page = await ledger.list({ ...p.filter, limit: size, cursor });
				pages++;
				for (const r of page.records) records.push(recordJson(r));
				cursor = page.nextCursor;
			} while (p.returnAll && cursor !== null && records.length < p.limit);
			if (cursor !== null && !hinted && (p.returnAll || output === 'rows')) {
				hinted = true;
				this.addExecutionHints({
					message: p.returnAll
						? `More rows match than "Max Rows" (${p.limit}) allows. Pass the Next Cursor of the output to go on, or raise Max Rows.`
						: 'More rows match than the limit allows. Turn on Return All, or output One Item per Page and pass its Next Cursor.',
					location: 'outputPane',
				});
			}
			if (output === 'rows') return records;
			return {
				namespace: p.namespace ?? null,
				status: p.status,
				count: records.length,
				pages,
				hasMore: cursor !== null,
				nextCursor: cursor,
				records,
			};
		},
	);
};
