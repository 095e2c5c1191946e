/**
 * Slack: `chat.postMessage` over the Web API. Slack has no idempotency key, so a message that may
 * have been posted is never posted again unless the user accepted that risk.
 *
 * Each message carries Slack message metadata with a hash of the step's identity
 * (`n8n_idempotency_key`). After a crash mid-send, `check` reads the channel's history (or the
 * thread's replies) for a message carrying that hash, so the next run can tell "posted" from
 * "not posted" instead of asking a person.
 */
import { classifyNetworkError, classifyStatus, describeNoAnswer, headerValue, limitBody, storedReply } from './http';
import { parseRetryAfter } from './retry';
import type { AttemptResult, Channel, CheckVerdict, CheckWindow, HttpReply, HttpTransport } from './types';

export const DEFAULT_SLACK_API_URL = 'https://slack.com/api';

/** The `event_type` of the message metadata that carries the step's hash. */
export const SLACK_METADATA_EVENT = 'n8n_idempotency_key';
/** The check reads this much further on both sides of the ledger's window, for Slack's clock. */
export const SLACK_CHECK_MARGIN_MS = 5 * 60_000;
/** Messages asked for per history page (Slack may answer with fewer). */
export const SLACK_CHECK_PAGE_LIMIT = 200;
/** History pages read at most per check; more than that answers "cannot tell". */
export const SLACK_CHECK_MAX_PAGES = 5;

/**
 * What `conversations.history` accepts as a channel: a conversation ID (C… public, G… private,
 * D… direct message). Names (#alerts) and user IDs (U…) work for posting only.
 */
export const SLACK_CONVERSATION_ID = /^[CGD][A-Z0-9]{6,}$/;

export interface SlackMessage {
	channel: string;
	text: string;
	/** Block Kit blocks, passed as they are. */
	blocks?: unknown;
	threadTs?: string;
	/** Further chat.postMessage arguments (unfurl_links, username, icon_emoji…). */
	extra?: Record<string, unknown>;
	/**
	 * The hash of the step's identity under the claim it is sent under; posted as message metadata
	 * and looked for by `check`. Not part of the content (the fingerprint leaves it out).
	 */
	idempotencyKey?: string;
}

export interface SlackChannelOptions {
	transport: HttpTransport;
	token: string;
	/** e.g. https://slack.com/api; a local server in tests. */
	apiUrl: string;
	timeoutMs: number;
	/** Whether `check` reads the history after a crash mid-send; off: no check (Needs Review). */
	check?: boolean;
	/** History pages read at most per check (default SLACK_CHECK_MAX_PAGES). */
	checkMaxPages?: number;
}

/** Slack `error` values that mean "nothing was posted, try later". */
const TRY_LATER = new Set(['ratelimited', 'rate_limited', 'service_unavailable']);
/** Slack `error` values after which the message may or may not have been posted. */
const UNKNOWN = new Set(['internal_error', 'fatal_error', 'request_timeout']);
const AUTH = new Set(['not_authed', 'invalid_auth', 'account_inactive', 'token_revoked', 'token_expired']);

export function classifySlackReply(reply: HttpReply): AttemptResult {
	if (reply.status < 200 || reply.status >= 300) return classifyStatus(reply, false);
	const body = reply.body as { ok?: unknown; error?: unknown; ts?: unknown } | null;
	const response = storedReply(reply);
	if (body && typeof body === 'object' && body.ok === true) {
		return { kind: 'sent', externalId: typeof body.ts === 'string' ? body.ts : null, response };
	}
	const error = body && typeof body === 'object' && typeof body.error === 'string' ? body.error : 'unexpected_response';
	const reason = `Slack answered "${error}"`;
	if (TRY_LATER.has(error)) {
		return { kind: 'unavailable', reason, retryAfterMs: parseRetryAfter(headerValue(reply.headers, 'retry-after')), response };
	}
	if (UNKNOWN.has(error) || error === 'unexpected_response') return { kind: 'uncertain', reason, retryAfterMs: null, response };
	if (AUTH.has(error)) return { kind: 'unauthorized', reason, response };
	return { kind: 'rejected', reason, response };
}

