/**
 * A real HTTP front placed between n8n and a destination server of test/support/destinations.ts
 * (which counts what it actually performed). Per request it decides, from the request itself,
 * whether to pass it on or to misbehave the way networks and overloaded services do:
 *
 * - `forward`:     pass it to the destination and the answer back.
 * - `status`:      answer 503/429 (with Retry-After) itself; the destination never sees it.
 * - `dropBefore`:  close the connection without an answer; the destination never sees it.
 * - `dropAfter`:   pass it on, let the destination act, then close the connection without an
 *                  answer (the sender cannot know that it was performed).
 * - `hangAfter`:   pass it on, let the destination act, never answer.
 * - `hangBefore`:  keep the request open and never pass it on: it reached the destination's
 *                  front door, but was never performed.
 *
 * `arrived` emits when a request has been read (before any of that); `settled` emits once the
 * decision was carried out (for the `*After` kinds: after the destination acted).
 */
import { EventEmitter } from 'events';
import http from 'http';
import type { AddressInfo } from 'net';

export type FrontAction =
	| { kind: 'forward' }
	| { kind: 'status'; status: number; retryAfter?: string; body?: unknown }
	| { kind: 'dropBefore' }
	| { kind: 'dropAfter' }
	| { kind: 'hangAfter' }
	| { kind: 'hangBefore' };

export interface FrontRequest {
	/** Requests this front has read, from 1. */
	n: number;
	method: string;
	path: string;
	headers: http.IncomingHttpHeaders;
	/** The body parsed as JSON, or the raw text. */
	body: any;
	/** The request's identity for per-key plans (see `identify`), and how often it was seen, from 1. */
	id: string;
	seen: number;
}

export interface FaultyFront {
	url: string;
	events: EventEmitter;
	/** Everything read, in order, with the action taken. */
	log: Array<FrontRequest & { action: FrontAction['kind'] }>;
	setRule(rule: (req: FrontRequest) => FrontAction): void;
	/** Resolves with the first request (already read, or still to come) that matches. */
	waitFor(match: (req: FrontRequest & { action: FrontAction['kind'] }) => boolean, event?: 'arrived' | 'settled', timeoutMs?: number): Promise<FrontRequest>;
	close(): Promise<void>;
}

export async function faultyFront(options: {
	upstream: string;
	/** What identifies "the same request" (an Idempotency-Key, a Slack text); the path by default. */
	identify?: (req: Omit<FrontRequest, 'id' | 'seen'>) => string;
	rule?: (req: FrontRequest) => FrontAction;
}): Promise<FaultyFront> {
	const upstream = new URL(options.upstream);
	const events = new EventEmitter();
	events.setMaxListeners(0);
	const log: FaultyFront['log'] = [];
	const settled: FaultyFront['log'] = [];
	const counts = new Map<string, number>();
	const open = new Set<http.ServerResponse>();
	let rule = options.rule ?? (() => ({ kind: 'forward' }) as FrontAction);
	let n = 0;

	const pass = (req: http.IncomingMessage, raw: Buffer): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }> =>
		new Promise((resolve, reject) => {
			const headers = { ...req.headers, host: upstream.host, 'content-length': String(raw.length) };
			delete headers.connection;
			const out = http.request(
				{ hostname: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers, agent: false },
				(res) => {
					const chunks: Buffer[] = [];
					res.on('data', (c: Buffer) => chunks.push(c));
					res.on('end', () => resolve({ status: res.statusCode ?? 502, headers: res.headers, body: Buffer.concat(chunks) }));
					res.on('error', reject);
				},
			);
			out.on('error', reject);
			out.end(raw);
		});

	const server = http.createServer((req, res) => {
		const chunks: Buffer[] = [];
		req.on('data', (c: Buffer) => chunks.push(c));
		req.on('end', async () => {
			const raw = Buffer.concat(chunks);
			const text = raw.toString('utf8');
			let body: any = text;
			try {
				body = text ? JSON.parse(text) : null;
			} catch {
				/* keep the text */
			}
			const base = { n: ++n, method: req.method ?? 'GET', path: req.url ?? '/', headers: req.headers, body };
			const id = options.identify ? options.identify(base) : base.path;
			const seen = (counts.get(id) ?? 0) + 1;
			counts.set(id, seen);
			const info: FrontRequest = { ...base, id, seen };
			const action = rule(info);
			const entry = { ...info, action: action.kind };
			log.push(entry);
			events.emit('arrived', entry);
			const done = () => {
				settled.push(entry);
				events.emit('settled', entry);
			};
			try {
				switch (action.kind) {
					case 'status':
						res.writeHead(action.status, {
							'Content-Type': 'application/json',
							...(action.retryAfter ? { 'Retry-After': action.retryAfter } : {}),
						});
						res.end(JSON.stringify(action.body ?? { error: 'unavailable' }));
						done();
						return;
					case 'dropBefore':
						req.socket.destroy();
						done();
						return;
					case 'hangBefore':
						open.add(res);
						done();
						return;
					case 'forward':
					case 'dropAfter':
					case 'hangAfter': {
						const answer = await pass(req, raw);
						if (action.kind === 'dropAfter') req.socket.destroy();
						else if (action.kind === 'hangAfter') open.add(res);
						else {
							const headers = { ...answer.headers };
							delete headers['transfer-encoding'];
							delete headers.connection;
							res.writeHead(answer.status, { ...headers, 'content-length': String(answer.body.length) });
							res.end(answer.body);
						}
						done();
						return;
					}
				}
			} catch (error) {
				if (!res.headersSent) res.writeHead(502, { 'Content-Type': 'application/json' });
				res.end(JSON.stringify({ error: `front: ${(error as Error).message}` }));
				done();
			}
		});
	});
	await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
	const port = (server.address() as AddressInfo).port;

	return {
		url: `http://127.0.0.1:${port}`,
		events,
		log,
		setRule: (r) => void (rule = r),
		waitFor(match, event = 'settled', timeoutMs = 60_000) {
			const already = (event === 'arrived' ? log : settled).find(match);
			if (already) return Promise.resolve(already);
			return new Promise((resolve, reject) => {
				const timer = setTimeout(() => {
					events.off(event, listener);
					reject(new Error(`faultyFront: no matching request ${event} within ${timeoutMs} ms`));
				}, timeoutMs);
				const listener = (entry: FrontRequest & { action: FrontAction['kind'] }) => {
					if (!match(entry)) return;
					clearTimeout(timer);
					events.off(event, listener);
					resolve(entry);
				};
				events.on(event, listener);
			});
		},
		close: () => {
			for (const res of open) res.destroy();
			open.clear();
			server.closeAllConnections?.();
			return new Promise((resolve) => server.close(() => resolve()));
		},
	};
}
