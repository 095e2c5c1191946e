import type { IDisplayOptions, IExecuteFunctions, INodeExecutionData, INodeProperties } from 'n8n-workflow';

import type { LedgerRecord, RowId } from '../../../lib/ledger/types';
import type { Channel } from '../../../lib/n8n/channels/types';

/** One channel as the node sees it: how to build a message from an item, and where to send it. */
export interface ChannelAdapter<M = unknown> {
	channel: Channel<M>;
	/** The user accepted that a message which may already have gone out is sent again. */
	acceptUncertain: boolean;
	/** The message for one item. Throws LedgerInputError for bad input (nothing is written). */
	build(itemIndex: number, item: INodeExecutionData, row: RowId): M;
	/**
	 * The message as sent under this claim, for channels whose message depends on the claim (the
	 * HTTP Idempotency-Key changes when a released step is sent again). Called just before sending.
	 */
	forClaim?(message: M, claim: LedgerRecord): M;
	/** What is compared on a repeat: the content, without anything derived from the key. */
	payload(message: M): unknown;
	/** Facts worth showing on the output item (e.g. the Idempotency-Key sent). */
	describe?(message: M): Record<string, unknown>;
	close?(): Promise<void>;
}

export interface ChannelModule {
	properties: INodeProperties[];
	open(ctx: IExecuteFunctions, settings: { timeoutMs: number; concurrency: number }): Promise<ChannelAdapter>;
}

/** The "When a Previous Attempt May Have Sent" choice for channels that cannot deduplicate. */
export const onAmbiguousProperty = (show: NonNullable<IDisplayOptions['show']>): INodeProperties => ({
	displayName: 'When a Previous Attempt May Have Sent',
	name: 'onAmbiguous',
	type: 'options',
	noDataExpression: true,
	options: [
		{
			name: 'Send to Needs Review',
			value: 'review',
			description: 'A run died after sending may have started and before the result was recorded. Do not send again; let a person check.',
		},
		{
			name: 'Send Again (Accept a Possible Duplicate)',
			value: 'send',
			description: 'Send once more, unless the check before resending (where set up) finds the message there. The recipient may get it twice.',
		},
	],
	default: 'review',
	displayOptions: { show },
});
