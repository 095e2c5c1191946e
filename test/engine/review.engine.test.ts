/**
 * Review → Ask Once and Review → Settle through n8n-core's real engine, on the real PostgreSQL.
 * Needs Review items are made as Guarded Send makes them (a row the ledger holds on
 * needs_review, the facts on the item); the person's answer is given as Send and Wait gives it
 * (`data["What happened?"]`, `data["Your name"]`). Racing runs ask once; an answer about a step
 * that was settled since changes nothing; bad items fail alone.
 */
import { closeAllPostgresLedgers } from '../../lib/ledger';
import { IdempotencyLedger } from '../../nodes/IdempotencyLedger/IdempotencyLedger.node';
import { LEDGER_TYPE, ledgerFixture, type LedgerFixture } from '../integration/idempotencyLedger.support';
import { chain, node, runWorkflow } from '../support/engine';

let f: LedgerFixture;
const NS = 'workflow:shop';
const DAY = 86_400_000;

beforeAll(async () => {
	f = await ledgerFixture('review');
});

afterAll(async () => {
	await closeAllPostgresLedgers();
	await f.dispose();
});

/** A step left on Needs Review by a run that may have sent it; returns its fence. */
async function heldStep(key: string, step = 'slackNotify'): Promise<number> {
	const [claim] = await f.ledger.claim([{ namespace: NS, key, step, fingerprint: null }], { mode: 'lease', holder: 'execution:1', leaseMs: 60_000, ttlMs: DAY });
	const fence = (claim as { record: { fence: number } }).record.fence;
	await f.ledger.record([{ namespace: NS, key, step, status: 'needs_review', fence, result: { reason: 'ambiguous' } }], { ttlMs: DAY });
	return fence;
}

/** The item Guarded Send puts on Needs Review. */
const reviewItem = (key: string, step = 'slackNotify') => ({
	body: { eventId: key, amount: 1200, apiKey: 'sk_live_secret' },
	headers: { authorization: 'Bearer x' },
	idempotency: { outcome: 'needs_review', namespace: NS, key, step, reason: 'ambiguous' },
});

const run = (items: object[], answer?: { what: string; who: string }) => {
	const nodes = [
		node('Start', 'test.manualTrigger'),
		node('Needs Review', 'test.items', { items: JSON.stringify(items) }),
		node('Ask a Person Once', LEDGER_TYPE, { resource: 'review', operation: 'ask' }, { continueOnFail: true }),
	];
	const names = ['Start', 'Needs Review', 'Ask a Person Once'];
	if (answer) {
		// Send and Wait's reply replaces the item: only the form's fields are left on $json.
		nodes.push(node('Reply', 'test.items', { items: JSON.stringify([{ data: { 'What happened?': answer.what, 'Your name': answer.who } }]) }));
		nodes.push(node('Settle the Answer', LEDGER_TYPE, { resource: 'review', operation: 'settle' }, { continueOnFail: true }));
		names.push('Reply', 'Settle the Answer');
	}
	return runWorkflow(
		{ name: 'review', nodes, connections: chain(...names) },
		{ credentials: f.credentials as never, nodeTypes: { [LEDGER_TYPE]: new IdempotencyLedger() }, workflowId: 'shop', mode: 'trigger' },
	);
};

/** A reply to an earlier question: Settle fed the item Ask Once put out then. */
const settle = (asked: object, what: string, who: string) =>
	runWorkflow(
		{
			name: 'a later answer',
			nodes: [
				node('Start', 'test.manualTrigger'),
				node('Reply', 'test.items', { items: JSON.stringify([{ data: { 'What happened?': what, 'Your name': who } }]) }),
				node('Settle', LEDGER_TYPE, { resource: 'review', operation: 'settle', askedItem: JSON.stringify(asked) }),
			],
			connections: chain('Start', 'Reply', 'Settle'),
		},
		{ credentials: f.credentials as never, nodeTypes: { [LEDGER_TYPE]: new IdempotencyLedger() }, workflowId: 'shop', mode: 'trigger' },
	);

test('Ask Once puts the evidence in words, without secrets; racing runs and a second run ask once', async () => {
	const fence = await heldStep('evt_1');
	const runs = await Promise.all([run([reviewItem('evt_1')]), run([reviewItem('evt_1')]), run([reviewItem('evt_1')])]);
	const asked = runs.flatMap((r) => r.items('Ask a Person Once'));
	expect(asked).toHaveLength(1);
	const review = asked[0].json.review as Record<string, any>;
	expect(review).toMatchObject({ namespace: NS, key: 'evt_1', step: 'slackNotify', fence, reason: 'ambiguous', check: null });
	expect(review.message).toContain('Key: evt_1');
	expect(review.message).toContain('Destination check: none was set up');
	expect(review.payload).toEqual(['eventId: evt_1', 'amount: 1200', 'apiKey: (hidden)']);
	expect(JSON.stringify(review)).not.toContain('sk_live_secret');
	expect(review.choices).toEqual(['It was sent', 'Send it again', 'Drop it']);
	expect((await run([reviewItem('evt_1')])).items('Ask a Person Once')).toHaveLength(0);
});

