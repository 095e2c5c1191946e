/**
 * Needs Review settled by a person, in a REAL n8n: examples/needs-review-by-email.json and
 * examples/needs-review-by-slack.json, run as imported (only the credentials, the Slack URL of
 * Guarded Send and the leases changed). Guarded Send posts to a local Slack; the person is asked
 * through n8n's own "Send and Wait for Response": Send Email through a local SMTP server, and the
 * Slack node through slack.com on this machine (support/slackDotCom.ts). In each flow two sends
 * die with n8n under `kill -9`: one had reached Slack, one had not. Their redeliveries land on
 * Needs Review, Ask Once asks, and the test follows the button of the mail or Slack message as a
 * person would (the form page, then its submission):
 *   - "It was sent": the step is completed by that person, the held event goes on as Skipped, and
 *     nothing more reaches Slack, then or on the next delivery;
 *   - "Send it again": exactly one more Slack message;
 *   - the review flow run twice for one row asks once; a second click changes nothing;
 *   - a `kill -9` while the questions wait loses none of them.
 */
import { readFileSync } from 'node:fs';
import { performance } from 'perf_hooks';

import { slackServer, smtpServer, type SlackServer, type SmtpTestServer } from '../support/destinations';
import { slackDotCom, type SlackDotCom } from '../support/slackDotCom';
import { faultyFront, type FaultyFront } from './support/faultyFront';
import { createCredentials, ledgerTable, uniqueLedgerTable, type CredentialRef } from './support/guardedWorkflows';
import { nodeOutput, request, startN8n, type N8nExecution, type N8nInstance, type WorkflowJson } from './support/n8n';
import { examplePath } from './support/standIns';

const SLACK_TOKEN = 'xoxb-e2e-token';
const REVIEW_CHANNEL = 'C0REVIEW01';
const table = uniqueLedgerTable('e2e_review');
const ledger = ledgerTable(table);

let n8n: N8nInstance | undefined;
let slack: SlackServer;
let smtp: SmtpTestServer;
let front: FaultyFront;
let slackCom: SlackDotCom;
let creds: { ledger: CredentialRef; slack: CredentialRef; smtp: CredentialRef };
const started = performance.now();

interface Flow {
	file: string;
	path: string;
	/** The event whose first send reached Slack, and the one whose first send never arrived. */
	sent: string;
	lost: string;
	workflowId: string;
	ns: string;
	/** The questions this flow asked about an event, as the person sees them: text and answer link. */
	questions(eventId: string): Array<{ text: string; link: string }>;
}

/** A quoted-printable mail as its UTF-8 text. */
const decoded = (raw: string) =>
	Buffer.from(raw.replace(/=\r?\n/g, '').replace(/=([0-9A-F]{2})/g, (_, h) => String.fromCharCode(parseInt(h, 16))), 'latin1').toString('utf8');

const html = (text: string) => text.replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&amp;/g, '&');

const flows: Record<'email' | 'slack', Flow> = {
	email: {
		file: 'needs-review-by-email.json',
		path: 'needs-review/email',
		sent: 'evt_mail_sent',
		lost: 'evt_mail_lost',
		workflowId: '',
		ns: '',
		questions: (eventId) =>
			smtp.mails
				.map((m) => decoded(m.raw))
				.filter((text) => text.includes(`Key: ${eventId}`))
				.map((text) => ({ text: html(text), link: html(/href="(http[^"]*\/webhook-waiting\/[^"]*)"/.exec(text)?.[1] ?? '') })),
	},
	slack: {
		file: 'needs-review-by-slack.json',
		path: 'needs-review/slack',
		sent: 'evt_slack_sent',
		lost: 'evt_slack_lost',
		workflowId: '',
		ns: '',
		questions: (eventId) =>
			slack.messages
				.filter((m) => m.channel === REVIEW_CHANNEL)
				.map((m) => {
					const blocks = (m.blocks ?? []) as Array<{ text?: { text?: string }; elements?: Array<{ url?: string }> }>;
					return { text: html(blocks.map((b) => b.text?.text ?? '').join('\n')), link: blocks.flatMap((b) => b.elements ?? []).find((e) => e.url)?.url ?? '' };
				})
				.filter((q) => q.text.includes(`Key: ${eventId}`)),
	},
};

const event = (eventId: string) => ({ eventId, type: 'order.paid', amount: 1200, cardNumber: '4242424242424242' });
const posted = (eventId: string) => slack.messages.filter((m) => m.text === `Order paid: ${eventId}`);

/** A recipe as a person imports it, pointed at the local servers, with leases short enough for a test. */
function imported(flow: Flow): WorkflowJson {
	const wf = JSON.parse(readFileSync(examplePath(flow.file), 'utf8'));
	for (const n of wf.nodes) {
		if (n.credentials?.idempotencyPostgresApi) n.credentials.idempotencyPostgresApi = creds.ledger;
		if (n.credentials?.slackApi) n.credentials.slackApi = creds.slack;
		if (n.credentials?.smtp) n.credentials.smtp = creds.smtp;
		if (n.name === 'Dedupe Gate') Object.assign(n.parameters.options, { lease: 3, leaseUnit: 'seconds' });
		if (n.name === 'Notify Slack') {
			Object.assign(n.parameters.options, { lease: 12, leaseUnit: 'seconds', timeout: 10, maxAttempts: 1 });
			n.parameters.slackOptions = { apiUrl: `${front.url}/api` };
		}
	}
	return wf;
}

