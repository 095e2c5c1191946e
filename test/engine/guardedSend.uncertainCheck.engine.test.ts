/**
 * Guarded Send through n8n-core's real engine, when an answer inside the run leaves it unknown
 * whether the destination acted: the connection is dropped after the request was written (a real
 * local API that reads the whole request, acts on it or not, then destroys the socket). Where a
 * check is set up ("Check Before Resending": a GET to the API's look-up), the destination is asked
 * before anything is decided: found is recorded as sent (Sent, with the check's answer), not found
 * is tried again under the retry policy, cannot tell goes to Needs Review. Real PostgreSQL.
 */
import type { INodeParameters } from 'n8n-workflow';

import { postgresBackend, useEngineLedger } from '../support/engineBackends';
import { stripeLikeServer, type Plan, type StripeLikeServer } from '../support/destinations';
import { chain, node, runWorkflow, type EngineRunResult } from '../support/engine';
import { SEND_OUTPUT } from '../support/outputs';
import { nodeTypes } from '../integration/fixtures/guarded-workflow';

const { SENT, REVIEW } = SEND_OUTPUT;
const facts = (r: EngineRunResult, output: number) => (r.outputs('Send')[output] ?? []).map((i) => i.json.idempotency as Record<string, unknown>);
/** The first request of the run is dropped after it was read, acted on or not; the others are answered. */
const dropFirst = (act: boolean): Plan => (n) => (n === 1 ? { kind: 'drop', act } : { kind: 'normal' });

