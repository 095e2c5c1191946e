/**
 * Real local destinations for Guarded Send tests, each counting what it actually did:
 *
 * - `slackServer()`: a Slack-Web-API-compatible HTTP server (`POST /api/chat.postMessage`, bearer
 *   token, `{ ok, ts }` replies, 429 + Retry-After like Slack's rate limits). It keeps each
 *   message's `metadata` and serves `conversations.history` and `conversations.replies` as Slack
 *   does (newest first / thread oldest first, `oldest`/`latest`/`inclusive`, metadata only with
 *   `include_all_metadata`, `limit` and cursor paging, a page size cap and a rate limit like Slack's
 *   for apps outside the Marketplace); `historyPlan` makes those fail or hang.
 * - `smtpServer()`: a real SMTP server (the `smtp-server` package) that keeps every mail it
 *   accepted, with its Message-ID. With `sentFolder` (a Dovecot from test/support/imapServer.ts)
 *   it also files each accepted mail in the sender's Sent folder over IMAP APPEND before it
 *   answers, as Gmail and Microsoft 365 do with mail sent over SMTP.
 * - `stripeLikeServer()`: an HTTP API that honours `Idempotency-Key` the way Stripe does: the
 *   first request with a key performs the action and stores the response; a repeat with the same
 *   key and body gets the stored response back (`Idempotent-Replayed: true`) without acting
 *   again; a repeat with a different body is refused with 422; a repeat while the first is still
 *   running gets 409.
 *
 * Every server can misbehave on purpose, per request, through `plan`: answer 503, answer 429
 * with Retry-After, or act and then never answer (so a test can SIGKILL the sender between "the
 * destination acted" and "the sender recorded it"). `received` emits once the server has acted.
 */
import { createHash } from 'crypto';
import { EventEmitter } from 'events';
import http from 'http';
import type { AddressInfo } from 'net';

import { SMTPServer } from 'smtp-server';

/** What to do with one request, decided before acting. */
export type Behaviour =
	| { kind: 'normal' }
	/** Refuse without acting. */
	| { kind: 'status'; status: number; retryAfter?: string; body?: unknown }
	/** Act (count it, store the response), then never answer. */
	| { kind: 'hang' }
	/**
	 * The Stripe-like API only: the whole request is read, acted on only when `act`, and then the
	 * connection is dropped without an answer (the sender sees a reset after its request was written).
	 */
	| { kind: 'drop'; act: boolean };

/** `n` counts requests (or mails) this server has received, from 1. */
export type Plan = (n: number, info: { key?: string; path: string }) => Behaviour;

const normal: Plan = () => ({ kind: 'normal' });

/** Deterministic pseudo-random numbers in [0, 1), so that flaky runs are reproducible. */
export function seededRandom(seed: number): () => number {
	let x = seed >>> 0 || 1;
	return () => {
		x ^= x << 13;
		x >>>= 0;
		x ^= x >>> 17;
		x ^= x << 5;
		x >>>= 0;
		return x / 4294967296;
	};
}

/**
 * A flaky plan: `unavailable` of requests get 503, `limited` get 429 with Retry-After (delta
 * seconds, or an HTTP date every third time), the rest pass.
 */
export function flakyPlan(options: { seed: number; unavailable: number; limited: number; retryAfterSeconds?: number }): Plan & {
	counts: { unavailable: number; limited: number };
} {
	const random = seededRandom(options.seed);
	const counts = { unavailable: 0, limited: 0 };
	const plan = ((n: number): Behaviour => {
		const r = random();
		if (r < options.unavailable) {
			counts.unavailable++;
			return { kind: 'status', status: 503, body: { error: 'service unavailable' } };
		}
		if (r < options.unavailable + options.limited) {
			counts.limited++;
			const seconds = options.retryAfterSeconds ?? 1;
			const retryAfter = n % 3 === 0 ? new Date(Date.now() + seconds * 1000 + 999).toUTCString() : String(seconds);
			return { kind: 'status', status: 429, retryAfter, body: { error: 'rate limited' } };
		}
		return { kind: 'normal' };
	}) as unknown as Plan & { counts: typeof counts };
	plan.counts = counts;
	return plan;
}

