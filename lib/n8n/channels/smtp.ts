/**
 * Email over SMTP with nodemailer. SMTP has no idempotency key either; each message carries a
 * Message-ID derived from the ledger key, so that a receiving system can recognise a copy, but a
 * mail that may have been accepted is still never sent again silently.
 */
import { createTransport, type Transporter } from 'nodemailer';

import { sha256 } from '../../ledger/fingerprint';
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
	/** `<…@…>`; see messageIdFor. */
	messageId: string;
}

/** A stable Message-ID for one intent: the same key always yields the same id. */
export const messageIdFor = (namespace: string, key: string, step: string) =>
	`<${sha256(`${namespace}\u0000${key}\u0000${step}`).slice(0, 40)}@idempotency.n8n>`;

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

export function smtpChannel(transporter: Transporter): Channel<EmailMessage> {
	return {
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
}
