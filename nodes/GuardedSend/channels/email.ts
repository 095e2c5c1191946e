import type { IDataObject, IDisplayOptions, IExecuteFunctions, INodeProperties } from 'n8n-workflow';

import { LedgerInputError } from '../../../lib/ledger/errors';
import { sentFolderCheck, type SentFolderCheck } from '../../../lib/n8n/channels/imap';
import { messageIdFor, smtpChannel, smtpTransport, type EmailMessage } from '../../../lib/n8n/channels/smtp';
import { onAmbiguousProperty, type ChannelAdapter, type ChannelModule } from './adapter';
import { textParam } from '../params';

const show = (extra: NonNullable<IDisplayOptions['show']> = {}) => ({ show: { channel: ['email'], ...extra } });

export const emailProperties: INodeProperties[] = [
	{
		displayName: 'From Email',
		name: 'fromEmail',
		type: 'string',
		default: '',
		required: true,
		placeholder: 'e.g. Shop <orders@example.com>',
		displayOptions: show(),
	},
	{
		displayName: 'To Email',
		name: 'toEmail',
		type: 'string',
		default: '',
		required: true,
		placeholder: 'e.g. customer@example.com',
		description: 'Recipients, separated by commas',
		displayOptions: show(),
	},
	{
		displayName: 'Subject',
		name: 'subject',
		type: 'string',
		default: '',
		required: true,
		placeholder: 'e.g. Your order {{ $json.orderId }}',
		displayOptions: show(),
	},
	{
		displayName: 'Email Format',
		name: 'emailFormat',
		type: 'options',
		options: [
			{ name: 'Text', value: 'text' },
			{ name: 'HTML', value: 'html' },
			{ name: 'Both', value: 'both' },
		],
		default: 'text',
		displayOptions: show(),
	},
	{
		displayName: 'Text',
		name: 'emailText',
		type: 'string',
		default: '',
		typeOptions: { rows: 5 },
		description: 'Plain text message',
		displayOptions: show({ emailFormat: ['text', 'both'] }),
	},
	{
		displayName: 'HTML',
		name: 'emailHtml',
		type: 'string',
		default: '',
		typeOptions: { rows: 5, editor: 'htmlEditor' },
		description: 'HTML message',
		displayOptions: show({ emailFormat: ['html', 'both'] }),
	},
	onAmbiguousProperty({ channel: ['email'] }),
	{
		displayName: 'Email Options',
		name: 'emailOptions',
		type: 'collection',
		placeholder: 'Add Option',
		default: {},
		displayOptions: show(),
		options: [
			{ displayName: 'BCC Email', name: 'bccEmail', type: 'string', default: '', description: 'Blind copy recipients, separated by commas' },
			{ displayName: 'CC Email', name: 'ccEmail', type: 'string', default: '', description: 'Copy recipients, separated by commas' },
			{
				displayName: 'Ignore SSL Issues (Insecure)',
				name: 'allowUnauthorizedCerts',
				type: 'boolean',
				default: false,
				description: 'Whether to connect even if SSL certificate validation is not possible',
			},
			{ displayName: 'Reply To', name: 'replyTo', type: 'string', default: '', placeholder: 'e.g. support@example.com' },
			{
				displayName: 'Sent Folder',
				name: 'sentFolder',
				type: 'string',
				default: '',
				placeholder: 'e.g. Sent Items',
				description:
					'With an IMAP credential: the folder of the sender\'s mailbox that your provider files sent email in. Leave it empty to find it by itself (the folder marked as Sent, or Sent, Sent Items, Sent Messages, [Gmail]/Sent Mail, INBOX.Sent).',
			},
		],
	},
];

/**
 * The check of the Sent folder over IMAP, when the node has an IMAP credential (it is optional):
 * none means no check, and a step that may have been sent goes to Needs Review.
 */
async function sentFolderFrom(ctx: IExecuteFunctions, timeoutMs: number, sentFolder: string): Promise<SentFolderCheck | undefined> {
	if (!ctx.getNode().credentials?.imap) return undefined;
	const c = await ctx.getCredentials('imap');
	const host = String(c?.host ?? '').trim();
	if (!host) throw new LedgerInputError('The IMAP credential has no host', 'Open the IMAP credential and enter the mail server, e.g. imap.example.com, or remove the credential from this node.');
	const port = Number(c?.port ?? 993);
	if (!Number.isInteger(port) || port < 1 || port > 65535) throw new LedgerInputError(`The IMAP port ${JSON.stringify(c?.port)} is not a port number`, 'Use 993 (SSL/TLS on) or 143 (SSL/TLS off).');
	return sentFolderCheck({
		host,
		port,
		secure: c.secure !== false,
		user: String(c.user ?? ''),
		password: String(c.password ?? ''),
		allowUnauthorizedCerts: c.allowUnauthorizedCerts === true,
		sentFolder,
		timeoutMs,
	});
}

