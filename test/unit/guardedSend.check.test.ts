/**
 * The channels' checks on their own (lib/n8n/channels): after a run died while sending, is the
 * message at the destination? Slack reads the channel history (or the thread) for the message
 * metadata carrying the step's hash; HTTP sends the configured GET/HEAD check request. Over real
 * HTTP against the local stand-ins of test/support/destinations.ts.
 */
import http from 'http';
import { performance } from 'perf_hooks';
import type { AddressInfo } from 'net';

import { httpChannel, parseStatusList, statusListsOverlap, type HttpCheckOptions, type HttpMessage } from '../../lib/n8n/channels/http';
import { SLACK_CHECK_MARGIN_MS, SLACK_METADATA_EVENT, slackChannel, type SlackMessage } from '../../lib/n8n/channels/slack';
import type { CheckWindow } from '../../lib/n8n/channels/types';
import { slackMissingScope, slackServer, stripeLikeServer, type SlackServer, type StripeLikeServer } from '../support/destinations';
import { nodeTransport } from '../support/httpTransport';

const CHANNEL = 'C0ORDERS01';
const KEY = 'a'.repeat(64);
const OTHER_KEY = 'b'.repeat(64);
const metadata = (key: string) => ({ event_type: SLACK_METADATA_EVENT, event_payload: { key } });
/** The last minute, as the ledger would give it for a step claimed a minute ago. */
const recent = (): CheckWindow => ({ sinceMs: Date.now() - 60_000, untilMs: Date.now() });
const tsAt = (ms: number, n = 1) => `${Math.floor(ms / 1000)}.${String(n).padStart(6, '0')}`;

