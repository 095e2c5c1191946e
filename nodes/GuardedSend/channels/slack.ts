import type { IDataObject, INodeProperties } from 'n8n-workflow';

import { LedgerInputError } from '../../../lib/ledger/errors';
import { DEFAULT_SLACK_API_URL, slackChannel, type SlackMessage } from '../../../lib/n8n/channels/slack';
import { onAmbiguousProperty, type ChannelAdapter, type ChannelModule } from './adapter';
import { idempotencyKeyFor, n8nTransport } from './http';
import { jsonParam, textParam } from '../params';

const show = { show: { channel: ['slack'] } };

export const slackProperties: INodeProperties[] = [
	{
		displayName: 'Slack Channel',
		name: 'slackChannel',
		type: 'string',
		default: '',
		required: true,
		placeholder: 'e.g. C0123456789 or #alerts',
		description: 'Channel ID or name, or a user ID for a direct message. Use the ID (C…) so that Slack can be checked after a crash (see Check Slack Before Resending).',
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
				displayName: 'Check Slack Before Resending',
				name: 'checkBeforeResend',
				type: 'boolean',
				default: true,
				description:
					'Whether to look in the channel (or thread) for the message when a run died while it may have been posting it: found, it is recorded as sent; not found, it is posted; when Slack cannot answer now (rate limit, timeout), the next delivery looks again; when it cannot tell, it goes to Needs Review. Needs a channel ID and the channels:history scope (groups:history, im:history).',
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
		const channel = slackChannel({
			transport: n8nTransport(ctx, null, null),
			token,
			apiUrl,
			timeoutMs: settings.timeoutMs,
			check: options.checkBeforeResend !== false,
		});
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
			// The metadata hash is the step's identity under this claim: a takeover keeps the row's
			// first-seen time (the same hash, so the check finds what the dead run posted); a step
			// released as "not sent" starts a new row, and its message is looked for afresh.
			forClaim: (message, claim) => ({ ...message, idempotencyKey: idempotencyKeyFor(claim.namespace, claim.key, claim.step, claim.firstSeenAt) }),
			payload: ({ idempotencyKey: _key, ...content }) => ({ kind: 'slack', message: content }),
		};
		return adapter as ChannelAdapter;
	},
};