describe('engine: an uncertain answer inside a run is checked at the destination', () => {
	const fx = useEngineLedger(postgresBackend);
	let api: StripeLikeServer;
	let wf: string;
	let n = 0;

	beforeEach(async () => {
		wf = `wf-uncertain-${++n}-${Date.now()}`;
		// A fresh API per test, so that its request count starts at 1.
		api = await stripeLikeServer({ honoursKey: false });
	});
	afterEach(async () => {
		await api?.close();
	});

	const send = (extra: INodeParameters = {}, check = true): INodeParameters => ({
		channel: 'http',
		keyFrom: 'expression',
		keyExpression: '={{ $json.id }}',
		method: 'POST',
		url: `${api.url}/v1/charges`,
		sendBody: true,
		bodyContentType: 'json',
		jsonBody: '={{ JSON.stringify({ order: $json.id, amount: 100 }) }}',
		honoursKey: false,
		options: {
			initialBackoff: 10,
			...(check ? { checkRequest: { request: { url: `=${api.url}/v1/charges/by-order/{{ $json.id }}` } } } : {}),
		},
		...extra,
	});
	const run = (parameters: INodeParameters, id: string) =>
		runWorkflow(
			{ id: wf, nodes: [node('Orders', 'test.items', { items: JSON.stringify([{ id }]) }), node('Send', 'n8n-nodes-idempotency.guardedSend', parameters)], connections: chain('Orders', 'Send') },
			{ credentials: fx.credentials, nodeTypes },
		);
	const charges = (id: string) => api.actions.filter((a) => (a.body as { order?: string })?.order === id);
	const row = async (id: string) => (await fx.ledger.get(`workflow:${wf}`, id)).find((r) => r.step === 'Send');

	test('it acted, then dropped the connection: the check finds it; Sent once, with the check\'s answer; not sent again', async () => {
		api.setPlan(dropFirst(true));
		const r = await run(send(), 'u-1');
		expect(r.error).toBeUndefined();
		expect(facts(r, REVIEW)).toEqual([]);
		const [charge] = charges('u-1');
		expect(facts(r, SENT)).toEqual([
			expect.objectContaining({
				outcome: 'sent',
				status: 'completed',
				externalId: charge.id,
				attempts: 1,
				check: expect.objectContaining({ outcome: 'found', checkedAt: expect.any(String) }),
				detail: expect.stringContaining('the destination confirms the message arrived'),
			}),
		]);
		expect(charges('u-1')).toHaveLength(1);
		expect(api.requests).toBe(1);
		expect(api.lookups.map((l) => l.path)).toEqual(['/v1/charges/by-order/u-1']);
		expect(await row('u-1')).toMatchObject({ status: 'completed', externalId: charge.id, result: expect.objectContaining({ check: expect.objectContaining({ outcome: 'found' }) }) });
	});

	test('it did not act, then dropped the connection: the check does not find it; sent again under the retry policy; once', async () => {
		api.setPlan(dropFirst(false));
		const r = await run(send(), 'u-2');
		expect(r.error).toBeUndefined();
		expect(facts(r, SENT)).toEqual([expect.objectContaining({ outcome: 'sent', attempts: 2, check: expect.objectContaining({ outcome: 'not_found' }) })]);
		expect(charges('u-2')).toHaveLength(1);
		expect(api.requests).toBe(2);
		expect(api.lookups).toHaveLength(1);
		expect(await row('u-2')).toMatchObject({ status: 'completed', externalId: charges('u-2')[0].id });
	});

	test('not found and no attempt left: failed, retry later (nothing went out); the next run sends it once', async () => {
		api.setPlan(dropFirst(false));
		const first = await run(send({ options: { ...(send().options as INodeParameters), maxAttempts: 1 } }), 'u-3');
		expect(facts(first, REVIEW)).toEqual([expect.objectContaining({ status: 'failed_retryable', reason: 'gave_up', check: expect.objectContaining({ outcome: 'not_found' }) })]);
		expect(charges('u-3')).toHaveLength(0);
		const second = await run(send(), 'u-3');
		expect(facts(second, SENT)).toHaveLength(1);
		expect(charges('u-3')).toHaveLength(1);
	});

	test('the check cannot tell (an answer that is neither found nor not found): Needs Review (ambiguous), with the check\'s detail; not sent again', async () => {
		api.setPlan(dropFirst(true));
		api.setLookupPlan(() => ({ kind: 'status', status: 403, body: { error: 'forbidden' } }));
		const r = await run(send(), 'u-4');
		const [item] = facts(r, REVIEW);
		expect(item).toMatchObject({ status: 'needs_review', reason: 'ambiguous', check: expect.objectContaining({ outcome: 'unknown' }) });
		expect(String(item.detail)).toMatch(/could not tell whether it arrived \(The check request .* answered HTTP 403/);
		expect(charges('u-4')).toHaveLength(1);
		expect(api.requests).toBe(1);
		expect(await row('u-4')).toMatchObject({ status: 'needs_review', result: expect.objectContaining({ reason: 'ambiguous', check: expect.objectContaining({ outcome: 'unknown' }) }) });
	});

	test('the check cannot answer for now (HTTP 500): In Progress (check_later), the step keeps its phase sending; the next delivery checks again and records it as sent, without a person and without a second send', async () => {
		api.setPlan(dropFirst(true));
		api.setLookupPlan(() => ({ kind: 'status', status: 500, body: { error: 'boom' } }));
		const r = await run(send(), 'u-4b');
		const [item] = facts(r, 3);
		expect(item).toMatchObject({ outcome: 'in_progress', reason: 'check_later', checks: 1, check: expect.objectContaining({ outcome: 'later' }) });
		expect(facts(r, REVIEW)).toEqual([]);
		expect(await row('u-4b')).toMatchObject({ status: 'failed_retryable', phase: 'sending', result: expect.objectContaining({ reason: 'check_later', checks: 1 }) });
		api.setLookupPlan(() => ({ kind: 'normal' }));
		const again = await run(send(), 'u-4b');
		expect(facts(again, 1)).toEqual([expect.objectContaining({ outcome: 'skipped', recovered: true })]);
		expect(charges('u-4b')).toHaveLength(1);
		expect(await row('u-4b')).toMatchObject({ status: 'completed', phase: null });
	});

	test('no check set up: Needs Review at once, as before; the API is not asked', async () => {
		api.setPlan(dropFirst(true));
		const r = await run(send({}, false), 'u-5');
		expect(facts(r, REVIEW)).toEqual([expect.objectContaining({ reason: 'ambiguous' })]);
		expect(facts(r, REVIEW)[0].check).toBeUndefined();
		expect(api.lookups).toHaveLength(0);
		expect(api.requests).toBe(1);
	});

	test('"Send Again (Accept a Possible Duplicate)": a check that finds it still stops the second send; one that cannot tell sends again, as before', async () => {
		api.setPlan(dropFirst(true));
		const found = await run(send({ onAmbiguous: 'send' }), 'u-6');
		expect(facts(found, SENT)).toEqual([expect.objectContaining({ attempts: 1, check: expect.objectContaining({ outcome: 'found' }) })]);
		expect(charges('u-6')).toHaveLength(1);

		await api.close();
		api = await stripeLikeServer({ honoursKey: false, plan: dropFirst(true), lookupPlan: () => ({ kind: 'status', status: 403 }) });
		const unknown = await run(send({ onAmbiguous: 'send' }), 'u-7');
		expect(facts(unknown, SENT)).toEqual([expect.objectContaining({ attempts: 2, check: expect.objectContaining({ outcome: 'unknown' }) })]);
		expect(charges('u-7')).toHaveLength(2);
	});
});