export function slackChannel(options: SlackChannelOptions): Channel<SlackMessage> {
	const base = options.apiUrl.replace(/\/+$/, '');
	const url = `${base}/chat.postMessage`;
	const channel: Channel<SlackMessage> = {
		name: 'slack',
		idempotent: false,
		async send(message) {
			const body: Record<string, unknown> = { ...(message.extra ?? {}), channel: message.channel, text: message.text };
			if (message.blocks !== undefined) body.blocks = message.blocks;
			if (message.threadTs) body.thread_ts = message.threadTs;
			if (message.idempotencyKey) body.metadata = { event_type: SLACK_METADATA_EVENT, event_payload: { key: message.idempotencyKey } };
			let reply: HttpReply;
			try {
				reply = await options.transport({
					method: 'POST',
					url,
					headers: { Authorization: `Bearer ${options.token}`, 'Content-Type': 'application/json; charset=utf-8' },
					body,
					timeoutMs: options.timeoutMs,
				});
			} catch (error) {
				return classifyNetworkError(error);
			}
			return classifySlackReply(reply);
		},
	};
	if (options.check) channel.check = (message, window) => checkHistory(options, base, message, window);
	return channel;
}

/** Slack `ts` ("1700000000.000100") for epoch milliseconds. */
const slackTs = (ms: number) => (Math.max(0, ms) / 1000).toFixed(6);

interface HistoryPage {
	ok?: unknown;
	error?: unknown;
	needed?: unknown;
	messages?: unknown;
	has_more?: unknown;
	response_metadata?: { next_cursor?: unknown };
}

interface HistoryMessage {
	ts?: unknown;
	metadata?: { event_type?: unknown; event_payload?: { key?: unknown } };
}

/**
 * Looks for the message in the channel's history (`conversations.history`), or in the thread
 * (`conversations.replies`) for a reply, between the step's first claim and this takeover, widened
 * by SLACK_CHECK_MARGIN_MS on both sides. Never throws: a failure is `unknown`, with what to do.
 */
