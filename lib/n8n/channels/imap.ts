/**
 * "Was this email delivered?" for email over SMTP: after a run died between marking a step
 * `sending` and recording the result, the next run asks the sender's own mailbox. Most hosted
 * providers (Gmail, Microsoft 365, …) file a copy of every message sent over SMTP in the Sent
 * folder; each email Guarded Send sends carries a Message-ID made from the step's identity and its
 * claim (see messageIdFor in smtp.ts), so the copy can be looked for over IMAP:
 *
 *   log in ─► find the Sent folder (override, else \Sent special-use, else a common name)
 *          ─► open it read-only ─► UID SEARCH HEADER Message-ID … SINCE <a day before the window>
 *          ─► read the envelopes of the hits and compare the Message-ID exactly
 *
 * One connection per node run, opened by the first check and shared by the others (IMAP queues
 * the commands); closed with the run. Every check is bounded by the node's timeout. The first
 * failure (refused login, no Sent folder, no answer) answers every later check of the run at once
 * with the same "cannot tell", so a dead server costs one timeout, not one per item. A check never
 * throws and never changes the mailbox (EXAMINE, no flags are set).
 */
import { ImapFlow } from 'imapflow';

import type { CheckVerdict, CheckWindow } from './types';

export interface ImapSettings {
	host: string;
	port: number;
	/** TLS from the first byte (port 993). Otherwise STARTTLS is used when the server offers it. */
	secure: boolean;
	user: string;
	password: string;
	/** Accept a certificate that does not verify. */
	allowUnauthorizedCerts?: boolean;
	/** The folder to look in; empty: found by its \Sent flag or a common name. */
	sentFolder?: string;
	/** How long one check may take, connecting and logging in included. */
	timeoutMs: number;
}

/** Folder names providers file sent mail under, tried (case-insensitively) when none has the \Sent flag. */
export const SENT_FOLDER_NAMES = [
	'Sent',
	'Sent Items',
	'Sent Messages',
	'Sent Mail',
	'[Gmail]/Sent Mail',
	'[Google Mail]/Sent Mail',
	'INBOX.Sent',
	'INBOX/Sent',
	'INBOX.Sent Items',
	'INBOX.Sent Messages',
];

/** The search starts this long before the step was first claimed: the mail server's clock, and IMAP's whole days. */
export const IMAP_CHECK_MARGIN_MS = 24 * 60 * 60_000;

export interface SentFolderCheck {
	/** Looks for a message with this Message-ID (`<…@…>`) in the Sent folder, within the window. */
	check(messageId: string, window: CheckWindow): Promise<CheckVerdict>;
	close(): Promise<void>;
}

interface Session {
	client: ImapFlow;
	folder: string;
}

/** A failure of the check that already says, in words, what to do. */
class CheckProblem extends Error {}

const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
const bare = (id: string) => id.trim().replace(/^<|>$/g, '').toLowerCase();

