/**
 * Any HTTP API (a CRM, a billing API), sent with the ledger key in an `Idempotency-Key` header.
 * Also the status and network-error rules the Slack channel shares.
 */
import { readPath, type PathSegment } from '../keySource';
import { parseRetryAfter } from './retry';
import type { AttemptResult, Channel, HttpReply, HttpTransport } from './types';

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
}

export function httpChannel(options: HttpChannelOptions): Channel<HttpMessage> {
	const keyed = options.honoursKey && options.idempotencyHeader !== null;
	return {
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
}