describe('Slack check: the channel history, by the message metadata', () => {
	let slack: SlackServer;
	beforeEach(async () => {
		slack = await slackServer({ historyPageSize: 200 });
	});
	afterEach(async () => {
		await slack.close();
	});

	const channelFor = (server: SlackServer, extra: { checkMaxPages?: number; timeoutMs?: number; check?: boolean } = {}) =>
		slackChannel({ transport: nodeTransport(), token: 'xoxb-test-token', apiUrl: server.apiUrl, timeoutMs: extra.timeoutMs ?? 2_000, check: extra.check ?? true, checkMaxPages: extra.checkMaxPages });
	const message = (extra: Partial<SlackMessage> = {}): SlackMessage => ({ channel: CHANNEL, text: 'Order 1 paid', idempotencyKey: KEY, ...extra });

	test('every message is posted with the step hash as metadata; without a key, none', async () => {
		const channel = channelFor(slack);
		expect((await channel.send(message(), 1)).kind).toBe('sent');
		expect((await channel.send(message({ idempotencyKey: undefined, text: 'plain' }), 1)).kind).toBe('sent');
		expect(slack.messages.map((m) => m.metadata)).toEqual([metadata(KEY), undefined]);
	});

	test('found: the message an earlier attempt posted, with its ts as the external ID and the message as the answer', async () => {
		const channel = channelFor(slack);
		slack.addMessage({ channel: CHANNEL, text: 'someone else', metadata: metadata(OTHER_KEY) });
		const sent = await channel.send(message(), 1);
		slack.addMessage({ channel: CHANNEL, text: 'a person typing' });
		slack.addMessage({ channel: 'C0ELSEWHERE', text: 'Order 1 paid', metadata: metadata(KEY) });
		const ts = sent.kind === 'sent' ? sent.externalId : null;
		const verdict = await channel.check!(message(), recent());
		expect(verdict).toMatchObject({ outcome: 'found', externalId: ts });
		expect(verdict.outcome === 'found' && verdict.response).toMatchObject({ body: { ok: true, ts, message: { ts, text: 'Order 1 paid', metadata: metadata(KEY) } } });
		expect(verdict.detail).toContain(CHANNEL);
		// GET conversations.history with the window widened by the margin, and all metadata asked for.
		const [call] = slack.historyRequests;
		expect(call.path).toBe('conversations.history');
		expect(call.params).toMatchObject({ channel: CHANNEL, include_all_metadata: 'true', limit: '200', inclusive: 'true' });
		const window = recent();
		expect(Number(call.params.oldest) * 1000).toBeLessThanOrEqual(window.sinceMs - SLACK_CHECK_MARGIN_MS + 1_000);
		expect(Number(call.params.latest) * 1000).toBeGreaterThanOrEqual(window.untilMs + SLACK_CHECK_MARGIN_MS - 1_000);
	});

	test('not found: no message of this step (other keys, no metadata, another channel), nothing is posted by the check', async () => {
		const channel = channelFor(slack);
		slack.addMessage({ channel: CHANNEL, text: 'Order 1 paid', metadata: metadata(OTHER_KEY) });
		slack.addMessage({ channel: CHANNEL, text: 'Order 1 paid' });
		slack.addMessage({ channel: 'C0ELSEWHERE', text: 'Order 1 paid', metadata: metadata(KEY) });
		const before = slack.messages.length;
		const verdict = await channel.check!(message(), recent());
		expect(verdict.outcome).toBe('not_found');
		expect(verdict.detail).toMatch(/no message from this step in C0ORDERS01 between .* \(2 messages read\)/);
		expect(slack.messages).toHaveLength(before);
		expect(slack.requests).toBe(0);
	});

	test('the window: a message with the hash from long before the step was first claimed is not this attempt\'s', async () => {
		const channel = channelFor(slack);
		const long = Date.now() - 3_600_000;
		slack.addMessage({ channel: CHANNEL, text: 'old', ts: tsAt(long), metadata: metadata(KEY) });
		expect((await channel.check!(message(), recent())).outcome).toBe('not_found');
		// Within the margin for Slack's clock (2 minutes before the first claim): found.
		slack.addMessage({ channel: CHANNEL, text: 'skewed', ts: tsAt(Date.now() - 60_000 - 120_000), metadata: metadata(KEY) });
		expect((await channel.check!(message(), recent())).outcome).toBe('found');
	});

	test('metadata is only in the history with include_all_metadata (the stand-in behaves as Slack)', async () => {
		slack.addMessage({ channel: CHANNEL, text: 'x', metadata: metadata(KEY) });
		const call = async (include: boolean) => {
			const res = await fetch(`${slack.apiUrl}/conversations.history?channel=${CHANNEL}${include ? '&include_all_metadata=true' : ''}`, { headers: { Authorization: 'Bearer xoxb-test-token' } });
			return ((await res.json()) as { messages: Array<{ metadata?: unknown }> }).messages[0].metadata;
		};
		expect(await call(false)).toBeUndefined();
		expect(await call(true)).toEqual(metadata(KEY));
	});

	test('a thread reply is looked for in conversations.replies (the channel history does not have it)', async () => {
		const channel = channelFor(slack);
		const parent = slack.addMessage({ channel: CHANNEL, text: 'Order 1' });
		slack.addMessage({ channel: CHANNEL, text: 'other reply', threadTs: parent.ts, metadata: metadata(OTHER_KEY) });
		const reply = message({ threadTs: parent.ts });
		expect((await channel.check!(reply, recent())).outcome).toBe('not_found');
		const sent = await channel.send(reply, 1);
		expect(slack.messages.at(-1)).toMatchObject({ threadTs: parent.ts, metadata: metadata(KEY) });
		const verdict = await channel.check!(reply, recent());
		expect(verdict).toMatchObject({ outcome: 'found', externalId: sent.kind === 'sent' ? sent.externalId : 'sent' });
		expect(verdict.detail).toContain(`the thread ${parent.ts}`);
		expect(slack.historyRequests.map((r) => [r.path, r.params.ts])).toEqual([
			['conversations.replies', parent.ts],
			['conversations.replies', parent.ts],
		]);
		// Asked in the channel's history instead, Slack would not show the reply.
		const history = await fetch(`${slack.apiUrl}/conversations.history?channel=${CHANNEL}&include_all_metadata=true`, { headers: { Authorization: 'Bearer xoxb-test-token' } });
		expect(((await history.json()) as { messages: Array<{ text: string }> }).messages.map((m) => m.text)).toEqual(['Order 1']);
	});

	test('paging: follows next_cursor to an older message; stops after the page limit with "cannot tell"', async () => {
		const paged = await slackServer({ historyPageSize: 2 });
		try {
			const target = paged.addMessage({ channel: CHANNEL, text: 'Order 1 paid', metadata: metadata(KEY) });
			for (let n = 0; n < 7; n++) paged.addMessage({ channel: CHANNEL, text: `noise ${n}`, metadata: metadata(`${n}`.repeat(64)) });
			// Newest first, two per page: the target is on page 4.
			const verdict = await channelFor(paged).check!(message(), recent());
			expect(verdict).toMatchObject({ outcome: 'found', externalId: target.ts });
			expect(paged.historyRequests).toHaveLength(4);
			expect(paged.historyRequests[0].params.cursor).toBeUndefined();
			expect(paged.historyRequests.slice(1).every((r) => typeof r.params.cursor === 'string' && r.params.cursor.length > 0)).toBe(true);

			const bounded = await channelFor(paged, { checkMaxPages: 3 }).check!(message(), recent());
			expect(bounded.outcome).toBe('unknown');
			expect(bounded.detail).toMatch(/more messages .* than this check reads \(6 in 3 pages\)/);

			// Not there at all: every page read, then "not found".
			const absent = await channelFor(paged).check!(message({ idempotencyKey: 'c'.repeat(64) }), recent());
			expect(absent).toMatchObject({ outcome: 'not_found' });
			expect(absent.detail).toContain('(8 messages read)');
		} finally {
			await paged.close();
		}
	});

	test('missing_scope: unknown, saying which scope to add', async () => {
		slack.setHistoryPlan(slackMissingScope);
		slack.addMessage({ channel: CHANNEL, text: 'x', metadata: metadata(KEY) });
		const verdict = await channelFor(slack).check!(message(), recent());
		expect(verdict.outcome).toBe('unknown');
		expect(verdict.detail).toMatch(/^Slack refused to show the channel history \(missing_scope, needs channels:history\): give the Slack app the channels:history scope/);
	});

	test.each([
		['not_in_channel', /invite the app to the channel/],
		['invalid_auth', /fix the token in the n8n Slack credential/],
		['some_new_error', /Slack answered "some_new_error"/],
	])('ok:false %s: unknown', async (error, detail) => {
		slack.setHistoryPlan(() => ({ kind: 'status', status: 200, body: { ok: false, error } }));
		const verdict = await channelFor(slack).check!(message(), recent());
		expect(verdict).toMatchObject({ outcome: 'unknown' });
		expect(verdict.detail).toMatch(detail);
	});

	test('rate limited (HTTP 429): later, with Slack\'s Retry-After, and only one request', async () => {
		slack.setHistoryPlan(() => ({ kind: 'status', status: 429, retryAfter: '60', body: { ok: false, error: 'ratelimited' } }));
		const verdict = await channelFor(slack).check!(message(), recent());
		expect(verdict).toMatchObject({ outcome: 'later', retryAfterMs: 60_000, progressed: false });
		expect(verdict.detail).toMatch(/Slack is limiting how often the channel history may be read .*try again in 60 s/);
		expect(slack.historyRequests).toHaveLength(1);
	});

	test('no answer in time: later (asked again on the next run)', async () => {
		slack.setHistoryPlan(() => ({ kind: 'hang' }));
		const started = Date.now();
		const verdict = await channelFor(slack, { timeoutMs: 300 }).check!(message(), recent());
		expect(verdict).toMatchObject({ outcome: 'later', retryAfterMs: null });
		expect(verdict.detail).toMatch(/^Slack could not be asked for the channel history: no answer within 0.3 s; it is asked again on the next run$/);
		expect(Date.now() - started).toBeLessThan(2_000);
	});

	test('Slack unreachable: later', async () => {
		const closed = await slackServer();
		const apiUrl = closed.apiUrl;
		await closed.close();
		const verdict = await slackChannel({ transport: nodeTransport(), token: 'xoxb-test-token', apiUrl, timeoutMs: 1_000, check: true }).check!(message(), recent());
		expect(verdict.outcome).toBe('later');
		expect(verdict.detail).toContain('ECONNREFUSED');
	});

	test('a channel given by name (or a user ID) cannot be read: unknown with the advice to use the ID, and Slack is not asked', async () => {
		for (const name of ['#orders', 'orders', 'U0123456789']) {
			const verdict = await channelFor(slack).check!(message({ channel: name }), recent());
			expect(verdict.outcome).toBe('unknown');
			expect(verdict.detail).toContain(`this message went to "${name}"`);
			expect(verdict.detail).toContain('Set Slack Channel to the channel ID');
		}
		expect(slack.historyRequests).toHaveLength(0);
	});

	test('many checks at once: one read per channel or thread, each message answered; a channel given by name is answered without a read', async () => {
		const parent = slack.addMessage({ channel: CHANNEL, text: 'Order thread' });
		const a = slack.addMessage({ channel: CHANNEL, text: 'a', metadata: metadata(KEY) });
		const b = slack.addMessage({ channel: 'C0OTHER001', text: 'b', metadata: metadata(OTHER_KEY) });
		const r = slack.addMessage({ channel: CHANNEL, threadTs: parent.ts, text: 'r', metadata: metadata('d'.repeat(64)) });
		const now = performance.now();
		const verdicts = await channelFor(slack).checkMany!(
			[
				{ message: message(), window: recent() },
				{ message: message({ idempotencyKey: 'c'.repeat(64) }), window: recent() },
				{ message: message({ channel: 'C0OTHER001', idempotencyKey: OTHER_KEY }), window: recent() },
				{ message: message({ threadTs: parent.ts, idempotencyKey: 'd'.repeat(64) }), window: recent() },
				{ message: message({ channel: '#orders' }), window: recent() },
			],
			{ now: () => performance.now(), deadline: now + 60_000, maxWaitMs: 0 },
		);
		expect(verdicts.map((v) => [v.outcome, v.outcome === 'found' ? v.externalId : null])).toEqual([
			['found', a.ts],
			['not_found', null],
			['found', b.ts],
			['found', r.ts],
			['unknown', null],
		]);
		expect(slack.historyRequests.map((q) => [q.path, q.params.channel])).toEqual([
			['conversations.history', CHANNEL],
			['conversations.history', 'C0OTHER001'],
			['conversations.replies', CHANNEL],
		]);
	});

	test('with the check turned off, the channel has none', () => {
		expect(channelFor(slack, { check: false }).check).toBeUndefined();
		expect(channelFor(slack).check).toBeInstanceOf(Function);
	});
});

