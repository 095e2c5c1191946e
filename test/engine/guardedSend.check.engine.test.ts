/**
 * Guarded Send through n8n-core's real engine, after a run died while sending (the step is left
 * `in_progress` in phase `sending`, its lease lapsed): Slack's "Check Slack Before Resending" and
 * HTTP's "Check Before Resending" ask the destination before anything is sent again. Real
 * PostgreSQL, real local destinations.
 */
import type { INodeParameters } from 'n8n-workflow';

import type { LedgerRecord } from '../../lib/ledger/types';
import { SLACK_METADATA_EVENT } from '../../lib/n8n/channels/slack';
import { idempotencyKeyFor } from '../../nodes/GuardedSend/channels/http';
import { SLACK_CREDENTIAL, postgresBackend, useEngineLedger, useServer } from '../support/engineBackends';
import { slackMissingScope, slackServer, stripeLikeServer, type StripeLikeServer } from '../support/destinations';
import { chain, node, runWorkflow, type EngineRunResult } from '../support/engine';
import { SEND_OUTPUT } from '../support/outputs';
import { nodeTypes } from '../integration/fixtures/guarded-workflow';

const CHANNEL = 'C0ORDERS01';
const DAY = 86_400_000;
const orders = (...ids: string[]) => JSON.stringify(ids.map((id) => ({ id, amount: 100 })));
const byKey = { keyFrom: 'expression', keyExpression: '={{ $json.id }}' };
const facts = (r: EngineRunResult, output: number) => (r.outputs('Send')[output] ?? []).map((i) => i.json.idempotency as Record<string, unknown>);
const { SENT, SKIPPED, REVIEW, IN_PROGRESS } = SEND_OUTPUT;

