import type { IDataObject, INodeProperties } from 'n8n-workflow';

import { LedgerInputError } from '../../../lib/ledger/errors';
import { DEFAULT_SLACK_API_URL, slackChannel, type SlackMessage } from '../../../lib/n8n/channels/slack';
import { onAmbiguousProperty, type ChannelAdapter, type ChannelModule } from './adapter';
import { n8nTransport } from './http';
import { jsonParam, textParam } from '../params';

const show = { show: { channel: ['slack'] } };

export const slackProperties: INodeProperties[] = [
	{
		displayName: 'Slack Channel',
		name: 'slackChannel',
		type: 'string',
		default: '',
		required: true,
		placeholder: 'e.g. #alerts or C0123456789',
		description: 'Channel name or ID, or a user ID for a direct message',
		displayOptions: show,
	},
	{
		displayName: 'Message Text',
		name: 'slackText',
		type: 'string',
		default: '',
		required: true,
		typeOptions: { rows: 4 },
		placeholder: 'e.g. New order {{ $json.orderId }}',
		description: 'The message. With blocks, this is the notification text.',
		displayOptions: show,
	},
	onAmbiguousProperty({ channel: ['slack'] }),
	{
		displayName: 'Slack Options',
		name: 'slackOptions',
		type: 'collection',
		placeholder: 'Add Option',
		default: {},
		displayOptions: show,
		options: [
			{
				displayName: 'Blocks (JSON)',
				name: 'blocks',
				type: 'json',
				default: '',
				description: 'Block Kit blocks, as a JSON list',
			},
			{
				displayName: 'Slack API URL',
				name: 'apiUrl',
				type: 'string',
				default: DEFAULT_SLACK_API_URL,
				description: 'Base address of the Slack Web API. Change it only for a proxy or a test server.',
			},
			{
				displayName: 'Thread Timestamp',
				name: 'threadTs',
				type: 'string',
				default: '',
				placeholder: 'e.g. 1700000000.000100',
				description: 'Reply in the thread of this message',
			},
		],
	},
];

export const slackModule: ChannelModule = {
	properties: slackProperties,
	async open(ctx, settings) {
		const credential = await ctx.getCredentials('slackApi');
		const token = String(credential?.accessToken ?? '').trim();
		if (!token) throw new LedgerInputError('The Slack credential has no access token', 'Open the Slack credential and paste the bot token (xoxb-…).');
		const options = ctx.getNodeParameter('slackOptions', 0, {}) as IDataObject;
		const apiUrl = String(options.apiUrl ?? DEFAULT_SLACK_API_URL).trim() || DEFAULT_SLACK_API_URL;
		if (!/^https?:\/\/\S+$/i.test(apiUrl)) {
			throw new LedgerInputError(`The Slack API URL "${apiUrl}" is not an http(s) address`, `Leave it at ${DEFAULT_SLACK_API_URL} unless you use a proxy.`);
		}
		const channel = slackChannel({ transport: n8nTransport(ctx, null, null), token, apiUrl, timeoutMs: settings.timeoutMs });
		const target = textParam(ctx, 'slackChannel', 'The Slack channel', true);
		const text = textParam(ctx, 'slackText', 'The message text', true);
		const blocks = options.blocks !== undefined && options.blocks !== '' ? jsonParam(ctx, 'slackOptions.blocks', 'Blocks') : null;
		const threadTs = typeof options.threadTs === 'string' && options.threadTs.trim() ? textParam(ctx, 'slackOptions.threadTs', 'The thread timestamp', false) : null;
		const adapter: ChannelAdapter<SlackMessage> = {
			channel,
			acceptUncertain: ctx.getNodeParameter('onAmbiguous', 0, 'review') === 'send',
			build(i, item) {
				const message: SlackMessage = { channel: target(i, item).trim(), text: text(i, item) };
				if (blocks) {
					const value = blocks(i, item);
					if (value !== undefined && !Array.isArray(value)) {
						throw new LedgerInputError('Blocks must be a JSON list', 'Paste the "blocks" list from Block Kit Builder, e.g. [{"type": "section", …}].');
					}
					if (value !== undefined) message.blocks = value;
				}
				if (threadTs) message.threadTs = threadTs(i, item) || undefined;
				return message;
			},
			payload: (m) => ({ kind: 'slack', message: m }),
		};
		return adapter as ChannelAdapter;
	},
};