export function sentFolderCheck(settings: ImapSettings): SentFolderCheck {
	const where = `${settings.host}:${settings.port}`;
	const seconds = Math.max(1, Math.round(settings.timeoutMs / 1000));
	let session: Promise<Session> | null = null;
	let client: ImapFlow | null = null;
	/** The first failure of this run, given to every later check. */
	let broken: CheckVerdict | null = null;

	function connect(): Promise<Session> {
		const c = new ImapFlow({
			host: settings.host,
			port: settings.port,
			secure: settings.secure,
			auth: { user: settings.user, pass: settings.password },
			tls: { rejectUnauthorized: settings.allowUnauthorizedCerts !== true },
			logger: false,
			emitLogs: false,
			disableAutoIdle: true,
			connectionTimeout: settings.timeoutMs,
			greetingTimeout: settings.timeoutMs,
			socketTimeout: settings.timeoutMs,
		});
		// ImapFlow reports a dropped connection as an 'error' event too; the command that was
		// waiting fails on its own, and an unhandled event would end the n8n process.
		c.on('error', () => undefined);
		client = c;
		return (async () => {
			await c.connect();
			const folder = await findSentFolder(c, settings);
			await c.mailboxOpen(folder, { readOnly: true });
			return { client: c, folder };
		})();
	}

	async function look(messageId: string, window: CheckWindow): Promise<CheckVerdict> {
		const { client: c, folder } = await (session ??= connect());
		// From a margin before the step was first claimed: the mail server's clock may differ, and
		// IMAP's SINCE counts whole days (ImapFlow asks for the exact time where the server has WITHIN).
		// No upper end: a message cannot be filed in the future, and this Message-ID belongs to this
		// claim alone.
		const since = new Date(window.sinceMs - IMAP_CHECK_MARGIN_MS);
		const wanted = bare(messageId);
		// NOOP first: a long-lived read-only session may otherwise not see what was filed since it opened.
		await c.noop();
		const uids = await c.search({ header: { 'message-id': wanted }, since }, { uid: true });
		if (uids === false || uids === undefined) throw new CheckProblem(`The mail server did not run the search in "${folder}"`);
		const between = `filed since ${day(since.getTime())}`;
		if (uids.length > 0) {
			const hits = await c.fetchAll(uids, { uid: true, envelope: true, internalDate: true }, { uid: true });
			const hit = hits.find((m) => bare(m.envelope?.messageId ?? '') === wanted);
			if (hit) {
				const filedAt = hit.internalDate ? new Date(hit.internalDate).toISOString() : null;
				return {
					outcome: 'found',
					externalId: messageId,
					response: { messageId, folder, uid: hit.uid, filedAt, mailbox: settings.user },
					detail: `The Sent folder "${folder}" of ${settings.user} has this email (Message-ID ${messageId}, IMAP UID ${hit.uid}${filedAt ? `, filed ${filedAt}` : ''}), sent by an earlier attempt`,
				};
			}
		}
		return {
			outcome: 'not_found',
			detail: `The Sent folder "${folder}" of ${settings.user} has no email with the Message-ID ${messageId} ${between}`,
		};
	}

	async function dropConnection() {
		const c = client;
		session = null;
		client = null;
		if (!c) return;
		// LOGOUT politely when the connection still works, but never wait longer than a moment.
		await Promise.race([c.logout().catch(() => undefined), new Promise((r) => setTimeout(r, 1_000).unref())]);
		c.close();
	}

	return {
		async check(messageId, window) {
			if (broken) return broken;
			let timer: NodeJS.Timeout | undefined;
			const timedOut = new Promise<'timeout'>((resolve) => {
				timer = setTimeout(() => resolve('timeout'), settings.timeoutMs);
			});
			try {
				const answer = await Promise.race([look(messageId, window), timedOut]);
				if (answer !== 'timeout') return answer;
				broken ??= {
					outcome: 'later',
					detail: `The mail server ${where} did not answer the IMAP check within ${seconds} s: check the host and port of the IMAP credential and that n8n can reach them, or raise the Timeout option; it is asked again on the next run`,
					retryAfterMs: null,
				};
				void dropConnection();
				return broken;
			} catch (error) {
				const detail = describeImapError(error, settings, seconds);
				broken ??= passingImapError(error) ? { outcome: 'later', detail: `${detail}; it is asked again on the next run`, retryAfterMs: null } : { outcome: 'unknown', detail };
				void dropConnection();
				return broken;
			} finally {
				clearTimeout(timer);
			}
		},
		async close() {
			await dropConnection();
		},
	};
}

/** The folder to search: the one named in the settings, else the one flagged \Sent, else a common name. */
async function findSentFolder(client: ImapFlow, settings: ImapSettings): Promise<string> {
	const folders = await client.list();
	const names = folders.map((f) => f.path);
	const listed = names.length > 0 ? names.slice(0, 15).join(', ') + (names.length > 15 ? ', …' : '') : 'no folders';
	const wanted = settings.sentFolder?.trim();
	if (wanted) {
		const match = folders.find((f) => f.path === wanted) ?? folders.find((f) => f.path.toLowerCase() === wanted.toLowerCase());
		if (match) return match.path;
		throw new CheckProblem(
			`The mailbox of ${settings.user} has no folder "${wanted}" (it has: ${listed}): correct "Sent Folder" under Email Options`,
		);
	}
	const flagged = folders.find((f) => f.specialUse === '\\Sent' && f.specialUseSource === 'extension');
	if (flagged) return flagged.path;
	for (const name of SENT_FOLDER_NAMES) {
		const match = folders.find((f) => f.path.toLowerCase() === name.toLowerCase());
		if (match) return match.path;
	}
	// ImapFlow also recognises localised names (Gesendet, Envoyés, …).
	const guessed = folders.find((f) => f.specialUse === '\\Sent');
	if (guessed) return guessed.path;
	throw new CheckProblem(
		`The mailbox of ${settings.user} has no Sent folder (it has: ${listed}): set "Sent Folder" under Email Options to the folder your provider files sent email in; a plain SMTP relay keeps no copy, and then the check cannot work`,
	);
}

interface ImapError {
	code?: string;
	message?: string;
	authenticationFailed?: boolean;
	responseText?: string;
	serverResponseCode?: string;
}

const TLS_PROBLEM = /certificate|self[- ]signed|SSL|TLS|wrong version number|handshake/i;