const ADDRESS = /[^\s@<>,;]+@[^\s@<>,;]+/;

function addresses(value: string, label: string, required: boolean): string {
	const list = value.split(',').map((s) => s.trim()).filter(Boolean);
	if (list.length === 0) {
		if (required) throw new LedgerInputError(`${label} is empty on this item`, `Fill in ${label}.`);
		return '';
	}
	for (const a of list) {
		if (!ADDRESS.test(a)) throw new LedgerInputError(`${label} "${a}" is not an email address`, 'Use addresses such as name@example.com, separated by commas.');
	}
	return list.join(', ');
}

export const emailModule: ChannelModule = {
	properties: emailProperties,
	async open(ctx, settings) {
		const c = await ctx.getCredentials('smtp');
		const host = String(c?.host ?? '').trim();
		if (!host) throw new LedgerInputError('The SMTP credential has no host', 'Open the SMTP credential and enter the server, e.g. smtp.example.com.');
		const port = Number(c?.port ?? 465);
		if (!Number.isInteger(port) || port < 1 || port > 65535) throw new LedgerInputError(`The SMTP port ${JSON.stringify(c?.port)} is not a port number`, 'Use 465 (TLS) or 587 (STARTTLS).');
		const options = ctx.getNodeParameter('emailOptions', 0, {}) as IDataObject;
		// Read before the transport exists, so that a bad IMAP credential leaves nothing open.
		const sentFolder = await sentFolderFrom(ctx, settings.timeoutMs, String(options.sentFolder ?? '').trim());
		const transporter = smtpTransport({
			host,
			port,
			secure: c.secure !== false,
			user: c.user ? String(c.user) : undefined,
			password: c.password ? String(c.password) : undefined,
			disableStartTls: c.disableStartTls === true,
			clientName: c.hostName ? String(c.hostName) : undefined,
			allowUnauthorizedCerts: options.allowUnauthorizedCerts === true,
			timeoutMs: settings.timeoutMs,
			maxConnections: settings.concurrency,
		});
		const format = ctx.getNodeParameter('emailFormat', 0) as string;
		const from = textParam(ctx, 'fromEmail', 'From Email', true);
		const to = textParam(ctx, 'toEmail', 'To Email', true);
		const subject = textParam(ctx, 'subject', 'The subject', true);
		const text = format !== 'html' ? textParam(ctx, 'emailText', 'The text', false) : null;
		const html = format !== 'text' ? textParam(ctx, 'emailHtml', 'The HTML', false) : null;
		const cc = options.ccEmail ? textParam(ctx, 'emailOptions.ccEmail', 'CC Email', false) : null;
		const bcc = options.bccEmail ? textParam(ctx, 'emailOptions.bccEmail', 'BCC Email', false) : null;
		const replyTo = options.replyTo ? textParam(ctx, 'emailOptions.replyTo', 'Reply To', false) : null;
		const adapter: ChannelAdapter<EmailMessage> = {
			channel: smtpChannel(transporter, sentFolder),
			acceptUncertain: ctx.getNodeParameter('onAmbiguous', 0, 'review') === 'send',
			build(i, item) {
				const message: EmailMessage = {
					from: addresses(from(i, item), 'From Email', true),
					to: addresses(to(i, item), 'To Email', true),
					subject: subject(i, item),
					// Set for the claim it goes out under (forClaim).
					messageId: '',
				};
				if (text) message.text = text(i, item);
				if (html) message.html = html(i, item);
				if (!message.text && !message.html) throw new LedgerInputError('The email has no text', 'Fill in the Text or HTML field.');
				if (cc) message.cc = addresses(cc(i, item), 'CC Email', false) || undefined;
				if (bcc) message.bcc = addresses(bcc(i, item), 'BCC Email', false) || undefined;
				if (replyTo) message.replyTo = addresses(replyTo(i, item), 'Reply To', false) || undefined;
				return message;
			},
			forClaim: (message, claim) => ({ ...message, messageId: messageIdFor(claim.namespace, claim.key, claim.step, claim.firstSeenAt, message.from) }),
			payload: ({ messageId: _id, ...content }) => ({ kind: 'email', message: content }),
			describe: (m) => ({ messageId: m.messageId }),
			close: async () => {
				transporter.close();
				await sentFolder?.close();
			},
		};
		return adapter as ChannelAdapter;
	},
};
