/**
 * Guarded Send through n8n-core's real engine against real local destinations: each channel,
 * the outputs, stored results, permanent refusals, credentials, mismatches, duplicates inside one
 * input, another run holding the step, bad input, a ledger that is down, and the send limit.
 */
import type { ICredentialDataDecryptedObject, INode, INodeParameters } from 'n8n-workflow';

import { messageIdFor } from '../../lib/n8n/channels/smtp';
import { idempotencyKeyFor } from '../../nodes/GuardedSend/channels/http';
import { settingsFromUrl } from '../support/db';
import { SLACK_CREDENTIAL, postgresBackend, useEngineLedger, useServer } from '../support/engineBackends';
import { slackServer, smtpServer, stripeLikeServer } from '../support/destinations';
import { chain, node, runWorkflow, type EngineRunResult } from '../support/engine';
import { httpPost, nodeTypes } from '../integration/fixtures/guarded-workflow';

const orders = (...ids: string[]) => JSON.stringify(ids.map((id) => ({ id, email: `${id}@customers.example.com`, amount: 100 })));
const byKey = { keyFrom: 'expression', keyExpression: '={{ $json.id }}' };
const facts = (r: EngineRunResult, output: number) => (r.outputs('Send')[output] ?? []).map((i) => i.json.idempotency as Record<string, unknown>);