interface Base {
	url: string;
	/** Emits 'received' (after acting) with the request's details. */
	events: EventEmitter;
	/** Requests (or SMTP transactions) that reached the server, whatever was answered. */
	requests: number;
	setPlan(plan: Plan): void;
	close(): Promise<void>;
}

export function readBody(req: http.IncomingMessage): Promise<string> {
	return new Promise((resolve, reject) => {
		const chunks: Buffer[] = [];
		req.on('data', (c: Buffer) => chunks.push(c));
		req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
		req.on('error', reject);
	});
}

function reply(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
	res.writeHead(status, { 'Content-Type': 'application/json', ...headers });
	res.end(JSON.stringify(body));
}

async function listen(server: http.Server): Promise<number> {
	await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
	return (server.address() as AddressInfo).port;
}

function closeHttp(server: http.Server, hanging: Set<http.ServerResponse>): Promise<void> {
	for (const res of hanging) res.destroy();
	hanging.clear();
	server.closeAllConnections?.();
	return new Promise((resolve) => server.close(() => resolve()));
}

/* ---------------------------------------------------------------------------------------- */

export interface SlackMessageSeen {
	channel: string;
	text: string;
	ts: string;
	token: string;
	/** chat.postMessage's `thread_ts`: a reply in that thread. */
	threadTs?: string;
	/** chat.postMessage's `metadata` ({ event_type, event_payload }), as posted. */
	metadata?: unknown;
	/** chat.postMessage's `blocks` (e.g. Send and Wait's message and its button), as posted. */
	blocks?: unknown[];
}

export interface SlackServer extends Base {
	/** The Slack API URL to configure ("Slack API URL" option), e.g. http://127.0.0.1:1234/api. */
	apiUrl: string;
	messages: SlackMessageSeen[];
	/** conversations.history and conversations.replies requests, whatever was answered. */
	historyRequests: Array<{ method: string; path: string; params: Record<string, string> }>;
	/** Decides each history or replies request: `status` answers with it (e.g. ok:false missing_scope), `hang` never answers. */
	setHistoryPlan(plan: Plan): void;
	/** History reads answered 429 by the rate limit. */
	historyLimited: number;
	/** Sets (or with null lifts) the history rate limit, from now. */
	setHistoryRateLimit(limit: HistoryRateLimit | null): void;
	/** A message in the channel as if someone had posted it (ts: now, unless given). */
	addMessage(message: { channel: string; text: string; ts?: string; threadTs?: string; metadata?: unknown }): SlackMessageSeen;
}

/** A history plan answering like Slack for a token without the history scope. */
export const slackMissingScope: Plan = () => ({
	kind: 'status',
	status: 200,
	body: { ok: false, error: 'missing_scope', needed: 'channels:history', provided: 'chat:write' },
});

/** Slack's ts ("1700000000.000100") as an integer of microseconds, for exact comparisons. */
const tsMicros = (ts: string) => {
	const [s, f = ''] = String(ts).split('.');
	return Number(s) * 1_000_000 + Number((f + '000000').slice(0, 6));
};

/**
 * Slack's per-method rate limit on history reads: at most `calls` per `windowMs` (Slack: 1 a
 * minute for a commercially distributed app outside the Marketplace, about 50 for an internal
 * app). A read over the limit gets 429 with Retry-After, in whole seconds, until the window ends.
 */
export interface HistoryRateLimit {
	calls: number;
	windowMs: number;
}

