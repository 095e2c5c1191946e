/**
 * Any HTTP API (a CRM, a billing API), sent with the ledger key in an `Idempotency-Key` header.
 * Also the status and network-error rules the Slack channel shares.
 *
 * For an API that does not honour the key, an optional check request (GET or HEAD, never the
 * message) asks whether an earlier attempt created the thing; its status says found, not found,
 * or cannot tell.
 */
import { formatPath, readPath, type PathSegment } from '../keySource';
import { parseRetryAfter } from './retry';
import type { AttemptResult, Channel, CheckVerdict, HttpReply, HttpTransport } from './types';

/** Stored responses are cut to this many characters, so that a huge body cannot bloat the ledger. */
export const MAX_STORED_BODY = 64 * 1024;

/** Network errors that prove the request never reached the destination. */
const NOT_DELIVERED = new Set([
	'ECONNREFUSED',
	'ENOTFOUND',
	'EAI_AGAIN',
	'EHOSTUNREACH',
	'ENETUNREACH',
	'EADDRNOTAVAIL',
	'CERT_HAS_EXPIRED',
	'DEPTH_ZERO_SELF_SIGNED_CERT',
	'SELF_SIGNED_CERT_IN_CHAIN',
	'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
	'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/** The first `code` found on an error or the errors it wraps (n8n wraps request errors in NodeApiError). */
export function errorCode(error: unknown): string | null {
	let current = error as { code?: unknown; cause?: unknown } | null | undefined;
	for (let depth = 0; current && depth < 5; depth++) {
		if (typeof current.code === 'string' && /^[A-Z][A-Z0-9_]+$/.test(current.code)) return current.code;
		current = current.cause as typeof current;
	}
	return null;
}

/** "ETIMEDOUT: …" as a person reads it: "no answer within 30 s" for a timeout, else the code and message. */
export function describeNoAnswer(error: unknown, timeoutMs: number): string {
	const code = errorCode(error);
	if (code === 'ETIMEDOUT' || code === 'ECONNABORTED' || code === 'ESOCKETTIMEDOUT') return `no answer within ${timeoutMs / 1000} s`;
	const text = (error as Error)?.message ?? String(error);
	return code && !text.includes(code) ? `${code}: ${text}` : text;
}

/** No response arrived: did the request reach the destination? */
export function classifyNetworkError(error: unknown): AttemptResult {
	const code = errorCode(error);
	const message = (error as Error)?.message ?? String(error);
	const reason = code ? `${code}: ${message}` : message;
	if (code && NOT_DELIVERED.has(code)) return { kind: 'unavailable', reason, retryAfterMs: null, response: { error: reason } };
	return { kind: 'uncertain', reason: `No response (${reason})`, retryAfterMs: null, response: { error: reason } };
}

export function headerValue(headers: Record<string, unknown>, name: string): unknown {
	const wanted = name.toLowerCase();
	for (const [k, v] of Object.entries(headers ?? {})) if (k.toLowerCase() === wanted) return v;
	return undefined;
}

/** What is kept of a reply: status, a few useful headers, and the body (cut when huge). */
export function storedReply(reply: HttpReply): { status: number; headers: Record<string, unknown>; body: unknown } {
	const keep: Record<string, unknown> = {};
	for (const name of ['content-type', 'location', 'retry-after', 'request-id', 'x-request-id', 'idempotency-key', 'idempotent-replayed']) {
		const v = headerValue(reply.headers, name);
		if (v !== undefined) keep[name] = v;
	}
	return { status: reply.status, headers: keep, body: limitBody(reply.body) };
}

export function limitBody(body: unknown): unknown {
	if (body === undefined) return null;
	if (Buffer.isBuffer(body)) body = body.toString('utf8');
	if (typeof body === 'string') {
		return body.length > MAX_STORED_BODY ? { truncated: true, text: body.slice(0, MAX_STORED_BODY) } : body;
	}
	const text = JSON.stringify(body);
	if (text !== undefined && text.length > MAX_STORED_BODY) return { truncated: true, text: text.slice(0, MAX_STORED_BODY) };
	return body;
}

/**
 * A reply that is not 2xx. `keyed` says whether the request carried an idempotency key the
 * destination honours: then 409 means "the same key is being processed right now" (IETF draft,
 * Stripe) and is worth waiting for.
 */
export function classifyStatus(reply: HttpReply, keyed: boolean): AttemptResult {
	const status = reply.status;
	const response = storedReply(reply);
	const retryAfterMs = parseRetryAfter(headerValue(reply.headers, 'retry-after'));
	const reason = `HTTP ${status}${describeBody(reply.body)}`;
	if (status === 401 || status === 407) return { kind: 'unauthorized', reason, response };
	if (status === 429 || status === 503 || status === 408 || status === 425 || (status === 409 && keyed)) {
		return { kind: 'unavailable', reason, retryAfterMs, response };
	}
	if (status >= 500) return { kind: 'uncertain', reason, retryAfterMs, response };
	return { kind: 'rejected', reason, response };
}

function describeBody(body: unknown): string {
	if (body === null || body === undefined || body === '') return '';
	const text = typeof body === 'string' ? body : Buffer.isBuffer(body) ? body.toString('utf8') : JSON.stringify(body);
	return `: ${text.length > 200 ? `${text.slice(0, 200)}…` : text}`;
}

export interface HttpMessage {
	method: string;
	url: string;
	headers: Record<string, string>;
	qs?: Record<string, string>;
	body?: unknown;
	/** The ledger key of this intent; sent in the idempotency header. */
	idempotencyKey: string;
	/** The request that asks whether an earlier attempt created it; not part of the content. */
	check?: HttpCheckRequest;
}

/** Methods a check may use: they read, never act. */
export const CHECK_METHODS = ['GET', 'HEAD'] as const;

export interface HttpCheckRequest {
	method: (typeof CHECK_METHODS)[number];
	url: string;
	headers: Record<string, string>;
}

/** Status ranges, inclusive, e.g. "2xx" → [[200, 299]]; with the text they came from. */
export interface StatusList {
	ranges: Array<[number, number]>;
	text: string;
}

/**
 * "2xx", "404, 410", "200-204": null when an entry is none of those (the caller says what is
 * wrong). Empty text is an empty list.
 */
export function parseStatusList(text: string): StatusList | null {
	const ranges: Array<[number, number]> = [];
	for (const raw of text.split(/[,;\s]+/)) {
		const entry = raw.trim().toLowerCase();
		if (!entry) continue;
		let m: RegExpExecArray | null;
		if ((m = /^([1-5])xx$/.exec(entry))) ranges.push([Number(m[1]) * 100, Number(m[1]) * 100 + 99]);
		else if ((m = /^([1-5]\d\d)$/.exec(entry))) ranges.push([Number(m[1]), Number(m[1])]);
		else if ((m = /^([1-5]\d\d)-([1-5]\d\d)$/.exec(entry)) && Number(m[1]) <= Number(m[2])) ranges.push([Number(m[1]), Number(m[2])]);
		else return null;
	}
	return { ranges, text: ranges.length ? text.trim() : '(none)' };
}

export const inStatusList = (list: StatusList, status: number) => list.ranges.some(([lo, hi]) => status >= lo && status <= hi);

/** Whether two lists share a status. */
export const statusListsOverlap = (a: StatusList, b: StatusList) => a.ranges.some(([lo, hi]) => b.ranges.some(([lo2, hi2]) => lo <= hi2 && lo2 <= hi));

export interface HttpCheckOptions {
	/** Statuses that mean "it exists: an earlier attempt created it". */
	found: StatusList;
	/** Statuses that mean "it does not exist". Anything else, and no answer, is "cannot tell". */
	notFound: StatusList;
	/** Where the ID is in a JSON answer; null: none is read (and none is required). */
	idPath: PathSegment[] | null;
}

export interface HttpChannelOptions {
	transport: HttpTransport;
	/** Header that carries the key; null sends none. */
	idempotencyHeader: string | null;
	/** Whether the destination deduplicates by that header, which makes repeats safe. */
	honoursKey: boolean;
	timeoutMs: number;
	/** Where the destination's id is in a JSON reply (e.g. `id`, `data.id`); null: none. */
	idPath: PathSegment[] | null;
	/**
	 * How to read the answer to a message's check request. Used only where a repeat is not safe
	 * (the destination does not honour the key); messages without a check request get `unknown`.
	 */
	check?: HttpCheckOptions | null;
}

export function httpChannel(options: HttpChannelOptions): Channel<HttpMessage> {
	const keyed = options.honoursKey && options.idempotencyHeader !== null;
	const channel: Channel<HttpMessage> = {
		name: 'http',
		idempotent: keyed,
		async send(message) {
			const headers = { ...message.headers };
			if (options.idempotencyHeader) headers[options.idempotencyHeader] = message.idempotencyKey;
			let reply: HttpReply;
			try {
				reply = await options.transport({
					method: message.method,
					url: message.url,
					headers,
					qs: message.qs,
					body: message.body,
					timeoutMs: options.timeoutMs,
				});
			} catch (error) {
				return classifyNetworkError(error);
			}
			if (reply.status >= 200 && reply.status < 300) {
				const id = options.idPath && reply.body && typeof reply.body === 'object' ? readPath(reply.body, options.idPath) : undefined;
				return {
					kind: 'sent',
					externalId: id === undefined || id === null || typeof id === 'object' ? null : String(id),
					response: storedReply(reply),
				};
			}
			return classifyStatus(reply, keyed);
		},
	};
	// A destination that honours the key is asked again with the same key instead: no check there.
	const check = options.check;
	if (check && !keyed) channel.check = (message) => runCheck(options, check, message);
	return channel;
}

/** Answers to a check request that pass: too many requests, a timeout, a server error. */
const CHECK_LATER_STATUSES = new Set([408, 425, 429, 500, 502, 503, 504]);

/** Sends the message's check request (never its body) and reads the answer. Never throws. */
async function runCheck(options: HttpChannelOptions, check: HttpCheckOptions, message: HttpMessage): Promise<CheckVerdict> {
	const request = message.check;
	if (!request) return { outcome: 'unknown', detail: 'No check request is set up for this item' };
	if (!(CHECK_METHODS as readonly string[]).includes(request.method)) {
		return { outcome: 'unknown', detail: `A check request may only use GET or HEAD, not ${request.method}: a check must not perform the action` };
	}
	const headers = { ...request.headers };
	if (options.idempotencyHeader && message.idempotencyKey) headers[options.idempotencyHeader] = message.idempotencyKey;
	const target = `${request.method} ${request.url.length > 200 ? `${request.url.slice(0, 200)}…` : request.url}`;
	let reply: HttpReply;
	try {
		reply = await options.transport({ method: request.method, url: request.url, headers, timeoutMs: options.timeoutMs });
	} catch (error) {
		return { outcome: 'later', detail: `The check request (${target}) failed: ${describeNoAnswer(error, options.timeoutMs)}; it is asked again on the next run`, retryAfterMs: null };
	}
	const status = reply.status;
	if (inStatusList(check.notFound, status)) {
		return { outcome: 'not_found', detail: `The check request (${target}) answered HTTP ${status}: the API does not have it` };
	}
	if (!inStatusList(check.found, status) && CHECK_LATER_STATUSES.has(status)) {
		const wait = parseRetryAfter(headerValue(reply.headers, 'retry-after'));
		return {
			outcome: 'later',
			detail: `The check request (${target}) answered HTTP ${status}${describeBody(reply.body)}: the API could not answer for now${wait !== null ? ` (try again in ${Math.ceil(wait / 1000)} s)` : ''}; it is asked again on the next run`,
			retryAfterMs: wait,
		};
	}
	if (!inStatusList(check.found, status)) {
		const hint = status === 401 || status === 403 || status === 407 ? '; the API refused the credential' : '';
		return {
			outcome: 'unknown',
			detail: `The check request (${target}) answered HTTP ${status}${describeBody(reply.body)}, which is neither "found" (${check.found.text}) nor "not found" (${check.notFound.text})${hint}`,
		};
	}
	const response = storedReply(reply);
	if (request.method === 'HEAD' || !check.idPath) {
		return { outcome: 'found', externalId: null, response, detail: `The check request (${target}) answered HTTP ${status}: the API has it` };
	}
	// A search that answers a list: empty is "not there"; otherwise the first entry is the one.
	let body = reply.body;
	if (Buffer.isBuffer(body)) body = body.toString('utf8');
	if (typeof body === 'string') {
		try {
			body = JSON.parse(body);
		} catch {
			// not JSON: no ID can be read
		}
	}
	if (Array.isArray(body) && body.length === 0) {
		return { outcome: 'not_found', detail: `The check request (${target}) answered HTTP ${status} with an empty list: the API does not have it` };
	}
	const entry = Array.isArray(body) ? body[0] : body;
	const id = entry && typeof entry === 'object' ? readPath(entry, check.idPath) : undefined;
	if (id === undefined || id === null || id === '' || typeof id === 'object') {
		const field = formatPath(check.idPath);
		return {
			outcome: 'unknown',
			detail: `The check request (${target}) answered HTTP ${status}, but its answer has no "${field}" field, so it does not show that the API has it. Point "ID Field" at the field that holds the ID, or leave it empty to count any such answer as found`,
		};
	}
	return { outcome: 'found', externalId: String(id), response, detail: `The check request (${target}) answered HTTP ${status}: the API has it (ID ${String(id)})` };
}