describe('engine: Guarded Send asks the destination before sending a step a dead run may have sent', () => {
	const fx = useEngineLedger(postgresBackend, () => SLACK_CREDENTIAL);
	const slack = useServer(() => slackServer());
	const crm = useServer(() => stripeLikeServer({ honoursKey: false }));
	const keyed = useServer(() => stripeLikeServer());
	let wf: string;
	let n = 0;

	beforeEach(() => {
		wf = `wf-check-${++n}-${Date.now()}`;
		slack.setHistoryPlan(() => ({ kind: 'normal' }));
		crm.setLookupPlan(() => ({ kind: 'normal' }));
	});

	const ns = () => `workflow:${wf}`;
	const slackSend = (extra: INodeParameters = {}, slackOptions: INodeParameters = {}) => ({
		channel: 'slack',
		...byKey,
		slackChannel: CHANNEL,
		slackText: '=Order {{ $json.id }} paid',
		slackOptions: { apiUrl: slack.apiUrl, ...slackOptions },
		...extra,
	});
	const httpSend = (api: StripeLikeServer, extra: INodeParameters = {}, request: INodeParameters | null = {}) => ({
		channel: 'http',
		...byKey,
		method: 'POST',
		url: `${api.url}/v1/charges`,
		sendBody: true,
		bodyContentType: 'json',
		jsonBody: '={{ JSON.stringify({ order: $json.id, amount: $json.amount }) }}',
		honoursKey: false,
		options: request === null ? {} : { checkRequest: { request: { url: `=${api.url}/v1/charges/by-order/{{ $json.id }}`, ...request } } },
		...extra,
	});
	const run = (parameters: INodeParameters, items: string) =>
		runWorkflow(
			{ id: wf, nodes: [node('Orders', 'test.items', { items }), node('Send', 'n8n-nodes-idempotency.guardedSend', parameters)], connections: chain('Orders', 'Send') },
			{ credentials: fx.credentials, nodeTypes },
		);
	/** A run that claimed the step, marked it `sending`, and died: its lease lapses at once. */
	async function deadRun(key: string): Promise<LedgerRecord> {
		const [claimed] = await fx.ledger.claim([{ namespace: ns(), key, step: 'Send', fingerprint: null }], { mode: 'lease', holder: 'execution:dead', leaseMs: 300, ttlMs: DAY });
		if (claimed.kind !== 'claimed') throw new Error(`not claimed: ${claimed.kind}`);
		await fx.ledger.markPhase([{ namespace: ns(), key, step: 'Send', fence: claimed.record.fence! }], 'sending');
		await new Promise((r) => setTimeout(r, 450));
		return claimed.record;
	}
	const row = async (key: string) => (await fx.ledger.get(ns(), key)).find((r) => r.step === 'Send');
	const slackMessages = (key: string) => slack.messages.filter((m) => m.text === `Order ${key} paid`);
	const hashFor = (key: string, dead: LedgerRecord) => idempotencyKeyFor(ns(), key, 'Send', dead.firstSeenAt);

	describe('Slack', () => {
		test('the dead run had posted it: found in the channel history by its metadata, recorded as sent and Skipped (recovered), not posted again', async () => {
			const dead = await deadRun('s-1');
			const posted = slack.addMessage({ channel: CHANNEL, text: 'Order s-1 paid', metadata: { event_type: SLACK_METADATA_EVENT, event_payload: { key: hashFor('s-1', dead) } } });
			const r = await run(slackSend(), orders('s-1'));
			expect(r.error).toBeUndefined();
			expect(facts(r, SENT)).toEqual([]);
			expect(facts(r, REVIEW)).toEqual([]);
			expect(facts(r, SKIPPED)).toEqual([
				expect.objectContaining({ outcome: 'skipped', reason: 'already_sent', recovered: true, externalId: posted.ts, check: expect.objectContaining({ outcome: 'found' }) }),
			]);
			expect(slackMessages('s-1')).toHaveLength(1);
			expect(await row('s-1')).toMatchObject({ status: 'completed', externalId: posted.ts, result: expect.objectContaining({ recovered: true }) });
			// A rerun replays it as any other sent step.
			const again = await run(slackSend(), orders('s-1'));
			expect(facts(again, SKIPPED)).toEqual([expect.objectContaining({ reason: 'already_sent', externalId: posted.ts })]);
			expect(slackMessages('s-1')).toHaveLength(1);
		});

		test('the dead run had not posted it: not found, posted once with the same metadata hash (resent), and the check\'s evidence on the item', async () => {
			const dead = await deadRun('s-2');
			const r = await run(slackSend(), orders('s-2'));
			expect(facts(r, SENT)).toEqual([expect.objectContaining({ outcome: 'sent', resent: true, check: expect.objectContaining({ outcome: 'not_found' }) })]);
			expect(slackMessages('s-2')).toEqual([expect.objectContaining({ metadata: { event_type: SLACK_METADATA_EVENT, event_payload: { key: hashFor('s-2', dead) } } })]);
			// Had this run died too after posting, the next one would find it by the same hash.
			expect(slack.historyRequests.at(-1)?.params).toMatchObject({ channel: CHANNEL, include_all_metadata: 'true' });
		});

		test('a thread reply: looked for in the thread', async () => {
			const parent = slack.addMessage({ channel: CHANNEL, text: 'Order thread' });
			const dead = await deadRun('s-3');
			slack.addMessage({ channel: CHANNEL, threadTs: parent.ts, text: 'Order s-3 paid', metadata: { event_type: SLACK_METADATA_EVENT, event_payload: { key: hashFor('s-3', dead) } } });
			const r = await run(slackSend({}, { threadTs: parent.ts }), orders('s-3'));
			expect(facts(r, SKIPPED)).toEqual([expect.objectContaining({ recovered: true })]);
			expect(slack.historyRequests.at(-1)).toMatchObject({ path: 'conversations.replies', params: expect.objectContaining({ ts: parent.ts }) });
			expect(slackMessages('s-3')).toHaveLength(1);
		});

		test('missing_scope: Needs Review (ambiguous) with the advice to add channels:history; nothing posted', async () => {
			await deadRun('s-4');
			slack.setHistoryPlan(slackMissingScope);
			const r = await run(slackSend(), orders('s-4'));
			const [item] = facts(r, REVIEW);
			expect(item).toMatchObject({ reason: 'ambiguous', check: expect.objectContaining({ outcome: 'unknown' }) });
			expect(String(item.detail)).toMatch(/could not tell whether the message arrived \(Slack refused to show the channel history \(missing_scope, needs channels:history\)/);
			expect(slackMessages('s-4')).toHaveLength(0);
			expect(await row('s-4')).toMatchObject({ status: 'needs_review', result: expect.objectContaining({ reason: 'ambiguous', check: expect.objectContaining({ outcome: 'unknown' }) }) });
		});

		test('Slack does not answer the history in time: In Progress, checked again by the next delivery; at "Checks Before Review" checks, Needs Review', async () => {
			await deadRun('s-5');
			slack.setHistoryPlan(() => ({ kind: 'hang' }));
			const r = await run(slackSend({ options: { timeout: 1, checksBeforeReview: 2 } }), orders('s-5'));
			expect(facts(r, REVIEW)).toEqual([]);
			expect(facts(r, IN_PROGRESS)).toEqual([expect.objectContaining({ reason: 'check_later', checks: 1, check: expect.objectContaining({ outcome: 'later', detail: expect.stringContaining('Slack could not be asked for the channel history: no answer within 1 s') }) })]);
			const again = await run(slackSend({ options: { timeout: 1, checksBeforeReview: 2 } }), orders('s-5'));
			expect(facts(again, REVIEW)).toEqual([expect.objectContaining({ reason: 'ambiguous', check: expect.objectContaining({ outcome: 'later', detail: expect.stringContaining('Slack could not be asked for the channel history: no answer within 1 s') }) })]);
			expect(slackMessages('s-5')).toHaveLength(0);
		});

		test('a channel given by name: Needs Review, saying to use the channel ID; Slack is not asked', async () => {
			await deadRun('s-6');
			const asked = slack.historyRequests.length;
			const r = await run(slackSend({ slackChannel: '#orders' }), orders('s-6'));
			expect(facts(r, REVIEW)).toEqual([expect.objectContaining({ reason: 'ambiguous', detail: expect.stringContaining('Set Slack Channel to the channel ID') })]);
			expect(slack.historyRequests.length).toBe(asked);
		});

		test('"Send Again (Accept a Possible Duplicate)" still asks first: a message that is there is not posted twice; only a check that cannot answer posts again', async () => {
			const dead = await deadRun('s-9');
			slack.addMessage({ channel: CHANNEL, text: 'Order s-9 paid', metadata: { event_type: SLACK_METADATA_EVENT, event_payload: { key: hashFor('s-9', dead) } } });
			const found = await run(slackSend({ onAmbiguous: 'send' }), orders('s-9'));
			expect(facts(found, SKIPPED)).toEqual([expect.objectContaining({ recovered: true })]);
			expect(slackMessages('s-9')).toHaveLength(1);
			await deadRun('s-10');
			slack.setHistoryPlan(slackMissingScope);
			const unknown = await run(slackSend({ onAmbiguous: 'send' }), orders('s-10'));
			expect(facts(unknown, SENT)).toEqual([expect.objectContaining({ resent: true, check: expect.objectContaining({ outcome: 'unknown' }) })]);
			expect(slackMessages('s-10')).toHaveLength(1);
		});

		test('"Check Slack Before Resending" off: Needs Review as before, without asking Slack, even though the message is there', async () => {
			const dead = await deadRun('s-7');
			slack.addMessage({ channel: CHANNEL, text: 'Order s-7 paid', metadata: { event_type: SLACK_METADATA_EVENT, event_payload: { key: hashFor('s-7', dead) } } });
			const asked = slack.historyRequests.length;
			const r = await run(slackSend({}, { checkBeforeResend: false }), orders('s-7'));
			expect(facts(r, REVIEW)).toEqual([expect.objectContaining({ reason: 'ambiguous' })]);
			expect(facts(r, REVIEW)[0].check).toBeUndefined();
			expect(slack.historyRequests.length).toBe(asked);
		});

		test('the metadata is not content: a rerun after a plain send is Skipped (no mismatch); a step released as "not sent" gets a new hash', async () => {
			const first = await run(slackSend(), orders('s-8'));
			expect(facts(first, SENT)).toHaveLength(1);
			const firstHash = (slackMessages('s-8')[0].metadata as { event_payload: { key: string } }).event_payload.key;
			expect(facts(await run(slackSend({}, { checkBeforeResend: false }), orders('s-8')), SKIPPED)).toHaveLength(1);
			await fx.ledger.release({ namespace: ns(), key: 's-8', step: 'Send', releasedBy: 'on-call', resolution: 'not_sent', ttlMs: DAY });
			expect(facts(await run(slackSend(), orders('s-8')), SENT)).toHaveLength(1);
			const hashes = slackMessages('s-8').map((m) => (m.metadata as { event_payload: { key: string } }).event_payload.key);
			expect(hashes).toHaveLength(2);
			expect(hashes[1]).not.toBe(firstHash);
			expect(hashes[1]).toBe(idempotencyKeyFor(ns(), 's-8', 'Send', (await row('s-8'))!.firstSeenAt));
		});
	});

	describe('HTTP to an API that does not honour the key', () => {
		const charges = (api: StripeLikeServer, key: string) => api.actions.filter((a) => (a.body as { order?: string })?.order === key);

		test('the dead run had created it: the check request finds it (2xx, ID field), recorded as sent and Skipped; no second charge', async () => {
			await deadRun('h-1');
			// The dead run's request reached the API.
			await fetch(`${crm.url}/v1/charges`, { method: 'POST', body: JSON.stringify({ order: 'h-1', amount: 100 }) });
			const lookups = crm.lookups.length;
			const r = await run(httpSend(crm), orders('h-1'));
			expect(facts(r, SKIPPED)).toEqual([expect.objectContaining({ recovered: true, externalId: charges(crm, 'h-1')[0].id })]);
			expect(charges(crm, 'h-1')).toHaveLength(1);
			const lookup = crm.lookups[lookups];
			expect(lookup).toMatchObject({ method: 'GET', path: '/v1/charges/by-order/h-1', body: '' });
			// The same Idempotency-Key the send would carry.
			expect(lookup.headers['idempotency-key']).toBe(facts(r, SKIPPED)[0].idempotencyKey);
		});

		test('the dead run had not: 404, sent once (resent) with the evidence', async () => {
			await deadRun('h-2');
			const r = await run(httpSend(crm), orders('h-2'));
			expect(facts(r, SENT)).toEqual([expect.objectContaining({ resent: true, check: expect.objectContaining({ outcome: 'not_found' }) })]);
			expect(charges(crm, 'h-2')).toHaveLength(1);
		});

		test('any other answer: Needs Review with the status; a 500 is asked again by the next delivery', async () => {
			await deadRun('h-3');
			crm.setLookupPlan(() => ({ kind: 'status', status: 418, body: { error: 'teapot' } }));
			const r = await run(httpSend(crm), orders('h-3'));
			expect(facts(r, REVIEW)).toEqual([expect.objectContaining({ reason: 'ambiguous', detail: expect.stringContaining('answered HTTP 418') })]);
			await deadRun('h-3b');
			crm.setLookupPlan(() => ({ kind: 'status', status: 500, body: { error: 'boom' } }));
			const busy = await run(httpSend(crm), orders('h-3b'));
			expect(facts(busy, IN_PROGRESS)).toEqual([expect.objectContaining({ reason: 'check_later', detail: expect.stringContaining('answered HTTP 500') })]);
			expect(charges(crm, 'h-3')).toHaveLength(0);
			expect(charges(crm, 'h-3b')).toHaveLength(0);
		});

		test('configured statuses, HEAD and a header from the item', async () => {
			await deadRun('h-4');
			crm.setLookupPlan(() => ({ kind: 'status', status: 422, body: { error: 'unknown order' } }));
			const request = { method: 'HEAD', notFoundStatuses: '404, 422', headers: { parameters: [{ name: 'X-Order', value: '={{ $json.id }}' }] } };
			const r = await run(httpSend(crm, {}, request), orders('h-4'));
			expect(facts(r, SENT)).toEqual([expect.objectContaining({ resent: true })]);
			expect(crm.lookups.at(-1)).toMatchObject({ method: 'HEAD', headers: expect.objectContaining({ 'x-order': 'h-4' }) });
		});

		test('without a check request: Needs Review, as before', async () => {
			await deadRun('h-5');
			const lookups = crm.lookups.length;
			const r = await run(httpSend(crm, {}, null), orders('h-5'));
			expect(facts(r, REVIEW)).toEqual([expect.objectContaining({ reason: 'ambiguous' })]);
			expect(facts(r, REVIEW)[0].check).toBeUndefined();
			expect(crm.lookups.length).toBe(lookups);
		});

		test('an API that honours the key is asked again with the same key; a leftover check request is not used', async () => {
			await deadRun('h-6');
			const r = await run(httpSend(keyed, { honoursKey: true }), orders('h-6'));
			expect(facts(r, SENT)).toEqual([expect.objectContaining({ resent: true })]);
			expect(facts(r, SENT)[0].check).toBeUndefined();
			expect(keyed.lookups).toHaveLength(0);
		});

		test('status lists that make no sense stop the node before anything is claimed', async () => {
			const bad = await run(httpSend(crm, {}, { foundStatuses: '2xx', notFoundStatuses: '204, 404' }), orders('h-7'));
			expect(bad.error?.message).toMatch(/"Found When Status Is" \(2xx\) and "Not Found When Status Is" \(204, 404\) share a status/);
			const garbled = await run(httpSend(crm, {}, { notFoundStatuses: 'missing' }), orders('h-7'));
			expect(garbled.error?.message).toMatch(/"Not Found When Status Is" \(missing\) is not a list of HTTP statuses/);
			expect(await row('h-7')).toBeUndefined();
		});
	});
});