export async function slackServer(
	options: { token?: string; plan?: Plan; historyPlan?: Plan; historyPageSize?: number; historyRateLimit?: HistoryRateLimit } = {},
): Promise<SlackServer> {
	const token = options.token ?? 'xoxb-test-token';
	const events = new EventEmitter();
	const hanging = new Set<http.ServerResponse>();
	let plan = options.plan ?? normal;
	let historyPlan = options.historyPlan ?? normal;
	let seq = 0;
	const nextTs = () => `${Math.floor(Date.now() / 1000)}.${String(++seq).padStart(6, '0')}`;
	const state = { requests: 0, limited: 0, messages: [] as SlackMessageSeen[], history: [] as SlackServer['historyRequests'] };
	let rateLimit = options.historyRateLimit ?? null;
	/** When the history reads that were answered were answered (ms), for the rate limit. */
	let answered: number[] = [];

	/** conversations.history / conversations.replies, as Slack answers them. */
	function history(res: http.ServerResponse, method: string, params: Record<string, string>, auth: string) {
		state.history.push({ method: 'GET', path: method, params });
		if (auth !== `Bearer ${token}`) return reply(res, 200, { ok: false, error: 'invalid_auth' });
		const behaviour = historyPlan(state.history.length, { path: method });
		if (behaviour.kind === 'hang') return void hanging.add(res);
		if (behaviour.kind === 'status') {
			return reply(res, behaviour.status, behaviour.body ?? { ok: false, error: 'ratelimited' }, behaviour.retryAfter ? { 'Retry-After': behaviour.retryAfter } : {});
		}
		if (rateLimit) {
			const now = Date.now();
			answered = answered.filter((t) => t > now - rateLimit!.windowMs);
			if (answered.length >= rateLimit.calls) {
				const wait = Math.max(1, Math.ceil((answered[0] + rateLimit.windowMs - now) / 1000));
				state.limited++;
				return reply(res, 429, { ok: false, error: 'ratelimited' }, { 'Retry-After': String(wait) });
			}
			answered.push(now);
		}
		const channel = params.channel ?? '';
		// Slack reads conversations by ID only.
		if (!channel) return reply(res, 200, { ok: false, error: 'channel_not_found' });
		if (!/^[CGD][A-Z0-9]+$/.test(channel)) return reply(res, 200, { ok: false, error: 'channel_not_found' });
		const truthy = (v: string | undefined) => v === 'true' || v === '1';
		const inclusive = truthy(params.inclusive);
		const oldest = params.oldest ? tsMicros(params.oldest) : 0;
		const latest = params.latest ? tsMicros(params.latest) : Number.MAX_SAFE_INTEGER;
		const inWindow = (m: SlackMessageSeen) => {
			const t = tsMicros(m.ts);
			return inclusive ? t >= oldest && t <= latest : t > oldest && t < latest;
		};
		let list: SlackMessageSeen[];
		if (method === 'conversations.replies') {
			const parent = state.messages.find((m) => m.channel === channel && m.ts === params.ts && !m.threadTs);
			if (!parent) return reply(res, 200, { ok: false, error: 'thread_not_found' });
			const replies = state.messages.filter((m) => m.channel === channel && m.threadTs === params.ts && inWindow(m)).sort((a, b) => tsMicros(a.ts) - tsMicros(b.ts));
			list = [parent, ...replies];
		} else {
			// Newest first; thread replies are not part of the channel's history.
			list = state.messages.filter((m) => m.channel === channel && !m.threadTs && inWindow(m)).sort((a, b) => tsMicros(b.ts) - tsMicros(a.ts));
		}
		const limit = Math.min(Number(params.limit) > 0 ? Number(params.limit) : 100, 999, options.historyPageSize ?? 999);
		const offset = params.cursor ? Number(Buffer.from(params.cursor, 'base64').toString('utf8').replace(/^offset:/, '')) : 0;
		const page = list.slice(offset, offset + limit);
		const more = offset + limit < list.length;
		const withMetadata = truthy(params.include_all_metadata);
		reply(res, 200, {
			ok: true,
			messages: page.map((m) => ({
				type: 'message',
				user: 'U0BOT',
				text: m.text,
				ts: m.ts,
				...(m.threadTs ? { thread_ts: m.threadTs } : {}),
				...(withMetadata && m.metadata !== undefined ? { metadata: m.metadata } : {}),
			})),
			has_more: more,
			response_metadata: { next_cursor: more ? Buffer.from(`offset:${offset + limit}`).toString('base64') : '' },
		});
	}

	const server = http.createServer(async (req, res) => {
		const raw = await readBody(req);
		const url = new URL(req.url ?? '/', 'http://localhost');
		const readMethod = /^\/api\/(conversations\.history|conversations\.replies)$/.exec(url.pathname);
		if (readMethod && (req.method === 'GET' || req.method === 'POST')) {
			// GET with a query string, or POST as a form, as Slack's Web API accepts.
			const params = Object.fromEntries(url.searchParams);
			if (req.method === 'POST' && raw) Object.assign(params, Object.fromEntries(new URLSearchParams(raw)));
			return history(res, readMethod[1], params, String(req.headers.authorization ?? ''));
		}
		if (req.method !== 'POST' || req.url !== '/api/chat.postMessage') return reply(res, 404, { ok: false, error: 'unknown_method' });
		const n = ++state.requests;
		const auth = String(req.headers.authorization ?? '');
		if (auth !== `Bearer ${token}`) return reply(res, 200, { ok: false, error: 'invalid_auth' });
		let body: { channel?: string; text?: string; thread_ts?: string; metadata?: unknown; blocks?: unknown[] };
		try {
			body = JSON.parse(raw);
		} catch {
			return reply(res, 200, { ok: false, error: 'invalid_json' });
		}
		// Like Slack: a channel that does not exist (here: any name starting #missing) is refused.
		if (!body.channel || body.channel.startsWith('#missing')) return reply(res, 200, { ok: false, error: 'channel_not_found' });
		const behaviour = plan(n, { path: req.url });
		if (behaviour.kind === 'status') {
			return reply(res, behaviour.status, behaviour.body ?? { ok: false, error: 'ratelimited' }, behaviour.retryAfter ? { 'Retry-After': behaviour.retryAfter } : {});
		}
		const ts = nextTs();
		const message: SlackMessageSeen = { channel: body.channel, text: String(body.text ?? ''), ts, token: auth.slice(7) };
		if (body.thread_ts) message.threadTs = String(body.thread_ts);
		if (body.metadata !== undefined) message.metadata = body.metadata;
		if (Array.isArray(body.blocks)) message.blocks = body.blocks;
		state.messages.push(message);
		events.emit('received', message);
		if (behaviour.kind === 'hang') {
			hanging.add(res);
			return;
		}
		reply(res, 200, { ok: true, channel: body.channel, ts, message: { text: body.text, ts } });
	});
	const port = await listen(server);
	return {
		url: `http://127.0.0.1:${port}`,
		apiUrl: `http://127.0.0.1:${port}/api`,
		events,
		get requests() {
			return state.requests;
		},
		get messages() {
			return state.messages;
		},
		get historyRequests() {
			return state.history;
		},
		get historyLimited() {
			return state.limited;
		},
		setHistoryRateLimit: (limit) => {
			rateLimit = limit;
			answered = [];
		},
		setPlan: (p) => void (plan = p),
		setHistoryPlan: (p) => void (historyPlan = p),
		addMessage: (m) => {
			const message: SlackMessageSeen = { channel: m.channel, text: m.text, ts: m.ts ?? nextTs(), token: token };
			if (m.threadTs) message.threadTs = m.threadTs;
			if (m.metadata !== undefined) message.metadata = m.metadata;
			state.messages.push(message);
			return message;
		},
		close: () => closeHttp(server, hanging),
	};
}

