/**
 * The workflows in examples/, imported into a real n8n (each version of test/e2e/support/matrix.js, the package installed the user's
 * way) exactly as the files are, and RUN against real local destinations.
 *
 * How a file gets in: POST /api/v1/workflows with its nodes and connections, the same import
 * path as `n8n import:workflow` and pasting into the editor. The files reference credentials by
 * NAME with placeholder ids; n8n resolves a reference whose id does not exist to the one
 * credential of that name and type (WorkflowHelpers.replaceInvalidCredentials). So the test
 * creates credentials with the names the files use (as examples/README.md tells a user to) and
 * checks that every node ended up with them. The first test also imports each file with
 * `n8n import:workflow --input=<file>`, the command examples/README.md gives.
 *
 * What the test changes in the files, and nothing else (all in `patch*` below):
 * - stripe-webhook-slack.json: Guarded Send's Slack option "Slack API URL" (absent in the file,
 *   so https://slack.com/api) points at the local Slack server.
 * - nightly-invoice-sync.json: the origin of the HTTP Request URL, https://billing.example.com,
 *   becomes the local billing API. The file's own "Run now (manual)" trigger is what
 *   `n8n execute` starts (the Schedule Trigger stays in the file, unused here).
 * - form-ai-crm.json: the origins https://api.openai.com and https://crm.example.com become the
 *   local OpenAI-compatible stand-in and the Stripe-like CRM.
 */
import { nodeOutput, startN8n, type N8nExecution, type N8nInstance } from './support/n8n';
import {
	credentialRefs,
	delayingProxy,
	invoice,
	invoiceApi,
	ledgerCredentialData,
	LedgerTables,
	examplePath,
	loadExample,
	n8nCommand,
	nodeNamed,
	openAiStandIn,
	uniqueLedgerTable,
	type DelayingProxy,
	type ExampleWorkflow,
	type InvoiceApi,
	type OpenAiStandIn,
} from './support/standIns';
import { slackServer, smtpServer, stripeLikeServer, type SlackServer, type SmtpTestServer, type StripeLikeServer } from '../support/destinations';

const table = uniqueLedgerTable('e2e_examples');
const ledger = new LedgerTables(table);
const SLACK_TOKEN = 'xoxb-e2e-examples';
const BILLING_KEY = 'billing-e2e-key';
const OPENAI_KEY = 'sk-e2e-examples';
const CRM_KEY = 'crm-e2e-key';

/** Replaces an origin in a node's URL parameter; fails loudly if the file no longer has it. */
function repoint(workflow: ExampleWorkflow, nodeName: string, from: string, to: string) {
	const node = nodeNamed(workflow, nodeName);
	const url = String(node.parameters.url ?? '');
	if (!url.startsWith(from)) throw new Error(`${nodeName}: URL ${url} does not start with ${from}`);
	node.parameters.url = to + url.slice(from.length);
}

