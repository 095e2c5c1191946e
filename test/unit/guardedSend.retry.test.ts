import { classifyNetworkError, classifyStatus, httpChannel, limitBody, MAX_STORED_BODY } from '../../lib/n8n/channels/http';
import { forEachLimit } from '../../lib/n8n/channels/limit';
import { backoffDelay, deliver, parseRetryAfter, type RetryPolicy } from '../../lib/n8n/channels/retry';
import { classifySlackReply } from '../../lib/n8n/channels/slack';
import { classifySmtpError, messageIdFor } from '../../lib/n8n/channels/smtp';
import type { AttemptResult, Channel, HttpCall, HttpReply } from '../../lib/n8n/channels/types';

const policy: RetryPolicy = { maxAttempts: 5, baseDelayMs: 100, maxDelayMs: 5_000, maxTotalWaitMs: 20_000 };

/** A channel that answers from a script, one entry per attempt. */
function scripted(answers: AttemptResult[], idempotent = false): Channel<string> & { calls: number } {
	const channel = {
		name: 'test',
		idempotent,
		calls: 0,
		async send() {
			const answer = answers[Math.min(channel.calls, answers.length - 1)];
			channel.calls++;
			return answer;
		},
	};
	return channel;
}

const ok: AttemptResult = { kind: 'sent', externalId: 'x-1', response: { ok: true } };
const busy = (retryAfterMs: number | null = null): AttemptResult => ({ kind: 'unavailable', reason: 'HTTP 503', retryAfterMs, response: { status: 503 } });
const unsure: AttemptResult = { kind: 'uncertain', reason: 'No response (ECONNRESET)', retryAfterMs: null, response: null };

function clock() {
	const waits: number[] = [];
	let now = 1_000_000;
	return {
		waits,
		now: () => now,
		sleep: async (ms: number) => {
			waits.push(ms);
			now += ms;
		},
	};
}

describe('retry policy: backoff and Retry-After', () => {
	test('full jitter: uniform between 0 and a doubling cap, never above the longest wait', () => {
		expect(backoffDelay(1, policy, () => 0.999)).toBe(99);
		expect(backoffDelay(3, policy, () => 0.5)).toBe(200);
		expect(backoffDelay(1, policy, () => 0)).toBe(0);
		expect(backoffDelay(30, policy, () => 0.999)).toBeLessThan(policy.maxDelayMs);
	});

	test('Retry-After as seconds, decimals, HTTP dates; unreadable is null; past dates are 0', () => {
		const now = Date.parse('2026-01-01T00:00:00Z');
		expect(parseRetryAfter('2', now)).toBe(2000);
		expect(parseRetryAfter(' 0.5 ', now)).toBe(500);
		expect(parseRetryAfter(['3'], now)).toBe(3000);
		expect(parseRetryAfter('Thu, 01 Jan 2026 00:00:07 GMT', now)).toBe(7000);
		expect(parseRetryAfter('Wed, 31 Dec 2025 23:00:00 GMT', now)).toBe(0);
		expect(parseRetryAfter('soon', now)).toBeNull();
		expect(parseRetryAfter(undefined, now)).toBeNull();
		expect(parseRetryAfter('-1', now)).toBeNull();
	});
});