/* ---------------------------------------------------------------------------------------- */

export interface MailSeen {
	messageId: string | null;
	subject: string | null;
	from: string;
	to: string[];
	raw: string;
}

export interface SmtpTestServer extends Base {
	port: number;
	mails: MailSeen[];
	/** Credential data for n8n's `smtp` credential pointing at this server. */
	credential: { host: string; port: number; secure: boolean; user: string; password: string; disableStartTls: boolean };
}

const header = (raw: string, name: string) => {
	const m = new RegExp(`^${name}:\\s*(.+)$`, 'im').exec(raw.split(/\r?\n\r?\n/)[0] ?? '');
	return m ? m[1].trim() : null;
};

/** Where a provider files the mail it sent: the sender's Sent folder (e.g. the ImapTestServer of imapServer.ts). */
export interface SentFolder {
	/** Files one raw RFC 822 message. */
	append(raw: string): Promise<unknown>;
}

/**
 * A real SMTP server. `plan` may refuse a mail (status 451/550 → SMTP reply code) or hang after
 * accepting its data. With `sentFolder`, every accepted mail (also one it then hangs on) is filed
 * there before the server counts it and answers.
 */
export async function smtpServer(options: { plan?: Plan; user?: string; password?: string; sentFolder?: SentFolder } = {}): Promise<SmtpTestServer> {
	const events = new EventEmitter();
	let plan = options.plan ?? normal;
	const state = { requests: 0, mails: [] as MailSeen[] };
	const user = options.user ?? 'mailer';
	const password = options.password ?? 'secret';
	const hanging = new Set<() => void>();
	const server = new SMTPServer({
		secure: false,
		disabledCommands: ['STARTTLS'],
		authOptional: false,
		logger: false,
		onAuth(auth, _session, callback) {
			if (auth.username === user && auth.password === password) return callback(null, { user });
			return callback(Object.assign(new Error('Invalid username or password'), { responseCode: 535 }));
		},
		onData(stream, session, callback) {
			const chunks: Buffer[] = [];
			stream.on('data', (c: Buffer) => chunks.push(c));
			stream.on('end', async () => {
				const raw = Buffer.concat(chunks).toString('utf8');
				const n = ++state.requests;
				const behaviour = plan(n, { path: 'DATA', key: header(raw, 'Subject') ?? undefined });
				if (behaviour.kind === 'status') {
					return callback(Object.assign(new Error(behaviour.status >= 500 ? 'Mailbox unavailable' : 'Try again later'), { responseCode: behaviour.status }));
				}
				if (options.sentFolder) {
					try {
						await options.sentFolder.append(raw);
					} catch (error) {
						return callback(Object.assign(new Error(`Could not file the message in Sent: ${(error as Error).message}`), { responseCode: 451 }));
					}
				}
				const mail: MailSeen = {
					messageId: header(raw, 'Message-ID'),
					subject: header(raw, 'Subject'),
					from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
					to: session.envelope.rcptTo.map((r) => r.address),
					raw,
				};
				state.mails.push(mail);
				events.emit('received', mail);
				if (behaviour.kind === 'hang') {
					hanging.add(() => callback(new Error('closing')));
					return;
				}
				callback(null, `OK queued as ${n}`);
			});
		},
	});
	server.on('error', () => undefined);
	await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
	const port = ((server as unknown as { server: http.Server }).server.address() as AddressInfo).port;
	return {
		url: `smtp://127.0.0.1:${port}`,
		port,
		events,
		credential: { host: '127.0.0.1', port, secure: false, user, password, disableStartTls: true },
		get requests() {
			return state.requests;
		},
		get mails() {
			return state.mails;
		},
		setPlan: (p) => void (plan = p),
		close: async () => {
			hanging.clear();
			await new Promise<void>((resolve) => server.close(() => resolve()));
		},
	};
}