async function checkHistory(options: SlackChannelOptions, base: string, message: SlackMessage, window: CheckWindow): Promise<CheckVerdict> {
	const where = message.threadTs ? `the thread ${message.threadTs} in ${message.channel}` : message.channel;
	if (!message.idempotencyKey) return { outcome: 'unknown', detail: 'The message carries no key to look for in Slack' };
	if (!SLACK_CONVERSATION_ID.test(message.channel)) {
		return {
			outcome: 'unknown',
			detail:
				`Slack can only show the history of a channel given by its ID, and this message went to "${message.channel}". ` +
				'Set Slack Channel to the channel ID (such as C0123456789: in Slack, open the channel details; the ID is at the bottom), ' +
				'or for a direct message the conversation ID (D…), so that the next time Slack can be checked',
		};
	}
	const method = message.threadTs ? 'conversations.replies' : 'conversations.history';
	const what = message.threadTs ? 'the thread' : 'the channel history';
	const oldest = slackTs(window.sinceMs - SLACK_CHECK_MARGIN_MS);
	const latest = slackTs(window.untilMs + SLACK_CHECK_MARGIN_MS);
	const between = `between ${new Date(Number(oldest) * 1000).toISOString()} and ${new Date(Number(latest) * 1000).toISOString()}`;
	const maxPages = Math.max(1, options.checkMaxPages ?? SLACK_CHECK_MAX_PAGES);
	let read = 0;
	let cursor: string | null = null;
	for (let page = 1; page <= maxPages; page++) {
		const qs: Record<string, string> = {
			channel: message.channel,
			oldest,
			latest,
			inclusive: 'true',
			include_all_metadata: 'true',
			limit: String(SLACK_CHECK_PAGE_LIMIT),
		};
		if (message.threadTs) qs.ts = message.threadTs;
		if (cursor) qs.cursor = cursor;
		let reply: HttpReply;
		try {
			reply = await options.transport({
				method: 'GET',
				url: `${base}/${method}`,
				headers: { Authorization: `Bearer ${options.token}` },
				qs,
				timeoutMs: options.timeoutMs,
			});
		} catch (error) {
			return { outcome: 'unknown', detail: `Slack could not be asked for ${what}: ${describeNoAnswer(error, options.timeoutMs)}; check that n8n can reach Slack` };
		}
		const body = parseBody(reply.body) as HistoryPage | null;
		if (reply.status === 429 || (body && body.error === 'ratelimited')) {
			const wait = parseRetryAfter(headerValue(reply.headers, 'retry-after'));
			return {
				outcome: 'unknown',
				detail: `Slack is limiting how often ${what} may be read (${method}, ratelimited${wait !== null ? `, try again in ${Math.ceil(wait / 1000)} s` : ''}). Apps not approved for the Slack Marketplace may read it only once a minute; release the step after checking the channel yourself`,
			};
		}
		if (reply.status < 200 || reply.status >= 300) {
			return { outcome: 'unknown', detail: `Slack answered HTTP ${reply.status} when asked for ${what} (${method})` };
		}
		if (!body || typeof body !== 'object' || body.ok !== true) {
			const error = body && typeof body.error === 'string' ? body.error : 'unexpected_response';
			return { outcome: 'unknown', detail: refusal(error, typeof body?.needed === 'string' ? body.needed : null, method, what, message) };
		}
		const messages = Array.isArray(body.messages) ? (body.messages as HistoryMessage[]) : [];
		read += messages.length;
		const hit = messages.find(
			(m) => m && m.metadata?.event_type === SLACK_METADATA_EVENT && m.metadata.event_payload?.key === message.idempotencyKey,
		);
		if (hit) {
			const ts = typeof hit.ts === 'string' ? hit.ts : null;
			return {
				outcome: 'found',
				externalId: ts,
				// Shaped like a send's stored answer, so `response.body.ts` reads the same either way.
				response: { status: reply.status, headers: {}, body: limitBody({ ok: true, channel: message.channel, ts, message: hit }) },
				detail: `Slack has the message in ${where} (ts ${ts ?? 'unknown'}), posted by an earlier attempt`,
			};
		}
		const next = typeof body.response_metadata?.next_cursor === 'string' ? body.response_metadata.next_cursor : '';
		if (!next) {
			if (body.has_more === true) {
				return { outcome: 'unknown', detail: `Slack said ${what} has more messages ${between} but gave no way to read them (${read} read)` };
			}
			return { outcome: 'not_found', detail: `Slack has no message from this step in ${where} ${between} (${read} message${read === 1 ? '' : 's'} read)` };
		}
		cursor = next;
	}
	return {
		outcome: 'unknown',
		detail: `${where} has more messages ${between} than this check reads (${read} in ${maxPages} pages) and this step's message was not among them`,
	};
}

/** A Slack Web API body, parsed when it arrived as text. */
function parseBody(body: unknown): unknown {
	if (Buffer.isBuffer(body)) body = body.toString('utf8');
	if (typeof body !== 'string') return body;
	try {
		return JSON.parse(body);
	} catch {
		return null;
	}
}

/** Slack's `ok: false` on a history read, as something a person can act on. */
function refusal(error: string, needed: string | null, method: string, what: string, message: SlackMessage): string {
	const scopes = message.channel.startsWith('D') ? 'im:history' : message.channel.startsWith('G') ? 'groups:history' : 'channels:history (groups:history for a private channel)';
	switch (error) {
		case 'missing_scope':
			return (
				`Slack refused to show ${what} (missing_scope${needed ? `, needs ${needed}` : ''}): give the Slack app the ${needed ?? scopes} scope ` +
				'under OAuth & Permissions, reinstall it to the workspace and put the new token in the n8n credential; or turn off "Check Slack Before Resending"'
			);
		case 'not_in_channel':
		case 'channel_not_found':
			return `Slack refused to show ${what} of ${message.channel} (${error}): invite the app to the channel (/invite @your-app), or check the channel ID`;
		case 'thread_not_found':
			return `Slack found no thread ${message.threadTs ?? ''} in ${message.channel} (${error}): check the thread timestamp`;
		case 'not_authed':
		case 'invalid_auth':
		case 'account_inactive':
		case 'token_revoked':
		case 'token_expired':
			return `Slack refused the credential when asked for ${what} (${error}): fix the token in the n8n Slack credential`;
		default:
			return `Slack answered "${error}" when asked for ${what} (${method})`;
	}
}