/** What went wrong, in words a flow builder can act on. */
export function describeImapError(error: unknown, settings: Pick<ImapSettings, 'host' | 'port' | 'user'>, seconds: number): string {
	if (error instanceof CheckProblem) return error.message;
	const e = (error ?? {}) as ImapError;
	const where = `${settings.host}:${settings.port}`;
	const said = e.responseText ? ` ("${e.responseText}")` : '';
	if (e.authenticationFailed || e.serverResponseCode === 'AUTHENTICATIONFAILED') {
		return `The mail server ${where} refused the IMAP login of "${settings.user}"${said}: check the user and password of the IMAP credential (many providers need an app password for IMAP)`;
	}
	switch (e.code) {
		case 'ECONNREFUSED':
			return `Nothing accepts IMAP connections at ${where} (connection refused): check the host and port of the IMAP credential (usually 993 with SSL/TLS on)`;
		case 'ENOTFOUND':
		case 'EAI_AGAIN':
			return `The mail server name "${settings.host}" could not be found (${e.code}): check the host of the IMAP credential`;
		case 'CONNECT_TIMEOUT':
		case 'GREETING_TIMEOUT':
		case 'UPGRADE_TIMEOUT':
		case 'ETIMEOUT':
		case 'ETIMEDOUT':
			return `The mail server ${where} did not answer the IMAP check within ${seconds} s: check the host and port of the IMAP credential and that n8n can reach them, or raise the Timeout option`;
		case 'ECONNRESET':
		case 'EPIPE':
		case 'NoConnection':
		case 'EConnectionClosed':
		case 'ClosedAfterConnectText':
		case 'ClosedAfterConnectTLS':
			return `The mail server ${where} closed the IMAP connection (${e.code}): check the port and the SSL/TLS setting of the IMAP credential (993: on, 143: off)`;
	}
	// The first line of what the library said, without OpenSSL's source locations.
	const message = (e.message ?? String(error)).split('\n')[0].replace(/:\S+\.c:\d+:?$/, '').slice(0, 200);
	const code = e.code ?? '';
	if (code === 'ERR_SSL_WRONG_VERSION_NUMBER' || /wrong version number/i.test(message)) {
		return `The mail server ${where} does not answer with SSL/TLS on this port (${code || 'wrong version number'}): in the IMAP credential, turn SSL/TLS off for port 143, or use port 993 with SSL/TLS on`;
	}
	if (CERTIFICATE_CODES.has(code) || /certificate/i.test(message)) {
		return `The certificate of the mail server ${where} could not be verified (${code || message}): check the host of the IMAP credential, or turn on "Allow Self-Signed Certificates" for a server with a certificate of its own`;
	}
	if (code.startsWith('ERR_TLS') || code.startsWith('ERR_SSL') || TLS_PROBLEM.test(message)) {
		return `No secure connection to the mail server ${where} (${code || message}): check the SSL/TLS setting of the IMAP credential against the port (993: on, 143: off)`;
	}
	return `The IMAP check at ${where} failed (${code ? `${code}: ` : ''}${message}${said})`;
}

/** Codes of a failure that may pass by itself (a server restarting, a dropped connection, a slow answer). */
const PASSING_CODES = new Set(['ECONNREFUSED', 'EAI_AGAIN', 'CONNECT_TIMEOUT', 'GREETING_TIMEOUT', 'ETIMEOUT', 'ETIMEDOUT', 'ECONNRESET', 'EPIPE', 'NoConnection', 'EConnectionClosed']);

/**
 * Whether asking again later may answer: the server was unreachable, slow, busy or dropped the
 * connection. A refused login, an unknown host, a TLS or certificate problem or a missing Sent
 * folder stay until a person fixes them.
 */
export function passingImapError(error: unknown): boolean {
	if (error instanceof CheckProblem) return false;
	const e = (error ?? {}) as ImapError;
	if (e.authenticationFailed || e.serverResponseCode === 'AUTHENTICATIONFAILED') return false;
	if (e.serverResponseCode === 'UNAVAILABLE' || e.serverResponseCode === 'INUSE' || e.serverResponseCode === 'LIMIT') return true;
	return typeof e.code === 'string' && PASSING_CODES.has(e.code);
}

/** Node's codes for a certificate that does not verify. */
const CERTIFICATE_CODES = new Set([
	'DEPTH_ZERO_SELF_SIGNED_CERT',
	'SELF_SIGNED_CERT_IN_CHAIN',
	'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
	'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
	'CERT_HAS_EXPIRED',
	'CERT_NOT_YET_VALID',
	'ERR_TLS_CERT_ALTNAME_INVALID',
]);