describe('engine: Guarded Send channels', () => {
	const api = useServer(() => stripeLikeServer());
	const secured = useServer(() => stripeLikeServer({ apiKey: 'sk_test_right' }));
	const slow = useServer(() => stripeLikeServer({ delayMs: 40 }));
	const slack = useServer(() => slackServer());
	const smtp = useServer(() => smtpServer());
	const fx = useEngineLedger(postgresBackend, () => ({ ...SLACK_CREDENTIAL, smtp: smtp.credential, httpBearerAuth: { token: 'sk_test_right' } }));
	let wf: string;
	let n = 0;

	beforeEach(() => {
		wf = `wf-send-${++n}-${Date.now()}`;
	});

	const slackSend = (extra: INodeParameters = {}) => ({ channel: 'slack', ...byKey, slackChannel: '#orders', slackText: '=Order {{ $json.id }} paid', slackOptions: { apiUrl: slack.apiUrl }, ...extra });
	const httpSend = (url: string, extra: INodeParameters = {}) => ({
		...httpPost(`${url}/v1/charges`),
		...byKey,
		jsonBody: '={{ JSON.stringify({ order: $json.id, amount: $json.amount }) }}',
		...extra,
	});
	const run = (parameters: INodeParameters, items: string, options: { executionId?: string; extra?: Partial<INode>; creds?: Record<string, ICredentialDataDecryptedObject> } = {}) =>
		runWorkflow(
			{ id: wf, nodes: [node('Orders', 'test.items', { items }), node('Send', 'n8n-nodes-idempotency.guardedSend', parameters, options.extra)], connections: chain('Orders', 'Send') },
			{ credentials: options.creds ?? fx.credentials, nodeTypes, executionId: options.executionId },
		);
	const row = async (key: string, step = 'Send') => (await fx.ledger.get(`workflow:${wf}`, key)).find((r) => r.step === step);

	test('Slack: sent once; a rerun is Skipped with the stored result, when, and by which execution', async () => {
		const first = await run(slackSend(), orders('s-1', 's-2'), { executionId: `exec-${wf}-1` });
		expect(first.error).toBeUndefined();
		expect(facts(first, 0).map((f) => [f.key, f.outcome, f.status])).toEqual([
			['s-1', 'sent', 'completed'],
			['s-2', 'sent', 'completed'],
		]);
		const ts = facts(first, 0)[0].externalId;
		expect(slack.messages.filter((m) => m.text === 'Order s-1 paid')).toHaveLength(1);
		const again = await run(slackSend(), orders('s-1', 's-2'), { executionId: `exec-${wf}-2` });
		const skipped = facts(again, 1);
		expect(skipped).toHaveLength(2);
		expect(skipped[0]).toMatchObject({ outcome: 'skipped', reason: 'already_sent', externalId: ts, sentByExecution: `exec-${wf}-1`, sentByWorkflow: wf });
		expect(Date.parse(String(skipped[0].sentAt))).toBeGreaterThan(Date.now() - 60_000);
		expect((skipped[0].response as { body: { ok: boolean } }).body.ok).toBe(true);
		expect(slack.messages.filter((m) => m.text === 'Order s-1 paid')).toHaveLength(1);
	});

	test('email: sent once over SMTP with a Message-ID derived from the key and the claim, at the sender\'s domain; a rerun is Skipped', async () => {
		const params = { channel: 'email', ...byKey, fromEmail: 'shop@example.com', toEmail: '={{ $json.email }}', subject: '=Order {{ $json.id }}', emailFormat: 'both', emailText: 'Thanks', emailHtml: '<b>Thanks</b>' };
		const first = await run(params, orders('e-1'));
		expect(first.error).toBeUndefined();
		const mail = smtp.mails.find((m) => m.subject === 'Order e-1');
		const messageId = messageIdFor(`workflow:${wf}`, 'e-1', 'Send', (await row('e-1'))!.firstSeenAt, 'shop@example.com');
		expect(messageId).toMatch(/^<[0-9a-f]{40}@example\.com>$/);
		expect(mail?.messageId).toBe(messageId);
		expect(mail?.to).toEqual(['e-1@customers.example.com']);
		expect(facts(first, 0)[0]).toMatchObject({ outcome: 'sent', externalId: messageId, messageId });
		const again = await run(params, orders('e-1'));
		expect(facts(again, 1)).toHaveLength(1);
		expect(smtp.mails.filter((m) => m.subject === 'Order e-1')).toHaveLength(1);
	});

	test('HTTP: the Idempotency-Key header carries a stable key per (namespace, key, step) and row incarnation; the external ID comes from the response', async () => {
		const r = await run(httpSend(api.url), orders('h-1'));
		const f = facts(r, 0)[0];
		const stored = await row('h-1');
		expect(f).toMatchObject({ outcome: 'sent', idempotencyHeader: 'Idempotency-Key', idempotencyKey: idempotencyKeyFor(`workflow:${wf}`, 'h-1', 'Send', stored!.firstSeenAt) });
		expect(String(f.externalId)).toMatch(/^ch_/);
		expect(api.keysSeen.get(String(f.idempotencyKey))).toBe(1);
		expect((await row('h-1'))?.externalId).toBe(f.externalId);
	});

	test('HTTP: a permanent 4xx goes to Needs Review with the response stored; the next run does not send again', async () => {
		api.setPlan(() => ({ kind: 'status', status: 400, body: { error: { message: 'amount must be positive' } } }));
		const first = await run(httpSend(api.url), orders('p-1'));
		api.setPlan(() => ({ kind: 'normal' }));
		expect(facts(first, 2)[0]).toMatchObject({ outcome: 'needs_review', reason: 'rejected', status: 'needs_review', attempts: 1 });
		const stored = await row('p-1');
		expect(stored?.status).toBe('needs_review');
		expect(stored?.result).toMatchObject({ reason: 'rejected', response: { status: 400, body: { error: { message: 'amount must be positive' } } } });
		const before = api.requests;
		const again = await run(httpSend(api.url), orders('p-1'));
		expect(facts(again, 2)[0]).toMatchObject({ reason: 'marked_for_review' });
		expect(api.requests).toBe(before);
	});

	test('HTTP with a generic credential: a refused key is failed_retryable; with the right credential the next run sends', async () => {
		const params = httpSend(secured.url, { authentication: 'genericCredentialType', genericAuthType: 'httpBearerAuth' });
		const wrong = await run(params, orders('c-1'), { creds: { ...fx.credentials, httpBearerAuth: { token: 'sk_test_wrong' } } });
		expect(facts(wrong, 2)[0]).toMatchObject({ reason: 'unauthorized', status: 'failed_retryable', attempts: 1 });
		// The item and the ledger row give the same reason.
		expect((await row('c-1'))?.result).toMatchObject({ reason: 'unauthorized' });
		expect(secured.actions).toHaveLength(0);
		const right = await run(params, orders('c-1'));
		expect(facts(right, 0)[0]).toMatchObject({ outcome: 'sent' });
		expect(secured.actions).toHaveLength(1);
	});

	test('HTTP with a Custom Auth credential that is not JSON: a configuration error before anything is claimed or sent', async () => {
		const params = httpSend(api.url, { authentication: 'genericCredentialType', genericAuthType: 'httpCustomAuth' });
		const before = api.requests;
		const r = await run(params, orders('ca-1'), { creds: { ...fx.credentials, httpCustomAuth: { json: '{"headers": {"X-Api-Key": ' } } });
		expect(r.error?.message).toMatch(/Custom Auth credential is not a JSON object/);
		expect(api.requests).toBe(before);
		expect(await row('ca-1')).toBeUndefined();
	});

	test('Slack: a permanent error (channel_not_found) goes to Needs Review with Slack\'s answer; the next run does not post again', async () => {
		const first = await run(slackSend({ slackChannel: '#missing-channel' }), orders('nf-1'));
		expect(facts(first, 2)[0]).toMatchObject({ outcome: 'needs_review', reason: 'rejected', status: 'needs_review', attempts: 1 });
		const stored = await row('nf-1');
		expect(stored?.status).toBe('needs_review');
		expect(stored?.result).toMatchObject({ response: { body: { ok: false, error: 'channel_not_found' } } });
		const before = slack.requests;
		const again = await run(slackSend({ slackChannel: '#missing-channel' }), orders('nf-1'));
		expect(facts(again, 2)[0]).toMatchObject({ reason: 'marked_for_review' });
		expect(slack.requests).toBe(before);
	});

	test('Slack: an empty channel is bad input, caught before anything is claimed', async () => {
		const r = await run(slackSend({ slackChannel: '={{ "" }}' }), orders('nf-2'), { extra: { onError: 'continueRegularOutput' } });
		expect(r.outputs('Send')[2][0].json.error).toMatch(/Slack channel is empty/);
		expect(await row('nf-2')).toBeUndefined();
	});

	test('the same key with different content: never sent; Needs Review, Skipped or an error, as chosen', async () => {
		await run(slackSend(), orders('m-1'));
		const changed = slackSend({ slackText: '=Order {{ $json.id }} paid twice?' });
		const review = await run(changed, orders('m-1'));
		expect(facts(review, 2)[0]).toMatchObject({ outcome: 'needs_review', reason: 'mismatch' });
		const skip = await run({ ...changed, options: { onMismatch: 'skip' } }, orders('m-1'));
		expect(facts(skip, 1)[0]).toMatchObject({ outcome: 'skipped', reason: 'mismatch' });
		const error = await run({ ...changed, options: { onMismatch: 'error' } }, orders('m-1'));
		expect(error.error?.message).toMatch(/was used before with different content/);
		expect(slack.messages.filter((m) => m.text.startsWith('Order m-1'))).toHaveLength(1);
	});

	test('the same key twice in one input: sent once, the second item is Skipped', async () => {
		const r = await run(slackSend(), orders('d-1', 'd-2', 'd-1'));
		expect(facts(r, 0).map((f) => f.key)).toEqual(['d-1', 'd-2']);
		expect(facts(r, 1)).toEqual([expect.objectContaining({ key: 'd-1', outcome: 'skipped', reason: 'same_key_earlier_in_input', firstItem: 0 })]);
		expect(r.outputs('Send')[1][0].pairedItem).toEqual({ item: 2 });
		expect(slack.messages.filter((m) => m.text === 'Order d-1 paid')).toHaveLength(1);
	});

	test('another run holds the step: In Progress at once, never Needs Review or Skipped, or wait for it (then send when its claim lapsed unsent, or skip when it finished)', async () => {
		const ns = `workflow:${wf}`;
		const claim = (key: string, leaseMs: number) =>
			fx.ledger.claim([{ namespace: ns, key, step: 'Send', fingerprint: null }], { mode: 'lease', holder: 'execution:other', leaseMs, ttlMs: 86_400_000 });
		await claim('w-1', 60_000);
		const busy = await run(slackSend(), orders('w-1'));
		expect(facts(busy, 3)[0]).toMatchObject({ outcome: 'in_progress', reason: 'in_progress' });
		expect(facts(busy, 1)).toEqual([]);
		expect(facts(busy, 2)).toEqual([]);

		await claim('w-2', 1_500);
		const waited = await run(slackSend({ options: { whenInProgress: 'wait', maxWait: 20 } }), orders('w-2'));
		expect(facts(waited, 0)[0]).toMatchObject({ outcome: 'sent', resent: false });

		await claim('w-3', 60_000);
		setTimeout(() => {
			void fx.ledger.record([{ namespace: ns, key: 'w-3', step: 'Send', status: 'completed', externalId: 'x-9', result: { sentAt: 'then', executionId: 'other' } }], { ttlMs: 86_400_000, holder: 'execution:other' });
		}, 700);
		const finished = await run(slackSend({ options: { whenInProgress: 'wait', maxWait: 20 } }), orders('w-3'));
		expect(facts(finished, 1)[0]).toMatchObject({ outcome: 'skipped', externalId: 'x-9', sentByExecution: 'other' });
		expect(slack.messages.filter((m) => m.text === 'Order w-3 paid')).toHaveLength(0);
	});

	test('bad input on one item: without continue on fail the node stops before anything is claimed or sent', async () => {
		const params = httpSend(api.url, { url: `=${api.url}/v1/{{ $json.id === "b-2" ? "" : "charges" }}`.replace(`${api.url}`, '{{ $json.id === "b-2" ? "not a url" : "' + api.url + '" }}') });
		const before = api.requests;
		const r = await run(params, orders('b-1', 'b-2', 'b-3'));
		expect(r.error?.message).toMatch(/is not an http\(s\) address/);
		expect(api.requests).toBe(before);
		expect(await fx.ledger.get(`workflow:${wf}`, 'b-1')).toEqual([]);
		const tolerant = await run(params, orders('b-1', 'b-2', 'b-3'), { extra: { onError: 'continueRegularOutput' } });
		expect(facts(tolerant, 0).map((f) => f.key)).toEqual(['b-1', 'b-3']);
		expect(tolerant.outputs('Send')[2][0].json.error).toMatch(/not an http\(s\) address/);
		expect(tolerant.outputs('Send')[2][0].pairedItem).toEqual({ item: 1 });
	});

	test('the ledger is down: fails closed, nothing is sent', async () => {
		const before = slack.requests;
		const r = await run(slackSend(), orders('x-1'), { creds: { ...fx.credentials, idempotencyPostgresApi: { ...settingsFromUrl(fx.table), port: 1 } } });
		expect(r.error?.message).toMatch(/ledger is unavailable/i);
		expect(String((r.error as { description?: string }).description)).toMatch(/fails closed/);
		expect(slack.requests).toBe(before);
	});

	test('at most "Sends at Once" requests in flight, however many items', async () => {
		const ids = Array.from({ length: 60 }, (_, i) => `f-${i}`);
		const r = await run(httpSend(slow.url, { options: { concurrency: 3, batchSize: 25 } }), orders(...ids));
		expect(facts(r, 0)).toHaveLength(60);
		expect(slow.peakInFlight).toBe(3);
	});

	test('"Also Complete the Unit of Work": Dedupe Gate → Guarded Send completes the gate\'s claim', async () => {
		const r = await runWorkflow(
			{
				id: wf,
				nodes: [
					node('Orders', 'test.items', { items: orders('u-1') }),
					node('Gate', 'n8n-nodes-idempotency.dedupeGate', { keySource: 'field', keyField: 'id', mode: 'lease' }),
					node('Send', 'n8n-nodes-idempotency.guardedSend', { ...slackSend(), keyFrom: 'lineage', options: { completeUnit: true } }),
				],
				connections: chain('Orders', 'Gate', 'Send'),
			},
			{ credentials: fx.credentials, nodeTypes },
		);
		expect(r.error).toBeUndefined();
		expect((await fx.ledger.get(`workflow:${wf}`, 'u-1')).map((x) => [x.step, x.status])).toEqual([
			['', 'completed'],
			['Send', 'completed'],
		]);
	});

	test('configuration errors are clear: a lease shorter than the timeout allows', async () => {
		const r = await run(slackSend({ options: { lease: 10, leaseUnit: 'seconds' } }), orders('l-1'));
		expect(r.error?.message).toMatch(/"Hold Step For" \(10 s\) is too short for a 30 s timeout/);
	});
});
