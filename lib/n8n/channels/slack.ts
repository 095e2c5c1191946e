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
import { performance } from 'perf_hooks';

import type { AttemptResult, Channel, CheckBudget, CheckRequest, CheckVerdict, CheckWindow, HttpReply, HttpTransport } from './types';

export const DEFAULT_SLACK_API_URL = 'https://slack.com/api';

/** The `event_type` of the message metadata that carries the step's hash. */
export const SLACK_METADATA_EVENT = 'n8n_idempotency_key';
/** The check reads this much further on both sides of the ledger's window, for Slack's clock. */
export const SLACK_CHECK_MARGIN_MS = 5 * 60_000;
/** Messages asked for per history page (Slack may answer with fewer). */
export const SLACK_CHECK_PAGE_LIMIT = 200;
/**
 * History pages read at most per channel and run; more than that answers "cannot tell". 100 pages
 * are 20,000 messages at Slack's 200, 1,500 at the 15 of an app outside the Marketplace.
 */
export const SLACK_CHECK_MAX_PAGES = 100;

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
/** Slack `error` values on a history read that pass: ask again later. */
const TRY_LATER_READ = new Set(['service_unavailable', 'internal_error', 'fatal_error', 'request_timeout']);
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
	if (options.check) {
		channel.check = (message, window) => checkHistory(options, base, message, window);
		channel.checkMany = (requests, budget) => checkHistoryMany(options, base, requests, budget);
	}
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

/** A check of one message alone: the batch of one, bounded by its page limit, with no waiting for Retry-After. */
function checkHistory(options: SlackChannelOptions, base: string, message: SlackMessage, window: CheckWindow): Promise<CheckVerdict> {
	return checkHistoryMany(options, base, [{ message, window }], { now: () => performance.now(), deadline: Number.POSITIVE_INFINITY, maxWaitMs: 0 }).then((v) => v[0]);
}

/** How far a check of one message read down a channel or thread: every message from `latest` on was seen. */
interface SlackResume {
	latest: string;
}

const readResume = (resume: unknown): SlackResume | null =>
	resume && typeof resume === 'object' && typeof (resume as SlackResume).latest === 'string' && /^\d+(\.\d+)?$/.test((resume as SlackResume).latest)
		? (resume as SlackResume)
		: null;

const tsMs = (ts: string) => Number(ts) * 1000;

/**
 * Looks for many messages at once: each channel (or thread) is read once, newest first, from the
 * latest end of its messages' windows down to the oldest start (each widened by
 * SLACK_CHECK_MARGIN_MS), page by page with Slack's cursor, taking whatever page size Slack
 * allows (15 messages for apps outside the Marketplace), and stopping once every message is
 * found. A 429 is waited out when Retry-After fits the budget; otherwise every message not yet
 * found is `later`, with how far the read got, and nothing more is asked of Slack in this run.
 * A message whose check resumes (`resume.latest`) is only looked for below what was read before.
 * Never throws.
 */
async function checkHistoryMany(
	options: SlackChannelOptions,
	base: string,
	requests: Array<CheckRequest<SlackMessage>>,
	budget: CheckBudget,
): Promise<CheckVerdict[]> {
	const verdicts: Array<CheckVerdict | undefined> = new Array(requests.length);
	const groups = new Map<string, number[]>();
	requests.forEach(({ message }, i) => {
		if (!message.idempotencyKey) {
			verdicts[i] = { outcome: 'unknown', detail: 'The message carries no key to look for in Slack' };
			return;
		}
		if (!SLACK_CONVERSATION_ID.test(message.channel)) {
			verdicts[i] = {
				outcome: 'unknown',
				detail:
					`Slack can only show the history of a channel given by its ID, and this message went to "${message.channel}". ` +
					'Set Slack Channel to the channel ID (such as C0123456789: in Slack, open the channel details; the ID is at the bottom), ' +
					'or for a direct message the conversation ID (D…), so that the next time Slack can be checked',
			};
			return;
		}
		const group = `${message.channel}\u0000${message.threadTs ?? ''}`;
		groups.set(group, [...(groups.get(group) ?? []), i]);
	});
	const maxPages = Math.max(1, options.checkMaxPages ?? SLACK_CHECK_MAX_PAGES);
	const state = { waitedMs: 0, limitedFor: null as number | null, stopped: null as string | null };
	for (const indexes of groups.values()) {
		await readGroup(options, base, requests, indexes, verdicts, budget, maxPages, state);
	}
	return verdicts.map((v) => v ?? { outcome: 'unknown', detail: 'The Slack check did not reach this message' });
}