describe('e2e: the example workflows in examples/, run in a real n8n', () => {
	let n8n: N8nInstance | undefined;
	let slack: SlackServer;
	let smtp: SmtpTestServer;
	let billing: InvoiceApi;
	let model: OpenAiStandIn;
	let crm: StripeLikeServer;
	const credentialIds = new Map<string, string>();
	const figures: string[] = [];

	beforeAll(async () => {
		[slack, smtp, billing, model, crm] = await Promise.all([
			slackServer({ token: SLACK_TOKEN }),
			smtpServer(),
			invoiceApi({ apiKey: BILLING_KEY }),
			openAiStandIn({ apiKey: OPENAI_KEY, reply: () => 'Enterprise' }),
			stripeLikeServer({ apiKey: CRM_KEY }),
		]);
		n8n = await startN8n({ withPackage: true });
		await n8n.setupOwner();
		await n8n.createApiKey();
		// The credentials examples/README.md tells a user to create, under the same names.
		const credentials: Array<{ name: string; type: string; data: Record<string, unknown> }> = [
			{ name: 'Idempotency Ledger', type: 'idempotencyPostgresApi', data: ledgerCredentialData(table) },
			{ name: 'Slack Bot', type: 'slackApi', data: { accessToken: SLACK_TOKEN } },
			{ name: 'SMTP', type: 'smtp', data: smtp.credential },
			{ name: 'Billing API', type: 'httpHeaderAuth', data: { name: 'Authorization', value: `Bearer ${BILLING_KEY}` } },
			{ name: 'OpenAI', type: 'openAiApi', data: { apiKey: OPENAI_KEY } },
			{ name: 'CRM API', type: 'httpHeaderAuth', data: { name: 'Authorization', value: `Bearer ${CRM_KEY}` } },
		];
		for (const c of credentials) credentialIds.set(`${c.type}/${c.name}`, (await n8n.createCredential(c)).id);
	});

	afterAll(async () => {
		if (n8n) console.log(`n8n log: ${n8n.logFile}\nexamples e2e figures:\n  ${figures.join('\n  ')}`);
		await n8n?.stop();
		await Promise.all([slack?.close(), smtp?.close(), billing?.close(), model?.close(), crm?.close()]);
		await ledger.drop();
	});

	/** Imports the (patched) example and checks every credential reference resolved to ours, by name. */
	async function importExample(workflow: ExampleWorkflow): Promise<string> {
		for (const node of workflow.nodes) {
			for (const ref of Object.values(node.credentials ?? {})) expect(ref.id).toMatch(/^replace-with-/); // no real ids or secrets in the file
		}
		const { id } = await n8n!.createWorkflow(workflow);
		const stored = await n8n!.api<ExampleWorkflow>('GET', `/workflows/${id}`);
		for (const [type, name] of credentialRefs(workflow)) {
			const want = credentialIds.get(`${type}/${name}`);
			expect(want).toBeDefined();
			for (const node of stored.nodes.filter((n) => n.credentials?.[type])) {
				expect({ node: node.name, type, id: node.credentials![type].id }).toEqual({ node: node.name, type, id: want });
			}
		}
		return id;
	}

	test('each file imports as README says, `n8n import:workflow --input=<file>`, with its credentials linked by name', async () => {
		for (const file of ['stripe-webhook-slack.json', 'nightly-invoice-sync.json', 'form-ai-crm.json']) {
			const example = loadExample(file);
			const result = await n8nCommand(n8n!, ['import:workflow', `--input=${examplePath(file)}`]);
			expect({ file, code: result.code, out: result.code === 0 ? '' : `${result.stdout}\n${result.stderr}`.slice(-2000) }).toEqual({ file, code: 0, out: '' });
			const listed = await n8n!.api<{ data: Array<{ id: string; name: string }> }>('GET', `/workflows?name=${encodeURIComponent(example.name)}`);
			expect(listed.data).toHaveLength(1);
			const stored = await n8n!.api<ExampleWorkflow>('GET', `/workflows/${listed.data[0].id}`);
			expect(stored.nodes.map((n) => n.name).sort()).toEqual(example.nodes.map((n) => n.name).sort());
			for (const node of stored.nodes) {
				for (const [type, ref] of Object.entries(node.credentials ?? {})) {
					expect({ node: node.name, id: ref.id }).toEqual({ node: node.name, id: credentialIds.get(`${type}/${ref.name}`) });
				}
			}
			// Out of the way of the API imports below (which run the same names).
			await n8n!.api('DELETE', `/workflows/${listed.data[0].id}`);
		}
	});

	describe('stripe-webhook-slack.json', () => {
		let workflowId: string;
		let slowSlack: DelayingProxy;
		const charge = (eventId: string, chargeId: string, amount: number) => ({
			id: eventId,
			object: 'event',
			type: 'charge.succeeded',
			created: 1795430000,
			livemode: false,
			data: { object: { id: chargeId, object: 'charge', amount, currency: 'usd', paid: true, billing_details: { email: 'jenny.rosen@example.com' } } },
		});

		beforeAll(async () => {
			const workflow = loadExample('stripe-webhook-slack.json');
			// PATCH: the Slack API URL (the file leaves it at its default, https://slack.com/api). It
			// goes through a proxy that can slow Slack down, for the concurrent-delivery test.
			slowSlack = await delayingProxy(slack.url);
			nodeNamed(workflow, 'Post to #payments').parameters.slackOptions = { apiUrl: `${slowSlack.url}/api` };
			workflowId = await importExample(workflow);
			await n8n!.activate(workflowId);
			await n8n!.waitForWebhook('stripe/charge-events');
		});

		test('the same charge event delivered three times: one Slack message, every delivery answered 200', async () => {
			const event = charge('evt_3PxE2e0001', 'ch_3PxE2e0001', 4999);
			const statuses: number[] = [];
			for (let i = 0; i < 3; i++) {
				const res = await n8n!.post('stripe/charge-events', event, { headers: { 'stripe-signature': 't=1,v1=e2e' } });
				statuses.push(res.status);
				if (i === 0) expect(res.body).toMatchObject({ received: true, event: event.id });
				else expect(res.body).toMatchObject({ received: true, duplicate: true, event: event.id });
			}
			expect(statuses).toEqual([200, 200, 200]);
			const messages = slack.messages.filter((m) => m.text.includes(event.id));
			expect(messages).toHaveLength(1);
			expect(messages[0]).toMatchObject({ channel: '#payments', token: SLACK_TOKEN });
			expect(messages[0].text).toContain('49.99 USD from jenny.rosen@example.com');

			const rows = await ledger.rows('namespace = $1 AND key = $2', [`workflow:${workflowId}`, event.id]);
			expect(rows.map((r) => [r.step, r.status])).toEqual([
				['', 'completed'],
				['slackNotify', 'completed'],
			]);
			expect(rows[1].external_id).toBe(messages[0].ts);
		});

		afterAll(() => slowSlack?.close());

		test('four deliveries of one event at the same moment: one Slack message; a delivery turned away while it runs gets 409 and a later retry gets 200', async () => {
			const event = charge('evt_3PxE2e0002', 'ch_3PxE2e0002', 12000);
			slowSlack.delayMs = 2000; // Slack takes 2 s to answer: the other deliveries arrive while the first one sends
			const burst = await Promise.all([0, 1, 2, 3].map(() => n8n!.post('stripe/charge-events', event)));
			slowSlack.delayMs = 0;
			const statuses = burst.map((r) => r.status);
			figures.push(`stripe burst of 4 (Slack answering in 2 s): statuses ${statuses.join(', ')}`);
			for (const s of statuses) expect([200, 409]).toContain(s);
			expect(statuses.filter((s) => s === 200)).toHaveLength(1);
			expect(burst.filter((r) => r.status === 409).every((r) => r.body?.received === false)).toBe(true);
			// Stripe retries what was not acknowledged; by now the first run has finished.
			for (const r of burst.filter((b) => b.status === 409)) {
				void r;
				const retry = await n8n!.post('stripe/charge-events', event);
				expect(retry.status).toBe(200);
				expect(retry.body).toMatchObject({ duplicate: true });
			}
			expect(slack.messages.filter((m) => m.text.includes(event.id))).toHaveLength(1);
		});
	});

	describe('nightly-invoice-sync.json (run with `n8n execute`, through the file\'s own Manual Trigger)', () => {
		let workflowId: string;
		const CHECKPOINT = 'overdue-invoice-reminders';
		const checkpoint = () => ledger.checkpoint(CHECKPOINT);
		const mailsTo = (id: number) => smtp.mails.filter((m) => m.to.includes(`billing+${id}@customer.example.com`));
		const run = async (label: string, allowFailure = false) => {
			const result = await n8n!.executeCli(workflowId, { allowFailure });
			figures.push(`nightly ${label}: n8n execute ${Math.round(result.ms)} ms, exit ${result.exitCode}`);
			return result;
		};

		beforeAll(async () => {
			billing.add(invoice(1000, { status: 'paid' }), invoice(1001), invoice(1002), invoice(1003));
			const workflow = loadExample('nightly-invoice-sync.json');
			// PATCH: the billing API's origin.
			repoint(workflow, 'Fetch overdue invoices', 'https://billing.example.com', billing.url);
			workflowId = await importExample(workflow);
		});

		test('first run: one reminder per open invoice, recorded, then the checkpoint moves to the last invoice of the page', async () => {
			expect(await checkpoint()).toBeNull();
			const { run: result } = await run('run 1');
			expect(result.data.resultData.error).toBeUndefined();
			expect(billing.requests.at(-1)).toMatchObject({ after: '0', authorization: `Bearer ${BILLING_KEY}` });
			for (const id of [1001, 1002, 1003]) expect(mailsTo(id)).toHaveLength(1);
			expect(mailsTo(1000)).toHaveLength(0);
			expect(mailsTo(1001)[0].subject).toBe('Reminder: invoice INV-1001 is overdue');
			expect(await checkpoint()).toBe('1003');
			const rows = await ledger.rows('namespace = $1', [`workflow:${workflowId}`]);
			expect(rows.map((r) => [r.key, r.step, r.status])).toEqual([
				['1001', '', 'completed'],
				['1001', 'reminderEmail', 'completed'],
				['1002', '', 'completed'],
				['1002', 'reminderEmail', 'completed'],
				['1003', '', 'completed'],
				['1003', 'reminderEmail', 'completed'],
			]);
		});

		test('second run, nothing new: asks the API from the checkpoint, sends nothing, the checkpoint stays', async () => {
			const mailsBefore = smtp.mails.length;
			const { run: result } = await run('run 2 (no new invoices)');
			expect(result.data.resultData.error).toBeUndefined();
			expect(billing.requests.at(-1)?.after).toBe('1003');
			expect(smtp.mails.length).toBe(mailsBefore);
			expect(await checkpoint()).toBe('1003');
		});

		test('the API adds invoices and the mail server fails in the middle of the page: the run fails, the checkpoint does NOT move', async () => {
			billing.add(invoice(1004), invoice(1005), invoice(1006));
			const base = smtp.requests;
			// The first mail of this run is accepted; every other attempt is refused (451, "try again later").
			smtp.setPlan((n) => (n === base + 1 ? { kind: 'normal' } : { kind: 'status', status: 451 }));
			const mailsBefore = smtp.mails.length;
			const { run: result, exitCode } = await run('run 3 (mail server failing)', true);
			smtp.setPlan(() => ({ kind: 'normal' }));

			expect(billing.requests.at(-1)?.after).toBe('1003');
			expect(smtp.mails.length).toBe(mailsBefore + 1); // one reminder went out before the failure
			expect(smtp.requests - base).toBeGreaterThan(1); // the others were attempted and refused
			const error = result?.data?.resultData?.error;
			expect(error).toBeDefined();
			expect(exitCode).not.toBe(0);
			expect(String(error.message)).toMatch(/Not every invoice of this page is done/);
			expect(String(error.message)).toMatch(/failed_retryable/);
			expect(result.data.resultData.runData['Set checkpoint']).toBeUndefined();
			expect(await checkpoint()).toBe('1003');
			const email = await ledger.rows(`namespace = $1 AND step = 'reminderEmail' AND key IN ('1004','1005','1006')`, [`workflow:${workflowId}`]);
			expect(email.map((r) => r.status).sort()).toEqual(['completed', 'failed_retryable', 'failed_retryable']);
		});

		test('the next run, mail server healthy: the same page again, only the missing reminders go out, the checkpoint advances', async () => {
			const { run: result } = await run('run 4 (recovery)');
			expect(result.data.resultData.error).toBeUndefined();
			expect(billing.requests.at(-1)?.after).toBe('1003');
			// Every invoice got exactly one reminder over all four runs.
			for (const id of [1001, 1002, 1003, 1004, 1005, 1006]) expect(mailsTo(id)).toHaveLength(1);
			expect(nodeOutput(result, 'Dedupe Gate', 1)).toHaveLength(1); // the one reminded in run 3
			expect(nodeOutput(result, 'Send reminder email', 0)).toHaveLength(2);
			expect(await checkpoint()).toBe('1006');
			const rows = await ledger.rows(`namespace = $1 AND key IN ('1004','1005','1006')`, [`workflow:${workflowId}`]);
			expect(rows.every((r) => r.status === 'completed')).toBe(true);
			expect(rows).toHaveLength(6);
		});
	});

	describe('form-ai-crm.json', () => {
		let workflowId: string;
		const submission = { name: 'Ada Lovelace', email: 'Ada.Lovelace@Example.com ', company: 'Analytical Engines Ltd', message: 'We need 500 seats for our engineering team.' };

		beforeAll(async () => {
			const workflow = loadExample('form-ai-crm.json');
			// PATCH: the OpenAI and CRM origins.
			repoint(workflow, 'Classify lead (OpenAI)', 'https://api.openai.com', model.url);
			repoint(workflow, 'Create CRM contact', 'https://crm.example.com', crm.url);
			workflowId = await importExample(workflow);
			await n8n!.activate(workflowId);
			await n8n!.waitForWebhook('forms/contact');
		});

		async function submit(body: unknown): Promise<N8nExecution> {
			const before = (await n8n!.executions(workflowId, { includeData: false })).length;
			const res = await n8n!.post('forms/contact', body);
			expect(res.status).toBe(200);
			const executions = await n8n!.waitForExecutions(workflowId, before + 1, { includeData: true, timeoutMs: 120_000 });
			expect(executions[0].status).toBe('success');
			return executions[0];
		}

		test('the same submission twice: one classifier call, one CRM contact, one Idempotency-Key', async () => {
			const first = await submit(submission);
			const second = await submit(submission);

			expect(model.calls).toHaveLength(1);
			expect(model.calls[0].authorization).toBe(`Bearer ${OPENAI_KEY}`);
			expect(nodeOutput(first, 'Lead')[0]).toMatchObject({ email: 'ada.lovelace@example.com', segment: 'enterprise', classifier: 'stored' });
			expect(nodeOutput(second, 'Lead')[0]).toMatchObject({ email: 'ada.lovelace@example.com', segment: 'enterprise', classifier: 'hit' });

			expect(crm.actions).toHaveLength(1);
			expect(crm.actions[0].body).toMatchObject({ email: 'ada.lovelace@example.com', segment: 'enterprise', company: 'Analytical Engines Ltd' });
			const sent = nodeOutput(first, 'Create CRM contact', 0);
			expect(sent).toHaveLength(1);
			const key = sent[0].idempotency.idempotencyKey as string;
			expect(crm.actions[0].key).toBe(key);
			expect([...crm.keysSeen.keys()]).toEqual([key]);
			const skipped = nodeOutput(second, 'Create CRM contact', 1);
			expect(skipped).toHaveLength(1);
			expect(skipped[0].idempotency).toMatchObject({ outcome: 'skipped', externalId: crm.actions[0].id });
		});

		test('the CRM acts but its answer is lost: the retry carries the same Idempotency-Key, the CRM replays, still one contact', async () => {
			const other = { ...submission, name: 'Grace Hopper', email: 'grace@navy.example.com', company: 'COBOL Works', message: 'Pricing for a team of 40?' };
			const base = crm.requests;
			const actionsBefore = crm.actions.length;
			const replaysBefore = crm.replays;
			// The first request creates the contact, then never answers (Guarded Send times out after 10 s).
			crm.setPlan((n) => (n === base + 1 ? { kind: 'hang' } : { kind: 'normal' }));
			const started = Date.now();
			const first = await submit(other);
			crm.setPlan(() => ({ kind: 'normal' }));
			figures.push(`form, CRM answer lost: execution took ${Date.now() - started} ms`);

			expect(crm.actions.length).toBe(actionsBefore + 1);
			expect(crm.replays).toBe(replaysBefore + 1);
			const sent = nodeOutput(first, 'Create CRM contact', 0);
			expect(sent).toHaveLength(1);
			const key = sent[0].idempotency.idempotencyKey as string;
			expect(crm.keysSeen.get(key)).toBe(2);
			expect(crm.actions.at(-1)).toMatchObject({ key });
			expect(sent[0].idempotency.externalId).toBe(crm.actions.at(-1)!.id);

			await submit(other);
			expect(crm.actions.length).toBe(actionsBefore + 1);
			expect(crm.keysSeen.get(key)).toBe(2);
			// Both submissions of this form were classified once; the model saw two distinct leads in all.
			expect(model.calls).toHaveLength(2);
		});
	});
});