describe('HTTP check request', () => {
	let api: StripeLikeServer;
	const DEFAULTS: HttpCheckOptions = { found: parseStatusList('2xx')!, notFound: parseStatusList('404, 410')!, idPath: ['id'] };
	beforeEach(async () => {
		api = await stripeLikeServer({ honoursKey: false });
	});
	afterEach(async () => {
		await api.close();
	});

	const channelFor = (check: HttpCheckOptions | null = DEFAULTS, extra: { honoursKey?: boolean; timeoutMs?: number; header?: string | null } = {}) =>
		httpChannel({
			transport: nodeTransport(),
			idempotencyHeader: extra.header === undefined ? 'Idempotency-Key' : extra.header,
			honoursKey: extra.honoursKey ?? false,
			timeoutMs: extra.timeoutMs ?? 2_000,
			idPath: ['id'],
			check,
		});
	const message = (order: string, checkUrl = `${api.url}/v1/charges/by-order/${order}`, method: 'GET' | 'HEAD' = 'GET'): HttpMessage => ({
		method: 'POST',
		url: `${api.url}/v1/charges`,
		headers: { 'X-Send-Only': 'yes' },
		body: { order, amount: 100 },
		idempotencyKey: KEY,
		check: { method, url: checkUrl, headers: { 'X-Check': 'yes' } },
	});

	test('found (2xx): the ID field of the answer is the external ID; the check never sends the message', async () => {
		const channel = channelFor();
		expect((await channel.send(message('o-1'), 1)).kind).toBe('sent');
		const verdict = await channel.check!(message('o-1'), recent());
		expect(verdict).toMatchObject({ outcome: 'found', externalId: 'ch_000001', response: { status: 200, body: { id: 'ch_000001', request: { order: 'o-1' } } } });
		expect(api.actions).toHaveLength(1);
		expect(api.lookups).toHaveLength(1);
		const [lookup] = api.lookups;
		expect(lookup.method).toBe('GET');
		expect(lookup.body).toBe('');
		// The check's own headers and the same Idempotency-Key as the send; none of the send's headers.
		expect(lookup.headers['x-check']).toBe('yes');
		expect(lookup.headers['idempotency-key']).toBe(KEY);
		expect(lookup.headers['x-send-only']).toBeUndefined();
		expect(lookup.headers['content-type']).toBeUndefined();
	});

	test('not found: 404 and 410 by default, and a 2xx with an empty list', async () => {
		const channel = channelFor();
		expect(await channel.check!(message('o-missing'), recent())).toMatchObject({ outcome: 'not_found', detail: expect.stringContaining('answered HTTP 404') });
		api.setLookupPlan(() => ({ kind: 'status', status: 410, body: { error: 'gone' } }));
		expect((await channel.check!(message('o-gone'), recent())).outcome).toBe('not_found');
		api.setLookupPlan(() => ({ kind: 'status', status: 200, body: [] }));
		expect(await channel.check!(message('o-search'), recent())).toMatchObject({ outcome: 'not_found', detail: expect.stringContaining('empty list') });
		api.setLookupPlan(() => ({ kind: 'status', status: 200, body: [{ id: 'c_9' }, { id: 'c_10' }] }));
		expect(await channel.check!(message('o-search'), recent())).toMatchObject({ outcome: 'found', externalId: 'c_9' });
		expect(api.actions).toHaveLength(0);
	});

	test.each([
		[500, /answered HTTP 500.*: the API could not answer for now; it is asked again on the next run/],
		[503, /answered HTTP 503/],
		[429, /answered HTTP 429.*\(try again in 7 s\)/],
	])('a passing failure (%i) is later, with Retry-After', async (status, detail) => {
		api.setLookupPlan(() => ({ kind: 'status', status, body: { error: 'x' }, retryAfter: status === 429 ? '7' : undefined }));
		const verdict = await channelFor().check!(message('o-1'), recent());
		expect(verdict).toMatchObject({ outcome: 'later', retryAfterMs: status === 429 ? 7_000 : null });
		expect(verdict.detail).toMatch(detail);
	});

	test.each([
		[418, /answered HTTP 418.*neither "found" \(2xx\) nor "not found" \(404, 410\)/],
		[401, /the API refused the credential/],
		[403, /the API refused the credential/],
		[400, /answered HTTP 400/],
	])('any other status (%i) is unknown', async (status, detail) => {
		api.setLookupPlan(() => ({ kind: 'status', status, body: { error: 'x' } }));
		const verdict = await channelFor().check!(message('o-1'), recent());
		expect(verdict.outcome).toBe('unknown');
		expect(verdict.detail).toMatch(detail);
	});

	test('configured statuses: 200 found, 404 and 422 not found; then 204 is unknown and 422 not found', async () => {
		const channel = channelFor({ found: parseStatusList('200')!, notFound: parseStatusList('404, 422')!, idPath: null });
		api.setLookupPlan(() => ({ kind: 'status', status: 422, body: { error: 'no such order' } }));
		expect((await channel.check!(message('o-1'), recent())).outcome).toBe('not_found');
		api.setLookupPlan(() => ({ kind: 'status', status: 204 }));
		expect((await channel.check!(message('o-1'), recent())).outcome).toBe('unknown');
		// Without an ID field, any "found" status is found, with no external ID.
		api.setLookupPlan(() => ({ kind: 'status', status: 200, body: { whatever: true } }));
		expect(await channel.check!(message('o-1'), recent())).toMatchObject({ outcome: 'found', externalId: null });
	});

	test('ID field: a nested path is read; an answer without it cannot tell (a search answering 200 is not taken for found)', async () => {
		api.setLookupPlan(() => ({ kind: 'status', status: 200, body: { data: { contactId: 42 } } }));
		expect(await channelFor({ ...DEFAULTS, idPath: ['data', 'contactId'] }).check!(message('o-1'), recent())).toMatchObject({ outcome: 'found', externalId: '42' });
		api.setLookupPlan(() => ({ kind: 'status', status: 200, body: { results: [], total: 0 } }));
		const verdict = await channelFor().check!(message('o-1'), recent());
		expect(verdict.outcome).toBe('unknown');
		expect(verdict.detail).toMatch(/its answer has no "id" field/);
	});

	test('HEAD: the status alone decides; no ID is read', async () => {
		const channel = channelFor();
		await channel.send(message('o-1'), 1);
		expect(await channel.check!(message('o-1', undefined, 'HEAD'), recent())).toMatchObject({ outcome: 'found', externalId: null });
		expect((await channel.check!(message('o-2', undefined, 'HEAD'), recent())).outcome).toBe('not_found');
		expect(api.lookups.map((l) => l.method)).toEqual(['HEAD', 'HEAD']);
	});

	test('no answer: a timeout or a refused connection is later', async () => {
		api.setLookupPlan(() => ({ kind: 'hang' }));
		const timedOut = await channelFor(DEFAULTS, { timeoutMs: 300 }).check!(message('o-1'), recent());
		expect(timedOut).toMatchObject({ outcome: 'later', detail: expect.stringMatching(/failed: no answer within 0.3 s; it is asked again on the next run$/) });
		const port = await new Promise<number>((resolve) => {
			const s = http.createServer().listen(0, '127.0.0.1', () => {
				const p = (s.address() as AddressInfo).port;
				s.close(() => resolve(p));
			});
		});
		const refused = await channelFor().check!(message('o-1', `http://127.0.0.1:${port}/v1/charges/by-order/o-1`), recent());
		expect(refused).toMatchObject({ outcome: 'later', detail: expect.stringContaining('ECONNREFUSED') });
	});

	test('only GET and HEAD: any other method is refused without a request', async () => {
		const bad = { ...message('o-1'), check: { method: 'POST' as unknown as 'GET', url: `${api.url}/v1/charges`, headers: {} } };
		const verdict = await channelFor().check!(bad, recent());
		expect(verdict).toMatchObject({ outcome: 'unknown', detail: expect.stringContaining('only use GET or HEAD') });
		expect(api.requests).toBe(0);
		expect(api.lookups).toHaveLength(0);
	});

	test('the check applies only where a repeat is not safe, and only when set up', () => {
		expect(channelFor().check).toBeInstanceOf(Function);
		expect(channelFor(DEFAULTS, { honoursKey: true }).check).toBeUndefined();
		expect(channelFor(null).check).toBeUndefined();
		// Honours the key but sends no key header: a repeat is not safe, so the check applies.
		expect(channelFor(DEFAULTS, { honoursKey: true, header: null }).check).toBeInstanceOf(Function);
	});

	test('a message without a check request is unknown', async () => {
		const { check: _check, ...plain } = message('o-1');
		expect((await channelFor().check!(plain, recent())).outcome).toBe('unknown');
		expect(api.lookups).toHaveLength(0);
	});

	test('status lists', () => {
		expect(parseStatusList('2xx')?.ranges).toEqual([[200, 299]]);
		expect(parseStatusList('404, 410')?.ranges).toEqual([[404, 404], [410, 410]]);
		expect(parseStatusList('200-204;404')?.ranges).toEqual([[200, 204], [404, 404]]);
		expect(parseStatusList('')?.ranges).toEqual([]);
		for (const bad of ['20x', '600', 'ok', '204-200', '2XX0']) expect(parseStatusList(bad)).toBeNull();
		expect(statusListsOverlap(parseStatusList('2xx')!, parseStatusList('204')!)).toBe(true);
		expect(statusListsOverlap(parseStatusList('2xx')!, parseStatusList('404, 410')!)).toBe(false);
	});
});