/* ---------------------------------------------------------------------------------------- */

export interface StripeLikeServer extends Base {
	/** Most requests this server was handling at the same moment. */
	peakInFlight: number;
	/** Actions performed (objects created), in order. */
	actions: Array<{ id: string; key: string | null; body: unknown }>;
	/** Requests received per Idempotency-Key, whatever the answer. */
	keysSeen: Map<string, number>;
	/** Requests answered from the stored response without acting. */
	replays: number;
	/**
	 * Look-ups (`GET`/`HEAD /v1/charges/by-order/<order>`: the charge made for that order, or
	 * 404), as they arrived; they never act and are not counted in `requests`.
	 */
	lookups: Array<{ method: string; path: string; headers: http.IncomingHttpHeaders; body: string }>;
	/** Decides each look-up: `status` answers with it, `hang` never answers. */
	setLookupPlan(plan: Plan): void;
}

interface StoredKey {
	fingerprint: string;
	state: 'running' | 'done';
	status: number;
	body: unknown;
}

/**
 * `honoursKey: false` makes an API that ignores Idempotency-Key (it still counts the keys it saw):
 * every request acts, as most CRMs do.
 */
export async function stripeLikeServer(
	options: { plan?: Plan; apiKey?: string; header?: string; delayMs?: number; honoursKey?: boolean; lookupPlan?: Plan } = {},
): Promise<StripeLikeServer> {
	const events = new EventEmitter();
	const hanging = new Set<http.ServerResponse>();
	const headerName = (options.header ?? 'Idempotency-Key').toLowerCase();
	let plan = options.plan ?? normal;
	let lookupPlan = options.lookupPlan ?? normal;
	const stored = new Map<string, StoredKey>();
	const responses = new Map<string, unknown>();
	const state = { requests: 0, replays: 0, inFlight: 0, peakInFlight: 0, actions: [] as StripeLikeServer['actions'], keysSeen: new Map<string, number>(), lookups: [] as StripeLikeServer['lookups'] };
	let seq = 0;
	const server = http.createServer(async (req, res) => {
		state.peakInFlight = Math.max(state.peakInFlight, ++state.inFlight);
		res.on('close', () => state.inFlight--);
		const raw = await readBody(req);
		const lookup = /^\/v1\/charges\/by-order\/([^/?]+)$/.exec(req.url ?? '');
		if (lookup && (req.method === 'GET' || req.method === 'HEAD')) {
			state.lookups.push({ method: req.method, path: req.url ?? '', headers: req.headers, body: raw });
			if (options.apiKey && req.headers.authorization !== `Bearer ${options.apiKey}`) {
				return reply(res, 401, { error: { type: 'invalid_request_error', message: 'Invalid API key' } });
			}
			const behaviour = lookupPlan(state.lookups.length, { path: req.url ?? '/' });
			if (behaviour.kind === 'hang') return void hanging.add(res);
			if (behaviour.kind === 'status') {
				return reply(res, behaviour.status, behaviour.body ?? { error: 'unavailable' }, behaviour.retryAfter ? { 'Retry-After': behaviour.retryAfter } : {});
			}
			const order = decodeURIComponent(lookup[1]);
			const action = state.actions.find((a) => (a.body as { order?: unknown } | null)?.order === order);
			if (!action) return reply(res, 404, { error: { type: 'invalid_request_error', message: `No such charge for order ${order}` } });
			return reply(res, 200, responses.get(action.id) ?? { id: action.id });
		}
		if (options.delayMs) await new Promise((r) => setTimeout(r, options.delayMs));
		const n = ++state.requests;
		const keyHeader = req.headers[headerName];
		const sentKey = typeof keyHeader === 'string' && keyHeader ? keyHeader : null;
		if (sentKey) state.keysSeen.set(sentKey, (state.keysSeen.get(sentKey) ?? 0) + 1);
		const key = options.honoursKey === false ? null : sentKey;
		if (options.apiKey && req.headers.authorization !== `Bearer ${options.apiKey}`) {
			return reply(res, 401, { error: { type: 'invalid_request_error', message: 'Invalid API key' } });
		}
		const behaviour = plan(n, { key: key ?? undefined, path: req.url ?? '/' });
		if (behaviour.kind === 'status') {
			return reply(res, behaviour.status, behaviour.body ?? { error: 'unavailable' }, behaviour.retryAfter ? { 'Retry-After': behaviour.retryAfter } : {});
		}
		if (behaviour.kind === 'drop' && !behaviour.act) return void req.socket.destroy();
		const fingerprint = createHash('sha256').update(`${req.method} ${req.url} ${raw}`).digest('hex');
		if (key) {
			const known = stored.get(key);
			if (known && known.fingerprint !== fingerprint) {
				return reply(res, 422, { error: { type: 'idempotency_error', message: 'Keys for idempotent requests can only be used with the same parameters they were first used with.' } });
			}
			if (known && known.state === 'running') {
				return reply(res, 409, { error: { type: 'idempotency_error', message: 'A request with this key is in progress.' } });
			}
			if (known && known.state === 'done') {
				state.replays++;
				return reply(res, known.status, known.body, { 'Idempotent-Replayed': 'true', 'Idempotency-Key': key });
			}
		}
		let body: unknown = raw;
		try {
			body = raw ? JSON.parse(raw) : null;
		} catch {
			// form or text bodies are kept as text
		}
		const id = `ch_${String(++seq).padStart(6, '0')}`;
		const response = { id, object: 'charge', created: Math.floor(Date.now() / 1000), request: body };
		state.actions.push({ id, key, body });
		responses.set(id, response);
		if (key) stored.set(key, { fingerprint, state: 'done', status: 200, body: response });
		events.emit('received', { id, key, body });
		if (behaviour.kind === 'drop') return void req.socket.destroy();
		if (behaviour.kind === 'hang') {
			hanging.add(res);
			return;
		}
		reply(res, 200, response, key ? { 'Idempotency-Key': key } : {});
	});
	const port = await listen(server);
	return {
		url: `http://127.0.0.1:${port}`,
		events,
		get requests() {
			return state.requests;
		},
		get replays() {
			return state.replays;
		},
		get peakInFlight() {
			return state.peakInFlight;
		},
		get actions() {
			return state.actions;
		},
		get keysSeen() {
			return state.keysSeen;
		},
		get lookups() {
			return state.lookups;
		},
		setPlan: (p) => void (plan = p),
		setLookupPlan: (p) => void (lookupPlan = p),
		close: () => closeHttp(server, hanging),
	};
}