test('Ask Once asks about one item per run, as Send and Wait sends one message per run; the others are asked about on later runs', async () => {
	await heldStep('evt_b1');
	await heldStep('evt_b2');
	const batch = [reviewItem('evt_b1'), reviewItem('evt_b2')];
	const first = await run(batch);
	expect(first.items('Ask a Person Once').map((i) => (i.json.review as { key: string }).key)).toEqual(['evt_b1']);
	const second = await run(batch);
	expect(second.items('Ask a Person Once').map((i) => (i.json.review as { key: string }).key)).toEqual(['evt_b2']);
	expect((await run(batch)).items('Ask a Person Once')).toHaveLength(0);
});

test('Settle: "Drop it" settles the step for good, with who; a second answer, or one after a release, changes nothing and says so', async () => {
	await heldStep('evt_2');
	const first = await run([reviewItem('evt_2')], { what: 'Drop it', who: 'Ann' });
	const [settled] = first.items('Settle the Answer');
	expect(settled.json.review).toMatchObject({ decision: 'drop', answeredBy: 'Ann', applied: true, outcome: 'Recorded as dropped: it will not be sent.' });
	// The held item comes back as it was, for the flow to take it back to its step.
	expect(settled.json.body).toEqual({ eventId: 'evt_2', amount: 1200, apiKey: 'sk_live_secret' });
	const [row] = await f.ledger.get(NS, 'evt_2');
	expect(row).toMatchObject({ status: 'completed', result: expect.objectContaining({ resolution: 'dropped', resolvedBy: 'Ann' }) });
	const audit = await f.count("SELECT count(*) AS n FROM {audit} WHERE key = 'evt_2' AND action = 'resolve_dropped' AND actor = 'Ann'");
	expect(audit).toBe(1);

	// A second answer to the same question (Settle fed the item Ask Once put out before).
	const asked = first.items('Ask a Person Once')[0].json;
	const again = await settle(asked, 'Send it again', 'Bo');
	expect(again.items('Settle')[0].json.review).toMatchObject({ decision: 'send_again', applied: false, outcome: 'Nothing changed: the step was settled already (it is completed, by Ann).' });
	expect((await f.ledger.get(NS, 'evt_2'))[0].result).toMatchObject({ resolution: 'dropped' });

	// Settled another way (an operator's release) between the question and the answer.
	await heldStep('evt_3');
	const asking = await run([reviewItem('evt_3')]);
	const askedAbout = asking.items('Ask a Person Once')[0].json;
	await f.ledger.release({ namespace: NS, key: 'evt_3', step: 'slackNotify', releasedBy: 'on-call', resolution: 'not_sent', ttlMs: DAY });
	const late = await settle(askedAbout, 'It was sent', 'Cy');
	expect(late.items('Settle')[0].json.review).toMatchObject({ applied: false, outcome: expect.stringMatching(/^Nothing changed: the step was settled already/) });
	expect(await f.ledger.get(NS, 'evt_3')).toEqual([]);
});

test('bad input: an item not from Needs Review, and an answer that is not one of the three, fail alone with words a person can act on', async () => {
	await heldStep('evt_4');
	const asked = await run([{ body: { eventId: 'x' } }, reviewItem('evt_4')]);
	const out = asked.items('Ask a Person Once');
	expect(out).toHaveLength(2);
	expect(out[0].json.error).toMatch(/not from a Needs Review output/);
	expect(out[1].json.review).toMatchObject({ key: 'evt_4' });

	await heldStep('evt_5');
	const wrong = await run([reviewItem('evt_5')], { what: 'Maybe', who: 'Di' });
	expect(wrong.items('Settle the Answer')[0].json.error).toMatch(/The answer "Maybe" is not one of "It was sent", "Send it again", "Drop it"/);
	expect((await f.ledger.get(NS, 'evt_5'))[0].status).toBe('needs_review');
});

test('the dashboard lists the steps waiting for a person, not the marks of the questions asked about them', async () => {
	await heldStep('evt_d1');
	await run([reviewItem('evt_d1')]);
	const page = await runWorkflow(
		{ name: 'dashboard', nodes: [node('Start', 'test.manualTrigger'), node('Dashboard', LEDGER_TYPE, { resource: 'ledger', operation: 'dashboard', maxNamespaces: 1, rowsPerList: 50 })], connections: chain('Start', 'Dashboard') },
		{ credentials: f.credentials as never, nodeTypes: { [LEDGER_TYPE]: new IdempotencyLedger() }, workflowId: 'shop', mode: 'trigger' },
	);
	const html = page.items('Dashboard')[0].json.html as string;
	expect(html).toContain('evt_d1');
	expect(html).toContain(NS);
	expect(html).not.toContain(`review:${NS}`);
});

test('a Start Step item (a region that may have run) is asked about in its own words', async () => {
	await heldStep('evt_s1', 'createInvoice');
	const item = { ...reviewItem('evt_s1', 'createInvoice'), idempotency: { outcome: 'needs_review', namespace: NS, key: 'evt_s1', step: 'createInvoice', reason: 'may_have_run' } };
	const [asked] = (await run([item])).items('Ask a Person Once');
	expect(asked.json.review).toMatchObject({ step: 'createInvoice', reason: 'may_have_run', why: expect.stringMatching(/^An earlier run may have done this step/) });
	expect((asked.json.review as { message: string }).message).toContain('Was "createInvoice" done for evt_s1?');
});
