/**
 * Slack: `chat.postMessage` over the Web API. Slack has no idempotency key, so a message that may
 * have been posted is never posted again unless the user accepted that risk.
 */
import { classifyNetworkError, classifyStatus, headerValue, storedReply } from './http';
import { parseRetryAfter } from './retry';
import type { AttemptResult, Channel, HttpReply, HttpTransport } from './types';

export const DEFAULT_SLACK_API_URL = 'https://slack.com/api';

export interface SlackMessage {
	channel: string;
	text: string;
	/** Block Kit blocks, passed as they are. */
	blocks?: unknown;
	threadTs?: string;
	/** Further chat.postMessage arguments (unfurl_links, username, icon_emoji…). */
	extra?: Record<string, unknown>;
}

export interface SlackChannelOptions {
	transport: HttpTransport;
	token: string;
	/** e.g. https://slack.com/api; a local server in tests. */
	apiUrl: string;
	timeoutMs: number;
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
	const url = `${options.apiUrl.replace(/\/+$/, '')}/chat.postMessage`;
	return {
		name: 'slack',
		idempotent: false,
		async send(message) {
			const body: Record<string, unknown> = { ...(message.extra ?? {}), channel: message.channel, text: message.text };
			if (message.blocks !== undefined) body.blocks = message.blocks;
			if (message.threadTs) body.thread_ts = message.threadTs;
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
}