interface GroupState {
	/** Retry-After waits of this run, added up. */
	waitedMs: number;
	/** Slack limits reads for this long (ms from when it said so): later groups are not asked. */
	limitedFor: number | null;
	/** Why this run asks Slack no more (the budget is spent, or Slack limits reads). */
	stopped: string | null;
}

async function readGroup(
	options: SlackChannelOptions,
	base: string,
	requests: Array<CheckRequest<SlackMessage>>,
	indexes: number[],
	verdicts: Array<CheckVerdict | undefined>,
	budget: CheckBudget,
	maxPages: number,
	state: GroupState,
): Promise<void> {
	const first = requests[indexes[0]].message;
	const where = first.threadTs ? `the thread ${first.threadTs} in ${first.channel}` : first.channel;
	const method = first.threadTs ? 'conversations.replies' : 'conversations.history';
	const what = first.threadTs ? 'the thread' : 'the channel history';
	// Each message's own range: its window widened for Slack's clock, below what an earlier check read.
	const ranges = indexes.map((i) => {
		const { window, resume } = requests[i];
		const read = readResume(resume);
		const until = window.untilMs + SLACK_CHECK_MARGIN_MS;
		return { i, since: window.sinceMs - SLACK_CHECK_MARGIN_MS, until: read ? Math.min(until, tsMs(read.latest)) : until, resumed: read !== null };
	});
	const oldest = slackTs(Math.min(...ranges.map((r) => r.since)));
	const latest = slackTs(Math.max(...ranges.map((r) => r.until)));
	const between = (r: { since: number; until: number }) => `between ${new Date(r.since).toISOString()} and ${new Date(r.until).toISOString()}`;
	const wanted = new Map(indexes.map((i) => [requests[i].message.idempotencyKey as string, i]));
	let read = 0;
	let pages = 0;
	/** The oldest ts read so far: every message from it up to `latest` was seen. */
	let readDownTo: string | null = null;
	let cursor: string | null = null;
	/** Every message not found yet gets the same answer. */
	const settle = (verdict: (r: (typeof ranges)[number]) => CheckVerdict) => {
		for (const r of ranges) if (!verdicts[r.i]) verdicts[r.i] = verdict(r);
	};
	const later = (detail: string, retryAfterMs: number | null) =>
		settle((r) => {
			const progressed = readDownTo !== null && tsMs(readDownTo) < r.until;
			const resume = readDownTo !== null && progressed ? { latest: readDownTo } : requests[r.i].resume;
			return { outcome: 'later', detail, retryAfterMs, ...(resume ? { resume } : {}), progressed };
		});
	if (state.stopped) return later(state.stopped, state.limitedFor);
	for (;;) {
		if (pages >= maxPages) {
			return settle((r) => ({
				outcome: 'unknown',
				detail: `${where} has more messages ${between(r)} than this check reads (${read} in ${pages} pages) and this step's message was not among them`,
			}));
		}
		if (budget.now() + options.timeoutMs > budget.deadline) {
			state.stopped = `There was no time left in this run to read ${what} of ${where} (${read} message${read === 1 ? '' : 's'} read); the next run reads on`;
			return later(state.stopped, null);
		}
		const qs: Record<string, string> = { channel: first.channel, oldest, latest, inclusive: 'true', include_all_metadata: 'true', limit: String(SLACK_CHECK_PAGE_LIMIT) };
		if (first.threadTs) qs.ts = first.threadTs;
		if (cursor) qs.cursor = cursor;
		let reply: HttpReply;
		try {
			reply = await options.transport({ method: 'GET', url: `${base}/${method}`, headers: { Authorization: `Bearer ${options.token}` }, qs, timeoutMs: options.timeoutMs });
		} catch (error) {
			return later(`Slack could not be asked for ${what}: ${describeNoAnswer(error, options.timeoutMs)}; it is asked again on the next run`, null);
		}
		const body = parseBody(reply.body) as HistoryPage | null;
		const error = body && typeof body.error === 'string' ? body.error : null;
		if (reply.status === 429 || error === 'ratelimited' || error === 'rate_limited') {
			const wait = parseRetryAfter(headerValue(reply.headers, 'retry-after')) ?? 60_000;
			if (state.waitedMs + wait <= budget.maxWaitMs && budget.now() + wait + options.timeoutMs <= budget.deadline) {
				state.waitedMs += wait;
				await new Promise((r) => setTimeout(r, wait));
				continue;
			}
			state.limitedFor = wait;
			state.stopped =
				`Slack is limiting how often ${what} may be read (${method}, ratelimited, try again in ${Math.ceil(wait / 1000)} s). ` +
				'Apps not approved for the Slack Marketplace may read it once a minute, 15 messages at a time; the step is checked again by a later run';
			return later(state.stopped, wait);
		}
		if (reply.status >= 500 || (error !== null && TRY_LATER_READ.has(error))) {
			return later(`Slack answered ${reply.status >= 500 ? `HTTP ${reply.status}` : `"${error}"`} when asked for ${what} (${method}); it is asked again on the next run`, parseRetryAfter(headerValue(reply.headers, 'retry-after')));
		}
		if (reply.status < 200 || reply.status >= 300) {
			return settle(() => ({ outcome: 'unknown', detail: `Slack answered HTTP ${reply.status} when asked for ${what} (${method})` }));
		}
		if (!body || typeof body !== 'object' || body.ok !== true) {
			const detail = refusal(error ?? 'unexpected_response', typeof body?.needed === 'string' ? body.needed : null, method, what, first);
			return settle(() => ({ outcome: 'unknown', detail }));
		}
		pages++;
		const messages = Array.isArray(body.messages) ? (body.messages as HistoryMessage[]) : [];
		read += messages.length;
		for (const m of messages) {
			if (!m) continue;
			// A thread is read oldest first: only the channel's history (newest first) is resumed.
			if (!first.threadTs && typeof m.ts === 'string' && (readDownTo === null || Number(m.ts) < Number(readDownTo))) readDownTo = m.ts;
			const key = m.metadata?.event_type === SLACK_METADATA_EVENT ? m.metadata.event_payload?.key : undefined;
			const i = typeof key === 'string' ? wanted.get(key) : undefined;
			if (i === undefined || verdicts[i]) continue;
			const ts = typeof m.ts === 'string' ? m.ts : null;
			verdicts[i] = {
				outcome: 'found',
				externalId: ts,
				// Shaped like a send's stored answer, so `response.body.ts` reads the same either way.
				response: { status: reply.status, headers: {}, body: limitBody({ ok: true, channel: first.channel, ts, message: m }) },
				detail: `Slack has the message in ${where} (ts ${ts ?? 'unknown'}), posted by an earlier attempt`,
			};
		}
		if (ranges.every((r) => verdicts[r.i])) return;
		// Newest first: once the read is below a message's range, the rest of the channel cannot hold it.
		if (!first.threadTs && readDownTo !== null) {
			for (const r of ranges) {
				if (!verdicts[r.i] && tsMs(readDownTo) < r.since) verdicts[r.i] = notFound(r);
			}
			if (ranges.every((r) => verdicts[r.i])) return;
		}
		const next = typeof body.response_metadata?.next_cursor === 'string' ? body.response_metadata.next_cursor : '';
		if (!next) {
			if (body.has_more === true) {
				return settle(() => ({ outcome: 'unknown', detail: `Slack said ${what} has more messages but gave no way to read them (${read} read)` }));
			}
			return settle(notFound);
		}
		cursor = next;
	}

	function notFound(r: { since: number; until: number; resumed: boolean }): CheckVerdict {
		return {
			outcome: 'not_found',
			detail: `Slack has no message from this step in ${where} ${between(r)} (${read} message${read === 1 ? '' : 's'} read${r.resumed ? ' in this run; newer ones were read by an earlier one' : ''})`,
		};
	}
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
