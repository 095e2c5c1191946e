/**
 * Email over SMTP with nodemailer. SMTP has no idempotency key. Each message carries a Message-ID
 * made from the step's identity and its claim (messageIdFor), so that a receiving system can
 * recognise a copy and, after a crash mid-send, the sender's Sent folder can be asked over IMAP
 * whether it went out (imap.ts). Without that check, a mail that may have been accepted is never
 * sent again silently.
 */
import { createTransport, type Transporter } from 'nodemailer';

import { sha256 } from '../../ledger/fingerprint';
import type { SentFolderCheck } from './imap';
import type { AttemptResult, Channel } from './types';

export interface SmtpSettings {
	host: string;
	port: number;
	/** TLS from the first byte (port 465). Otherwise STARTTLS is used when offered. */
	secure: boolean;
	user?: string;
	password?: string;
	/** Do not upgrade with STARTTLS even when the server offers it. */
	disableStartTls?: boolean;
	/** Name to introduce ourselves with (EHLO). */
	clientName?: string;
	/** Accept a certificate that does not verify. */
	allowUnauthorizedCerts?: boolean;
	timeoutMs: number;
	/** Connections open at once. */
	maxConnections: number;
}

export interface EmailMessage {
	from: string;
	to: string;
	cc?: string;
	bcc?: string;
	replyTo?: string;
	subject: string;
	text?: string;
	html?: string;
	/**
	 * `<…@…>`, set for the claim it is sent under (see messageIdFor). Not part of the content (the
	 * fingerprint leaves it out).
	 */
	messageId: string;
}

/** The right-hand side of a Message-ID when the From address has no usable domain. */
export const FALLBACK_MESSAGE_ID_DOMAIN = 'idempotency.n8n';

/** The domain of the first address in a From value ("Shop <orders@Example.com>" → example.com), if it is a plain DNS name. */
export function senderDomain(from: string | undefined): string | null {
	const match = /@([^\s@<>,;"]+)/.exec(from ?? '');
	const domain = match?.[1].replace(/\.$/, '').toLowerCase() ?? '';
	return /^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$/.test(domain) && domain.length <= 253 ? domain : null;
}

/**
 * The Message-ID of one step's email under one claim: a hash of namespace, key, step and the
 * row's first-seen time, at the sender's domain. Every attempt and every run that takes the step
 * over after a crash sends the same id (a takeover keeps the first-seen time), so the Sent folder
 * can be searched for it; a step released as "not sent" and claimed afresh gets a new one, as the
 * HTTP Idempotency-Key does.
 */
export const messageIdFor = (namespace: string, key: string, step: string, firstSeenAt: Date, from?: string) =>
	`<${sha256(`${namespace}\u0000${key}\u0000${step}\u0000${firstSeenAt.getTime()}`).slice(0, 40)}@${senderDomain(from) ?? FALLBACK_MESSAGE_ID_DOMAIN}>`;

/** One pooled transport; close it when the run is over. */
export function smtpTransport(settings: SmtpSettings): Transporter {
	return createTransport({
		pool: true,
		maxConnections: Math.max(1, settings.maxConnections),
		maxMessages: 100,
		host: settings.host,
		port: settings.port,
		secure: settings.secure,
		ignoreTLS: settings.disableStartTls === true && !settings.secure,
		name: settings.clientName || undefined,
		auth: settings.user || settings.password ? { user: settings.user ?? '', pass: settings.password ?? '' } : undefined,
		tls: { rejectUnauthorized: settings.allowUnauthorizedCerts !== true },
		connectionTimeout: settings.timeoutMs,
		greetingTimeout: settings.timeoutMs,
		socketTimeout: settings.timeoutMs,
	} as Parameters<typeof createTransport>[0]);
}

interface SmtpError {
	code?: string;
	responseCode?: number;
	response?: string;
	command?: string;
	syscall?: string;
	message?: string;
}

/** Messages nodemailer uses for timeouts before the server ever greeted us. */
const BEFORE_SESSION = /Connection timeout|Greeting never received|connection is already (destroyed|closed)/i;

export function classifySmtpError(error: unknown): AttemptResult {
	const e = (error ?? {}) as SmtpError;
	const reason = `${e.code ? `${e.code}: ` : ''}${e.message ?? String(error)}`;
	const response = { error: reason, responseCode: e.responseCode ?? null, command: e.command ?? null };
	if (typeof e.responseCode === 'number') {
		// The server answered, so we know it did not take the message.
		if (e.code === 'EAUTH' || e.responseCode === 535 || e.responseCode === 534 || e.responseCode === 530) {
			return { kind: 'unauthorized', reason, response };
		}
		if (e.responseCode >= 400 && e.responseCode < 500) return { kind: 'unavailable', reason, retryAfterMs: null, response };
		return { kind: 'rejected', reason, response };
	}
	if (e.code === 'EAUTH') return { kind: 'unauthorized', reason, response };
	if (e.code === 'EENVELOPE' || e.code === 'EMESSAGE') return { kind: 'rejected', reason, response };
	if (e.syscall === 'connect' || e.syscall === 'getaddrinfo' || e.code === 'EDNS' || e.code === 'ETLS' || BEFORE_SESSION.test(e.message ?? '')) {
		return { kind: 'unavailable', reason, retryAfterMs: null, response };
	}
	return { kind: 'uncertain', reason: `The connection failed mid-session (${reason})`, retryAfterMs: null, response };
}

/**
 * The email channel. With `sentFolder` (an IMAP check of the sender's mailbox), it has a `check`:
 * after a crash mid-send, the Sent folder says whether the message went out.
 */
export function smtpChannel(transporter: Transporter, sentFolder?: SentFolderCheck): Channel<EmailMessage> {
	const channel: Channel<EmailMessage> = {
		name: 'email',
		idempotent: false,
		async send(message) {
			try {
				const info = await transporter.sendMail({
					from: message.from,
					to: message.to,
					cc: message.cc || undefined,
					bcc: message.bcc || undefined,
					replyTo: message.replyTo || undefined,
					subject: message.subject,
					text: message.text,
					html: message.html,
					messageId: message.messageId,
				});
				return {
					kind: 'sent',
					externalId: info.messageId ?? message.messageId,
					response: { messageId: info.messageId, response: info.response, accepted: info.accepted, rejected: info.rejected },
				};
			} catch (error) {
				return classifySmtpError(error);
			}
		},
	};
	if (sentFolder) {
		channel.check = async (message, window) =>
			message.messageId
				? sentFolder.check(message.messageId, window)
				: { outcome: 'unknown', detail: 'The email carries no Message-ID to look for in the Sent folder' };
	}
	return channel;
}
