/**
 * A plain Node `http` transport for the channels (lib/n8n/channels), so their unit tests talk to
 * the local stand-ins over real HTTP without n8n. Like n8n's helper: any status resolves, a JSON
 * answer is parsed, and only "no answer" rejects, with the error's `code` (ETIMEDOUT for a
 * timeout, ECONNREFUSED, …).
 */
import http from 'http';

import type { HttpCall, HttpReply, HttpTransport } from '../../lib/n8n/channels/types';

export interface RecordingTransport extends HttpTransport {
	calls: HttpCall[];
}

export function nodeTransport(): RecordingTransport {
	const calls: HttpCall[] = [];
	const transport = ((call: HttpCall) => {
		calls.push(call);
		return new Promise<HttpReply>((resolve, reject) => {
			const url = new URL(call.url);
			for (const [k, v] of Object.entries(call.qs ?? {})) url.searchParams.set(k, v);
			const payload =
				call.body === undefined ? undefined : typeof call.body === 'string' ? call.body : JSON.stringify(call.body);
			const headers: Record<string, string> = { ...call.headers };
			if (payload !== undefined && typeof call.body !== 'string') headers['Content-Type'] ??= 'application/json';
			const req = http.request(url, { method: call.method, headers }, (res) => {
				const chunks: Buffer[] = [];
				res.on('data', (c: Buffer) => chunks.push(c));
				res.on('end', () => {
					const text = Buffer.concat(chunks).toString('utf8');
					let body: unknown = text;
					try {
						body = text ? JSON.parse(text) : '';
					} catch {
						// kept as text
					}
					resolve({ status: res.statusCode ?? 0, headers: res.headers as Record<string, unknown>, body });
				});
			});
			req.setTimeout(call.timeoutMs, () => req.destroy(Object.assign(new Error(`timeout of ${call.timeoutMs}ms exceeded`), { code: 'ETIMEDOUT' })));
			req.on('error', reject);
			if (payload !== undefined) req.write(payload);
			req.end();
		});
	}) as RecordingTransport;
	transport.calls = calls;
	return transport;
}