describe('retry policy: deliver', () => {
	test('sent at once', async () => {
		const c = clock();
		const v = await deliver(scripted([ok]), 'm', { policy, sleep: c.sleep, now: c.now });
		expect(v).toMatchObject({ status: 'completed', externalId: 'x-1', attempts: 1, waitedMs: 0 });
	});

	test('503 twice, then sent: backoff with jitter between attempts', async () => {
		const c = clock();
		const v = await deliver(scripted([busy(), busy(), ok]), 'm', { policy, sleep: c.sleep, now: c.now, random: () => 0.5 });
		expect(v).toMatchObject({ status: 'completed', attempts: 3 });
		expect(c.waits).toEqual([50, 100]);
	});

	test('Retry-After is honoured exactly', async () => {
		const c = clock();
		const v = await deliver(scripted([busy(1500), ok]), 'm', { policy, sleep: c.sleep, now: c.now });
		expect(v.status).toBe('completed');
		expect(c.waits).toEqual([1500]);
	});

	test('a Retry-After longer than the longest wait ends this run: failed_retryable, no waiting', async () => {
		const c = clock();
		const v = await deliver(scripted([busy(60_000), ok]), 'm', { policy, sleep: c.sleep, now: c.now });
		expect(v).toMatchObject({ status: 'failed_retryable', reason: 'gave_up', attempts: 1 });
		expect(c.waits).toEqual([]);
	});

	test('attempts exhausted: failed_retryable with the last response', async () => {
		const c = clock();
		const channel = scripted([busy()]);
		const v = await deliver(channel, 'm', { policy: { ...policy, maxAttempts: 3 }, sleep: c.sleep, now: c.now, random: () => 0.99 });
		expect(v).toMatchObject({ status: 'failed_retryable', reason: 'gave_up', attempts: 3, response: { status: 503 }, maybePerformed: false });
		expect(channel.calls).toBe(3);
		expect(c.waits).toHaveLength(2);
	});

	test('the total wait stays bounded', async () => {
		const c = clock();
		const channel = scripted([busy(3000)]);
		const v = await deliver(channel, 'm', { policy: { ...policy, maxAttempts: 20, maxTotalWaitMs: 10_000 }, sleep: c.sleep, now: c.now });
		expect(v.status).toBe('failed_retryable');
		expect(c.waits.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(10_000);
		expect(channel.calls).toBe(4);
	});

	test('a permanent refusal goes to needs_review at once', async () => {
		const channel = scripted([{ kind: 'rejected', reason: 'HTTP 400', response: { status: 400 } }, ok]);
		const v = await deliver(channel, 'm', { policy });
		expect(v).toMatchObject({ status: 'needs_review', reason: 'rejected', response: { status: 400 }, attempts: 1 });
		expect(channel.calls).toBe(1);
	});

	test('refused credentials: failed_retryable at once (a fixed credential can succeed later)', async () => {
		const channel = scripted([{ kind: 'unauthorized', reason: 'HTTP 401', response: null }, ok]);
		const v = await deliver(channel, 'm', { policy });
		expect(v).toMatchObject({ status: 'failed_retryable', reason: 'unauthorized', attempts: 1 });
		expect(channel.calls).toBe(1);
	});

	test('maybe performed, on a channel that cannot deduplicate: needs_review, never a second attempt', async () => {
		const channel = scripted([unsure, ok]);
		const v = await deliver(channel, 'm', { policy });
		expect(v).toMatchObject({ status: 'needs_review', reason: 'ambiguous', attempts: 1 });
		expect(channel.calls).toBe(1);
	});

	test('maybe performed, on a destination that honours the key: retried', async () => {
		const c = clock();
		const channel = scripted([unsure, ok], true);
		const v = await deliver(channel, 'm', { policy, sleep: c.sleep, now: c.now });
		expect(v).toMatchObject({ status: 'completed', attempts: 2 });
	});

	test('maybe performed, with the risk accepted: retried; exhausted says so', async () => {
		const c = clock();
		const v = await deliver(scripted([unsure]), 'm', { policy: { ...policy, maxAttempts: 2 }, acceptUncertain: true, sleep: c.sleep, now: c.now });
		expect(v).toMatchObject({ status: 'failed_retryable', maybePerformed: true, attempts: 2 });
	});

	test('no attempt starts after the deadline (the lease is about to run out)', async () => {
		const c = clock();
		const channel = scripted([ok]);
		const v = await deliver(channel, 'm', { policy, sleep: c.sleep, now: c.now, deadline: c.now() - 1 });
		expect(v).toMatchObject({ status: 'failed_retryable', reason: 'out_of_time', attempts: 0 });
		expect(channel.calls).toBe(0);
		const late = scripted([busy(2000), ok]);
		const w = await deliver(late, 'm', { policy, sleep: c.sleep, now: c.now, deadline: c.now() + 1000 });
		expect(w).toMatchObject({ status: 'failed_retryable', reason: 'out_of_time', attempts: 1 });
	});

	test('no attempt starts once the lease is no longer confirmed (a kept lease whose renewals failed)', async () => {
		const c = clock();
		let heldUntil = c.now() + 30_000;
		const channel = scripted([busy(), busy(), ok]);
		const first = channel.send.bind(channel);
		channel.send = async (m: string, n: number) => {
			// The renewals stop during the first attempt: the hold ends before the next one.
			heldUntil = c.now() + 50;
			return first(m, n);
		};
		const v = await deliver(channel, 'm', { policy, sleep: c.sleep, now: c.now, heldUntil: () => heldUntil, random: () => 0.9 });
		expect(v).toMatchObject({ status: 'failed_retryable', reason: 'out_of_time', attempts: 1 });
		expect(String((v as { detail: string }).detail)).toMatch(/did not confirm this run's hold on the step in time/);
		expect(channel.calls).toBe(1);
	});

	describe('an uncertain answer is checked where the channel can ask the destination', () => {
		type Answer = Awaited<ReturnType<NonNullable<Channel<string>['check']>>>;
		const checking = (answers: AttemptResult[], checks: Answer[], idempotent = false) => {
			const channel = scripted(answers, idempotent) as ReturnType<typeof scripted> & { check: NonNullable<Channel<string>['check']>; windows: unknown[] };
			channel.windows = [];
			channel.check = async (_m, window) => {
				channel.windows.push(window);
				return checks[Math.min(channel.windows.length - 1, checks.length - 1)];
			};
			return channel;
		};
		const found: Answer = { outcome: 'found', externalId: 'ch_1', response: { id: 'ch_1' }, detail: 'the API has it' };
		const notFound: Answer = { outcome: 'not_found', detail: 'the API does not have it' };
		const unknown: Answer = { outcome: 'unknown', detail: 'HTTP 500' };

		test('found: completed with the check\'s answer, not sent again', async () => {
			const c = clock();
			const channel = checking([unsure, ok], [found]);
			const v = await deliver(channel, 'm', { policy, sleep: c.sleep, now: c.now, checkSinceMs: 5, checkAfterMs: 2_000, random: () => 0.5 });
			expect(v).toMatchObject({ status: 'completed', externalId: 'ch_1', response: { id: 'ch_1' }, attempts: 1, check: { outcome: 'found', detail: 'the API has it' } });
			expect(channel.calls).toBe(1);
			expect(channel.windows).toEqual([{ sinceMs: 5, untilMs: expect.any(Number) }]);
			// Asked after the backoff wait (50 ms), and no sooner than 2 s after the uncertain answer.
			expect(c.waits).toEqual([50, 1_950]);
		});

		test('not found: sent again under the policy', async () => {
			const c = clock();
			const channel = checking([unsure, ok], [notFound]);
			const v = await deliver(channel, 'm', { policy, sleep: c.sleep, now: c.now, checkSinceMs: 5 });
			expect(v).toMatchObject({ status: 'completed', externalId: 'x-1', attempts: 2, check: { outcome: 'not_found' } });
			expect(channel.calls).toBe(2);
		});

		test('not found on the last attempt allowed: failed_retryable (nothing went out), so the next run sends it', async () => {
			const c = clock();
			const v = await deliver(checking([unsure], [notFound]), 'm', { policy: { ...policy, maxAttempts: 1 }, sleep: c.sleep, now: c.now, checkSinceMs: 5 });
			expect(v).toMatchObject({ status: 'failed_retryable', reason: 'gave_up', maybePerformed: false, check: { outcome: 'not_found' } });
			expect(String((v as { detail: string }).detail)).toMatch(/the destination was asked and does not have it: nothing went out/);
		});

		test('cannot tell: needs_review (ambiguous) with the check\'s detail; with the risk accepted, sent again', async () => {
			const c = clock();
			const channel = checking([unsure, ok], [unknown]);
			const v = await deliver(channel, 'm', { policy, sleep: c.sleep, now: c.now, checkSinceMs: 5 });
			expect(v).toMatchObject({ status: 'needs_review', reason: 'ambiguous', attempts: 1, check: { outcome: 'unknown', detail: 'HTTP 500' } });
			expect(String((v as { detail: string }).detail)).toMatch(/could not tell whether it arrived \(HTTP 500\)/);
			expect(channel.calls).toBe(1);
			const accepted = checking([unsure, ok], [unknown]);
			expect(await deliver(accepted, 'm', { policy, acceptUncertain: true, sleep: c.sleep, now: c.now, checkSinceMs: 5 })).toMatchObject({ status: 'completed', attempts: 2 });
			// Found still stops the second send where the risk is accepted.
			const there = checking([unsure, ok], [found]);
			expect(await deliver(there, 'm', { policy, acceptUncertain: true, sleep: c.sleep, now: c.now, checkSinceMs: 5 })).toMatchObject({ status: 'completed', externalId: 'ch_1', attempts: 1 });
			expect(there.calls).toBe(1);
		});

		test('a check that throws cannot tell; an idempotent channel, or no checkSinceMs, is not checked', async () => {
			const c = clock();
			const throwing = checking([unsure, ok], [found]);
			throwing.check = async () => Promise.reject(new Error('socket hang up'));
			expect(await deliver(throwing, 'm', { policy, sleep: c.sleep, now: c.now, checkSinceMs: 5 })).toMatchObject({ status: 'needs_review', check: { outcome: 'unknown', detail: 'The check failed: socket hang up' } });
			const keyed = checking([unsure, ok], [found], true);
			expect(await deliver(keyed, 'm', { policy, sleep: c.sleep, now: c.now, checkSinceMs: 5 })).toMatchObject({ status: 'completed', externalId: 'x-1', attempts: 2 });
			expect(keyed.windows).toEqual([]);
			const off = checking([unsure, ok], [found]);
			expect(await deliver(off, 'm', { policy, sleep: c.sleep, now: c.now })).toMatchObject({ status: 'needs_review', reason: 'ambiguous' });
			expect(off.windows).toEqual([]);
		});
	});

	test('a channel that throws is treated as "may have acted"', async () => {
		const channel: Channel<string> = { name: 'odd', idempotent: false, send: async () => Promise.reject(new Error('bug')) };
		const v = await deliver(channel, 'm', { policy });
		expect(v).toMatchObject({ status: 'needs_review', reason: 'ambiguous' });
	});
});

describe('HTTP answers and network errors', () => {
	const r = (status: number, headers: Record<string, unknown> = {}, body: unknown = null): HttpReply => ({ status, headers, body });

	test.each([
		[401, 'unauthorized'],
		[407, 'unauthorized'],
		[408, 'unavailable'],
		[425, 'unavailable'],
		[429, 'unavailable'],
		[503, 'unavailable'],
		[400, 'rejected'],
		[403, 'rejected'],
		[404, 'rejected'],
		[422, 'rejected'],
		[500, 'uncertain'],
		[502, 'uncertain'],
		[504, 'uncertain'],
	])('HTTP %i is %s', (status, kind) => {
		expect(classifyStatus(r(status), true).kind).toBe(kind);
	});

	test('409 is "in progress, try again" only when the request carried an honoured key', () => {
		expect(classifyStatus(r(409), true).kind).toBe('unavailable');
		expect(classifyStatus(r(409), false).kind).toBe('rejected');
	});

	test('Retry-After travels with 429/503, and the response is kept', () => {
		const a = classifyStatus(r(429, { 'Retry-After': '4' }, { error: 'slow down' }), true);
		expect(a).toMatchObject({ kind: 'unavailable', retryAfterMs: 4000, response: { status: 429, headers: { 'retry-after': '4' }, body: { error: 'slow down' } } });
	});

	test('no response: refused connections are "not delivered", resets and timeouts "maybe"', () => {
		const err = (code: string) => Object.assign(new Error(code), { code });
		expect(classifyNetworkError(err('ECONNREFUSED')).kind).toBe('unavailable');
		expect(classifyNetworkError(err('ENOTFOUND')).kind).toBe('unavailable');
		expect(classifyNetworkError(err('ECONNRESET')).kind).toBe('uncertain');
		expect(classifyNetworkError(err('ECONNABORTED')).kind).toBe('uncertain');
		expect(classifyNetworkError(err('ETIMEDOUT')).kind).toBe('uncertain');
		expect(classifyNetworkError(new Error('socket hang up')).kind).toBe('uncertain');
		// n8n wraps request errors (NodeApiError keeps the original as `cause`).
		const wrapped = Object.assign(new Error('The service refused the connection'), { cause: err('ECONNREFUSED') });
		expect(classifyNetworkError(wrapped).kind).toBe('unavailable');
	});

	test('huge bodies are cut before they are stored', () => {
		const big = 'x'.repeat(MAX_STORED_BODY + 10);
		expect(limitBody(big)).toEqual({ truncated: true, text: big.slice(0, MAX_STORED_BODY) });
		expect(limitBody({ a: 1 })).toEqual({ a: 1 });
		expect(limitBody(undefined)).toBeNull();
	});

	test('the HTTP channel sends the key header, reads the id, and is idempotent only when the key is honoured', async () => {
		const calls: HttpCall[] = [];
		const transport = async (call: HttpCall): Promise<HttpReply> => {
			calls.push(call);
			return { status: 201, headers: {}, body: { data: { id: 42 } } };
		};
		const channel = httpChannel({ transport, idempotencyHeader: 'Idempotency-Key', honoursKey: true, timeoutMs: 1000, idPath: ['data', 'id'] });
		expect(channel.idempotent).toBe(true);
		const result = await channel.send({ method: 'POST', url: 'http://x/y', headers: { A: 'b' }, body: { n: 1 }, idempotencyKey: 'k-1' }, 1);
		expect(result).toMatchObject({ kind: 'sent', externalId: '42' });
		expect(calls[0].headers).toEqual({ A: 'b', 'Idempotency-Key': 'k-1' });
		expect(httpChannel({ transport, idempotencyHeader: 'Idempotency-Key', honoursKey: false, timeoutMs: 1, idPath: null }).idempotent).toBe(false);
		expect(httpChannel({ transport, idempotencyHeader: null, honoursKey: true, timeoutMs: 1, idPath: null }).idempotent).toBe(false);
	});
});

describe('Slack and SMTP answers', () => {
	const slack = (body: unknown, status = 200, headers: Record<string, unknown> = {}) => classifySlackReply({ status, headers, body });

	test('Slack', () => {
		expect(slack({ ok: true, ts: '1.000100' })).toMatchObject({ kind: 'sent', externalId: '1.000100' });
		expect(slack({ ok: false, error: 'ratelimited' }, 200, { 'retry-after': '2' })).toMatchObject({ kind: 'unavailable', retryAfterMs: 2000 });
		expect(slack({ ok: false, error: 'ratelimited' }, 429, { 'Retry-After': '3' })).toMatchObject({ kind: 'unavailable', retryAfterMs: 3000 });
		expect(slack({ ok: false, error: 'invalid_auth' }).kind).toBe('unauthorized');
		expect(slack({ ok: false, error: 'channel_not_found' }).kind).toBe('rejected');
		expect(slack({ ok: false, error: 'internal_error' }).kind).toBe('uncertain');
		expect(slack('<html>oops</html>').kind).toBe('uncertain');
		expect(slack(null, 503).kind).toBe('unavailable');
		expect(slack(null, 500).kind).toBe('uncertain');
	});

	test('SMTP', () => {
		const e = (props: Record<string, unknown>) => Object.assign(new Error(String(props.message ?? 'x')), props);
		expect(classifySmtpError(e({ code: 'EMESSAGE', responseCode: 451, command: 'DATA' })).kind).toBe('unavailable');
		expect(classifySmtpError(e({ code: 'EENVELOPE', responseCode: 550, command: 'RCPT TO' })).kind).toBe('rejected');
		expect(classifySmtpError(e({ code: 'EAUTH', responseCode: 535 })).kind).toBe('unauthorized');
		expect(classifySmtpError(e({ code: 'EAUTH', message: 'Missing credentials for "PLAIN"' })).kind).toBe('unauthorized');
		expect(classifySmtpError(e({ code: 'ESOCKET', syscall: 'connect', errno: -111, command: 'CONN' })).kind).toBe('unavailable');
		expect(classifySmtpError(e({ code: 'ETIMEDOUT', message: 'Connection timeout', command: 'CONN' })).kind).toBe('unavailable');
		expect(classifySmtpError(e({ code: 'ETIMEDOUT', message: 'Timeout', command: 'CONN' })).kind).toBe('uncertain');
		expect(classifySmtpError(e({ code: 'ESOCKET', message: 'read ECONNRESET', command: 'CONN' })).kind).toBe('uncertain');
		expect(classifySmtpError(e({ code: 'EENVELOPE', message: 'No recipients defined' })).kind).toBe('rejected');
	});

	test('Message-ID is stable per (namespace, key, step) and claim, differs between steps and claims, at the sender\'s domain', () => {
		const first = new Date('2026-11-20T10:00:00.123Z');
		const fresh = new Date('2026-11-21T08:00:00.000Z');
		expect(messageIdFor('ns', 'k', 'a', first)).toBe(messageIdFor('ns', 'k', 'a', new Date(first.getTime())));
		expect(messageIdFor('ns', 'k', 'a', first)).not.toBe(messageIdFor('ns', 'k', 'b', first));
		// A step released as "not sent" and claimed afresh has a new first-seen time: a new Message-ID.
		expect(messageIdFor('ns', 'k', 'a', first)).not.toBe(messageIdFor('ns', 'k', 'a', fresh));
		expect(messageIdFor('ns', 'k', 'a', first)).toMatch(/^<[0-9a-f]{40}@idempotency\.n8n>$/);
		expect(messageIdFor('ns', 'k', 'a', first, 'Shop <Orders@Shop.Example.com>')).toMatch(/^<[0-9a-f]{40}@shop\.example\.com>$/);
		expect(messageIdFor('ns', 'k', 'a', first, 'a@example.org, b@example.net')).toMatch(/@example\.org>$/);
		// The domain changes only the right-hand side.
		expect(messageIdFor('ns', 'k', 'a', first, 'x@example.org').slice(0, 41)).toBe(messageIdFor('ns', 'k', 'a', first).slice(0, 41));
		for (const from of ['', 'nobody', 'x@localhost', 'x@[127.0.0.1]', 'x@exa mple.com', 'x@bücher.example']) {
			expect(messageIdFor('ns', 'k', 'a', first, from)).toMatch(/@idempotency\.n8n>$/);
		}
	});
});

test('forEachLimit keeps at most N in flight and visits everything', async () => {
	let inFlight = 0;
	let peak = 0;
	const seen: number[] = [];
	await forEachLimit(Array.from({ length: 50 }, (_, i) => i), 5, async (n) => {
		inFlight++;
		peak = Math.max(peak, inFlight);
		await new Promise((r) => setTimeout(r, 1 + (n % 3)));
		seen.push(n);
		inFlight--;
	});
	expect(peak).toBe(5);
	expect(seen.sort((a, b) => a - b)).toEqual(Array.from({ length: 50 }, (_, i) => i));
});