/** What a person does: opens the form, picks an answer, types their name, submits. */
async function answer(link: string, what: string, name: string) {
	const page = await request('GET', link, { timeoutMs: 10_000 });
	expect(page.status).toBe(200);
	expect(page.text).toContain(what);
	const boundary = `----review${Date.now()}`;
	const part = (field: string, value: string) => `--${boundary}\r\nContent-Disposition: form-data; name="${field}"\r\n\r\n${value}\r\n`;
	const submitted = await request('POST', link, {
		headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
		body: `${part('field-0', what)}${part('field-1', name)}--${boundary}--\r\n`,
		timeoutMs: 10_000,
	});
	expect(submitted.status).toBe(200);
}

const executions = (flow: Flow, status?: string): Promise<N8nExecution[]> => n8n!.executions(flow.workflowId, { includeData: true, ...(status ? { status } : {}) });

async function until<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 60_000): Promise<T> {
	const deadline = Date.now() + timeoutMs;
	for (;;) {
		const v = await probe();
		if (v) return v;
		if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
		await new Promise((r) => setTimeout(r, 250));
	}
}

/** The run that waited for the answer about `key`, once it has ended. */
const settledRun = (flow: Flow, key: string) =>
	until(`the run that asked about ${key} to end`, async () =>
		(await executions(flow, 'success')).find((e) => nodeOutput(e, 'Settle the Answer', 0).some((j) => j.review?.key === key)),
	);

const stepRow = async (flow: Flow, key: string) => (await ledger.rows(flow.ns, key)).find((r) => r.step === 'slackNotify');

beforeAll(async () => {
	[slack, smtp] = await Promise.all([slackServer({ token: SLACK_TOKEN }), smtpServer()]);
	slackCom = await slackDotCom(slack.url);
	const sent = new Set(Object.values(flows).map((f) => `Order paid: ${f.sent}`));
	const lost = new Set(Object.values(flows).map((f) => `Order paid: ${f.lost}`));
	front = await faultyFront({
		upstream: slack.url,
		identify: (r) => String(r.body?.text ?? r.path),
		// A first send of a "sent" event reaches Slack and never hears back; of a "lost" one, never arrives.
		rule: (r) => (r.seen === 1 && sent.has(r.body?.text) ? { kind: 'hangAfter' } : r.seen === 1 && lost.has(r.body?.text) ? { kind: 'hangBefore' } : { kind: 'forward' }),
	});
	n8n = await startN8n({ withPackage: true, env: slackCom.env });
	await n8n.setupOwner();
	await n8n.createApiKey();
	const made = await createCredentials(n8n, table, SLACK_TOKEN);
	const mail = await n8n.createCredential({ name: 'SMTP', type: 'smtp', data: smtp.credential });
	creds = { ...made, smtp: { id: mail.id, name: mail.name } };
	for (const flow of Object.values(flows)) {
		flow.workflowId = await n8n.deploy(imported(flow));
		flow.ns = `workflow:${flow.workflowId}`;
	}
});

afterAll(async () => {
	if (n8n) console.log(`n8n log: ${n8n.logFile}`);
	await n8n?.stop();
	await Promise.all([slack?.close(), smtp?.close(), front?.close(), slackCom?.close()]);
	await ledger.drop();
	console.log(`needs review: ${((performance.now() - started) / 1000).toFixed(1)} s`);
});

test('a kill -9 mid-send, then a person answers by email and in Slack: "It was sent" sends nothing more, "Send it again" sends once, a second click, a second run and a kill -9 while waiting change nothing', async () => {
	const all = Object.values(flows);
	// Four sends in flight when n8n dies: each flow's "sent" event reached Slack, its "lost" one did not.
	for (const flow of all) for (const id of [flow.sent, flow.lost]) expect((await n8n!.post(flow.path, event(id))).status).toBe(200);
	for (const flow of all) for (const id of [flow.sent, flow.lost]) await front.waitFor((r) => r.body?.text === `Order paid: ${id}`);
	await n8n!.kill('SIGKILL');
	await n8n!.restart();
	for (const flow of all) {
		await n8n!.waitForWebhook(flow.path);
		await ledger.waitForLeasesToLapse(flow.ns, [flow.sent, flow.lost]);
		expect(posted(flow.sent)).toHaveLength(1);
		expect(posted(flow.lost)).toHaveLength(0);
	}

	// The redeliveries: nothing sent again; each event waits for a person, who is asked once, with the evidence.
	for (const flow of all) for (const id of [flow.sent, flow.lost]) await n8n!.post(flow.path, event(id));
	for (const flow of all) {
		await until(`two waiting ${flow.file} executions`, async () => (await executions(flow, 'waiting')).length === 2);
		for (const id of [flow.sent, flow.lost]) {
			expect(flow.questions(id)).toHaveLength(1);
			expect(await stepRow(flow, id)).toMatchObject({ status: 'needs_review' });
		}
		const [question] = flow.questions(flow.sent);
		expect(question.text).toContain(`Was "slackNotify" done for ${flow.sent}?`);
		// Guarded Send's check could not look (the channel is a name, not an ID), and the question says so.
		expect(question.text).toMatch(/Destination check: unknown: Slack can only show the history of a channel given by its ID/);
		expect(question.text).toContain('amount: 1200');
		expect(question.text).toContain('cardNumber: (hidden)');
		expect(question.text).not.toContain('4242424242424242');
		expect(question.link).toMatch(/\/webhook-waiting\//);
	}
	const [mail] = smtp.mails;
	expect(mail.to).toEqual(['ops@example.com']);
	// n8n's Slack node reached "slack.com" through the proxy, and nothing else.
	expect(new Set(slackCom.connects)).toEqual(new Set(['slack.com:443']));

	// The review flow runs again for each "sent" event (another redelivery): nobody is asked twice.
	for (const flow of all) await n8n!.post(flow.path, event(flow.sent));
	for (const flow of all) await until(`the second run of ${flow.sent}`, async () => (await executions(flow, 'success')).length >= 1);
	for (const flow of all) expect(flow.questions(flow.sent)).toHaveLength(1);
	expect(smtp.mails).toHaveLength(2);
	expect(slack.messages.filter((m) => m.channel === REVIEW_CHANNEL)).toHaveLength(2);

	// n8n dies again while all four wait for a person; the answers still reach them after the restart.
	await n8n!.kill('SIGKILL');
	await n8n!.restart();
	for (const flow of all) {
		await n8n!.waitForWebhook(flow.path);
		expect(await executions(flow, 'waiting')).toHaveLength(2);
	}

	for (const [channel, flow] of Object.entries(flows)) {
		// "It was sent", by Ann: completed by her word, the held event goes on as Skipped, nothing sent.
		const sentLink = flow.questions(flow.sent)[0].link;
		await answer(sentLink, 'It was sent', `Ann (${channel})`);
		const afterSent = await settledRun(flow, flow.sent);
		const [settled] = nodeOutput(afterSent, 'Settle the Answer', 0);
		expect(settled.review).toMatchObject({ decision: 'sent', answeredBy: `Ann (${channel})`, applied: true, key: flow.sent });
		expect(settled.body.eventId).toBe(flow.sent);
		expect(nodeOutput(afterSent, 'Notify Slack', 1, 1).map((j) => j.idempotency)).toEqual([
			expect.objectContaining({ outcome: 'skipped', reason: 'already_sent', status: 'completed' }),
		]);
		expect(await stepRow(flow, flow.sent)).toMatchObject({ status: 'completed', result: expect.objectContaining({ resolution: 'sent', resolvedBy: `Ann (${channel})` }) });
		expect((await ledger.audit(flow.ns)).filter((a) => a.key === flow.sent)).toEqual([
			expect.objectContaining({ action: 'resolve_sent', actor: `Ann (${channel})`, step: 'slackNotify' }),
		]);
		expect(posted(flow.sent)).toHaveLength(1);

		// "Send it again", by Bo: exactly one more message.
		await answer(flow.questions(flow.lost)[0].link, 'Send it again', `Bo (${channel})`);
		const afterLost = await settledRun(flow, flow.lost);
		expect(nodeOutput(afterLost, 'Notify Slack', 0, 1).map((j) => j.idempotency)).toEqual([expect.objectContaining({ outcome: 'sent' })]);
		expect(posted(flow.lost)).toHaveLength(1);
		expect(await stepRow(flow, flow.lost)).toMatchObject({ status: 'completed' });
		expect((await ledger.audit(flow.ns)).filter((a) => a.key === flow.lost)).toEqual([expect.objectContaining({ action: 'release', actor: `Bo (${channel})` })]);

		// A second click on the first question, and one more delivery of each event: nothing changes.
		const auditBefore = (await ledger.audit(flow.ns)).length;
		const reopened = await request('GET', sentLink, { timeoutMs: 10_000 });
		const resubmitted = await request('POST', sentLink, { headers: { 'content-type': 'multipart/form-data; boundary=x' }, body: '--x--\r\n', timeoutMs: 10_000 });
		console.log(`${channel}: a second click on an answered question: GET ${reopened.status}, POST ${resubmitted.status}`);
		for (const id of [flow.sent, flow.lost]) await n8n!.post(flow.path, event(id));
		await new Promise((r) => setTimeout(r, 2000));
		expect(posted(flow.sent)).toHaveLength(1);
		expect(posted(flow.lost)).toHaveLength(1);
		expect(await ledger.audit(flow.ns)).toHaveLength(auditBefore);
		expect(await stepRow(flow, flow.sent)).toMatchObject({ result: expect.objectContaining({ resolution: 'sent', resolvedBy: `Ann (${channel})` }) });
	}
	expect(smtp.mails).toHaveLength(2);
	expect(slack.messages.filter((m) => m.channel === REVIEW_CHANNEL)).toHaveLength(2);
});
