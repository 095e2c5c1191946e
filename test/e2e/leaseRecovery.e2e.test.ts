/**
 * Crash recovery that follows the real state of the run, in a REAL n8n (each version of
 * test/e2e/support/matrix.js, the package installed the user's way).
 *
 *   Webhook (Respond: Using 'Respond to Webhook' Node) → Dedupe Gate ─ New ─────────→ HTTP Request (the destination) → Respond 200 {outcome: new}
 *                                                                   ─ Duplicate ───→ Respond 200 {outcome: duplicate}
 *                                                                   ─ In Progress ─→ Respond 409 {outcome: in_progress, reason}
 *
 * The gate has every setting at its default (Mark Keys Done: When the Execution Succeeds; Lease:
 * 10 minutes); only its credential and its Key (`{{ $json.body.id }}`, the event's id, as the
 * README's webhook recipe says) are set. The destination is a local stand-in that counts calls
 * and can hang until told, or take 3 minutes.
 *
 *   A. kill -9 of n8n while the destination holds the call; restart; the sender redelivers every
 *      2 s. The gate held the key under a 30 s lease that the dead process no longer renews, so a
 *      redelivery goes through well within 60 s of the kill (restart included), not 10 minutes.
 *      The destination sees the event twice: once from the dead run, once from the redelivery.
 *      That is Dedupe Gate as designed: once a run is proven dead, the event goes through again,
 *      and the destination here is not idempotent. A side effect that must happen once even
 *      across a crash is what Guarded Send is for (test/e2e/guardedFlows.e2e.test.ts).
 *   B. A destination that takes 3 minutes, far past the 30 s lease: the live run renews its lease
 *      every 10 s and never loses the key. Redeliveries every 15 s during those 3 minutes are all
 *      In Progress, the destination is called once, and a redelivery after the run is a Duplicate.
 *
 *   C. Guarded Send after a kill -9 mid-send, its lease settings at their defaults (Hold Step For
 *      5 minutes): Webhook → Dedupe Gate → Guarded Send (an HTTP API that does not honour the
 *      key, with a check request) while the API holds the call. Its step lease is kept like the
 *      gate's (30 s, renewed), so a redelivery 35 s after the kill finds the step free: the check
 *      finds the charge the dead run made, and the step is recorded as sent (Skipped, recovered),
 *      not In Progress for 5 minutes. The API acted once.
 *
 * Cost: B is 3 minutes of waiting on the slow destination, so it runs on an n8n of its own, booted
 * beside the first one and started in beforeAll, while A and C (about 1.5 minutes, 35 s of C
 * waiting for the leases to lapse) kill and restart the other: the file takes about B's time plus
 * the boots instead of the sum (290 s in CI on 2.41.1 when they ran one after the other). B's test
 * awaits that run and asserts on it as before. A and C never touch B's n8n (its own port, database,
 * user folder and workflow; the event ids differ in the shared destination and ledger table).
 *
 * Both n8n are stopped in afterAll whatever happened.
 */
import { randomUUID } from 'crypto';
import http from 'http';
import type { AddressInfo } from 'net';
import { performance } from 'perf_hooks';

import { stripeLikeServer, type StripeLikeServer } from '../support/destinations';
import { startN8n, type HttpResponse, type N8nInstance } from './support/n8n';
import { ledgerCredentialData, LedgerTables, nodePlacer, uniqueLedgerTable } from './support/standIns';

const table = uniqueLedgerTable('e2e_lease');
const ledger = new LedgerTables(table);
const figures: Record<string, string> = {};
const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/* ------------------------------------------------------------------------------------------ */
/* The destination: counts calls; each call hangs until told, waits, or answers at once        */
/* ------------------------------------------------------------------------------------------ */

type Behaviour = { kind: 'answer' } | { kind: 'hang' } | { kind: 'slow'; ms: number };

interface Destination {
	url: string;
	/** Calls received, in order, with the event each was about. */
	calls: Array<{ event: string; at: number }>;
	callsFor(event: string): number;
	/** How the next calls for `event` behave (default: answer at once). */
	plan(event: string, behaviour: Behaviour): void;
	/** Resolves when the destination has received `count` calls for `event`. */
	waitForCalls(event: string, count: number, timeoutMs?: number): Promise<void>;
	close(): Promise<void>;
}

async function destination(): Promise<Destination> {
	const calls: Destination['calls'] = [];
	const plans = new Map<string, Behaviour>();
	const waiters: Array<() => void> = [];
	const server = http.createServer((req, res) => {
		const chunks: Buffer[] = [];
		req.on('data', (c: Buffer) => chunks.push(c));
		req.on('end', () => {
			let event = '';
			try {
				event = String(JSON.parse(Buffer.concat(chunks).toString('utf8')).event);
			} catch {
				// not JSON: counted under ''
			}
			calls.push({ event, at: performance.now() });
			waiters.splice(0).forEach((w) => w());
			const answer = () => {
				if (res.writableEnded || res.destroyed) return;
				res.writeHead(200, { 'content-type': 'application/json' });
				res.end(JSON.stringify({ ok: true, event, call: calls.length }));
			};
			const plan = plans.get(event) ?? { kind: 'answer' };
			if (plan.kind === 'hang') return; // until the connection dies with n8n
			if (plan.kind === 'slow') setTimeout(answer, plan.ms);
			else answer();
		});
		req.on('error', () => undefined);
		res.on('error', () => undefined);
	});
	await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
	const callsFor = (event: string) => calls.filter((c) => c.event === event).length;
	return {
		url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
		calls,
		callsFor,
		plan: (event, behaviour) => plans.set(event, behaviour),
		async waitForCalls(event, count, timeoutMs = 60_000) {
			const deadline = Date.now() + timeoutMs;
			while (callsFor(event) < count) {
				if (Date.now() > deadline) throw new Error(`the destination saw ${callsFor(event)} calls for ${event}, not ${count}`);
				await Promise.race([new Promise<void>((r) => waiters.push(r)), sleep(500)]);
			}
		},
		close: () =>
			new Promise<void>((resolve) => {
				server.closeAllConnections?.();
				server.close(() => resolve());
			}),
	};
}

/* ------------------------------------------------------------------------------------------ */
/* The workflow                                                                                */
/* ------------------------------------------------------------------------------------------ */

const PATH = 'lease-recovery';

function workflow(ledgerCredential: { id: string; name: string }, destinationUrl: string) {
	const node = nodePlacer();
	const respond = (name: string, body: string, code?: number) =>
		node(name, 'n8n-nodes-base.respondToWebhook', 1.5, { respondWith: 'json', responseBody: body, options: code ? { responseCode: code } : {} });
	const nodes = [
		node('Webhook', 'n8n-nodes-base.webhook', 2, { httpMethod: 'POST', path: PATH, responseMode: 'responseNode', options: {} }, { webhookId: randomUUID() }),
		// Every setting at its default, but the credential and the Key (the event's id).
		node('Dedupe Gate', 'n8n-nodes-idempotency.dedupeGate', 1, { keyExpression: '={{ $json.body.id }}' }, { credentials: { idempotencyPostgresApi: ledgerCredential } }),
		node('Call Destination', 'n8n-nodes-base.httpRequest', 4.2, {
			method: 'POST',
			url: `${destinationUrl}/orders`,
			sendBody: true,
			specifyBody: 'json',
			jsonBody: '={{ JSON.stringify({ event: $json.body.id }) }}',
			// Longer than the slow destination's 3 minutes.
			options: { timeout: 300_000 },
		}),
		respond('Respond New', `={{ { "outcome": "new", "event": $('Webhook').item.json.body.id } }}`),
		respond('Respond Duplicate', '={{ { "outcome": "duplicate", "event": $json.body.id } }}'),
		respond('Respond In Progress', '={{ { "outcome": "in_progress", "event": $json.body.id, "reason": $json.idempotency.reason } }}', 409),
	];
	const to = (name: string) => [{ node: name, type: 'main', index: 0 }];
	return {
		name: 'lease recovery: webhook → gate (defaults) → destination',
		nodes,
		connections: {
			Webhook: { main: [to('Dedupe Gate')] },
			'Dedupe Gate': { main: [to('Call Destination'), to('Respond Duplicate'), to('Respond In Progress')] },
			'Call Destination': { main: [to('Respond New')] },
		},
		settings: { executionOrder: 'v1' },
	};
}

/* ------------------------------------------------------------------------------------------ */

/**
 * C: Webhook → Dedupe Gate (defaults) → Guarded Send (HTTP to an API that does not honour the key,
 * with a check request; every lease setting at its default) → a Respond to Webhook per output.
 */
const SEND_PATH = 'lease-recovery-send';
function sendWorkflow(ledgerCredential: { id: string; name: string }, apiUrl: string) {
	const node = nodePlacer();
	const respond = (name: string, outcome: string, code?: number) =>
		node(name, 'n8n-nodes-base.respondToWebhook', 1.5, {
			respondWith: 'json',
			responseBody: `={{ { "outcome": "${outcome}", "facts": $json.idempotency } }}`,
			options: code ? { responseCode: code } : {},
		});
	const ledger = { idempotencyPostgresApi: ledgerCredential };
	const nodes = [
		node('Webhook', 'n8n-nodes-base.webhook', 2, { httpMethod: 'POST', path: SEND_PATH, responseMode: 'responseNode', options: {} }, { webhookId: randomUUID() }),
		node('Dedupe Gate', 'n8n-nodes-idempotency.dedupeGate', 1, { keyExpression: '={{ $json.body.id }}' }, { credentials: ledger }),
		node(
			'Charge',
			'n8n-nodes-idempotency.guardedSend',
			1,
			{
				channel: 'http',
				method: 'POST',
				url: `${apiUrl}/v1/charges`,
				sendBody: true,
				bodyContentType: 'json',
				jsonBody: '={{ JSON.stringify({ order: $json.body.id, amount: 100 }) }}',
				honoursKey: false,
				options: { checkRequest: { request: { url: `=${apiUrl}/v1/charges/by-order/{{ $json.body.id }}` } } },
			},
			{ credentials: ledger },
		),
		respond('Respond Sent', 'sent'),
		respond('Respond Skipped', 'skipped'),
		respond('Respond Review', 'needs_review'),
		respond('Respond In Progress', 'in_progress', 409),
		respond('Respond Duplicate', 'duplicate'),
		respond('Respond Gate In Progress', 'gate_in_progress', 409),
	];
	const to = (name: string) => [{ node: name, type: 'main', index: 0 }];
	return {
		name: 'lease recovery: webhook → gate → Guarded Send (lease defaults, check request)',
		nodes,
		connections: {
			Webhook: { main: [to('Dedupe Gate')] },
			'Dedupe Gate': { main: [to('Charge'), to('Respond Duplicate'), to('Respond Gate In Progress')] },
			Charge: { main: [to('Respond Sent'), to('Respond Skipped'), to('Respond Review'), to('Respond In Progress')] },
		},
		settings: { executionOrder: 'v1' },
	};
}

let n8n: N8nInstance | undefined;
/** B's n8n: the slow run holds it for 3 minutes while A and C kill and restart the other. */
let slowN8n: N8nInstance | undefined;
let slowWorkflowId = '';
let dest: Destination;
let api: StripeLikeServer;
let workflowId = '';
let sendWorkflowId = '';

const outcomeOf = (res: HttpResponse) => `${res.status} ${(res.body as { outcome?: string } | undefined)?.outcome ?? res.text.slice(0, 200)}`;

/** The gate's row of the event, as PostgreSQL sees it now. */
async function gateRow(event: string, wf = workflowId) {
	const [row] = await ledger.query<{ status: string; lease_holder: string | null; attempts: number; lease_left_ms: number | null; lease_expires_at: Date | null }>(
		`SELECT status, lease_holder, attempts, lease_expires_at, (extract(epoch FROM lease_expires_at - now()) * 1000)::float8 AS lease_left_ms
		 FROM public."${table}" WHERE namespace = $1 AND key = $2 AND step = ''`,
		[`workflow:${wf}`, event],
	);
	return row;
}

/**
 * The gate's row once the execution that holds it has ended: the gate marks its keys done in
 * n8n's execution-end hook, which runs after the webhook has answered (so poll for a while).
 */
async function settledRow(event: string, timeoutMs = 15_000, wf = workflowId) {
	const until = performance.now() + timeoutMs;
	for (;;) {
		const row = await gateRow(event, wf);
		if (row?.status !== 'in_progress' || performance.now() > until) return row;
		await sleep(100);
	}
}

/**
 * kill -9 of the main n8n while `first` (a delivery it holds) waits on it; then a restart, until
 * the webhook at `path` is registered again. When the kill was, and how long the restart took.
 */
async function killAndRestart(first: Promise<unknown>, path: string, webhook?: Parameters<N8nInstance['waitForWebhook']>[1]) {
	await n8n!.kill('SIGKILL');
	const killedAt = performance.now();
	expect(n8n!.running).toBe(false);
	await first;
	await n8n!.restart();
	await n8n!.waitForWebhook(path, webhook);
	return { killedAt, restartedMs: performance.now() - killedAt };
}

beforeAll(async () => {
	dest = await destination();
	// C's API: the first charge is made and then never answered (n8n dies holding the call).
	api = await stripeLikeServer({ honoursKey: false, plan: (n) => (n === 1 ? { kind: 'hang' } : { kind: 'normal' }) });
	/** An n8n with the package, the ledger credential and the gate's workflow deployed. */
	const boot = async (set: (instance: N8nInstance) => void) => {
		const instance = await startN8n({ withPackage: true });
		set(instance);
		await instance.setupOwner();
		await instance.createApiKey();
		const credential = await instance.createCredential({ name: `Ledger ${table}`, type: 'idempotencyPostgresApi', data: ledgerCredentialData(table) });
		const ref = { id: credential.id, name: credential.name };
		return { instance, ref, id: await instance.deploy(workflow(ref, dest.url)) };
	};
	const [main, slow] = await Promise.all([boot((i) => (n8n = i)), boot((i) => (slowN8n = i))]);
	workflowId = main.id;
	sendWorkflowId = await n8n!.deploy(sendWorkflow(main.ref, api.url));
	slowWorkflowId = slow.id;
	slowRun = runSlow(slowN8n!);
	// Awaited in B's test; a failure before then is reported there, not as an unhandled rejection.
	slowRun.catch(() => undefined);
});

afterAll(async () => {
	if (n8n) console.log(`n8n ${n8n.runtime.version} log: ${n8n.logFile}`);
	if (slowN8n) console.log(`n8n ${slowN8n.runtime.version} log (B): ${slowN8n.logFile}`);
	await Promise.all([n8n?.stop(), slowN8n?.stop()]);
	await dest?.close();
	await api?.close();
	await ledger.drop();
	console.log(`lease recovery, figures (n8n ${n8n?.runtime.version}):\n${Object.entries(figures).map(([k, v]) => `  ${k}: ${v}`).join('\n')}`);
});

describe('A. kill -9 of n8n in the middle of a run, with the gate at its defaults', () => {
	test('a redelivery goes through within 60 s of the kill, n8n restart included; the destination saw the dead run and the redelivery', async () => {
		const event = `evt_crash_${Date.now()}`;
		dest.plan(event, { kind: 'hang' });
		// The sender's first delivery: its answer never comes (n8n dies holding it).
		const first = n8n!.post(PATH, { id: event }, { timeoutMs: 300_000 }).catch((error: Error) => error);
		await dest.waitForCalls(event, 1);
		const held = await gateRow(event);
		expect(held).toMatchObject({ status: 'in_progress', attempts: 1 });
		// The claim took the short lease, not the configured 10 minutes.
		expect(held.lease_left_ms).toBeLessThanOrEqual(30_000);
		dest.plan(event, { kind: 'answer' });

		const { killedAt, restartedMs } = await killAndRestart(first, PATH);

		// The sender redelivers every 2 s until the gate lets the event through.
		const answers: Array<[number, string]> = [];
		let inProgressReason = '';
		let through: HttpResponse | undefined;
		while (!through && performance.now() - killedAt < 120_000) {
			const sent = performance.now();
			const res = await n8n!.post(PATH, { id: event }, { timeoutMs: 30_000 });
			answers.push([performance.now() - killedAt, outcomeOf(res)]);
			if (res.status === 200 && res.body?.outcome === 'new') through = res;
			else {
				expect(outcomeOf(res)).toBe('409 in_progress');
				inProgressReason ||= String(res.body?.reason);
				await sleep(Math.max(0, 2_000 - (performance.now() - sent)));
			}
		}
		const throughMs = answers[answers.length - 1][0];
		figures['A. kill -9 → n8n restarted, webhook registered'] = secs(restartedMs);
		figures['A. kill -9 → a redelivery went through (New)'] = secs(throughMs);
		figures['A. redeliveries after the restart'] = answers.map(([ms, o]) => `${secs(ms)} ${o}`).join(', ');
		if (inProgressReason) figures['A. In Progress reason meanwhile'] = inProgressReason;
		console.log(`A. kill -9 → redelivery through (New): ${secs(throughMs)} (restart ${secs(restartedMs)}); answers: ${figures['A. redeliveries after the restart']}`);

		expect(through).toBeDefined();
		expect(throughMs).toBeLessThan(60_000);
		// One call from the dead run, one from the redelivery (see the file's comment).
		expect(dest.callsFor(event)).toBe(2);
		expect(await settledRow(event)).toMatchObject({ status: 'completed', attempts: 2 });
		// And the next redelivery is a Duplicate: nothing more reaches the destination.
		expect(outcomeOf(await n8n!.post(PATH, { id: event }))).toBe('200 duplicate');
		expect(dest.callsFor(event)).toBe(2);
	}, 300_000);
});

describe('C. kill -9 of n8n while Guarded Send waits on the destination, its lease settings at their defaults', () => {
	test('a redelivery 35 s after the kill resolves the step with its check (Skipped, recovered), not In Progress; the API acted once', async () => {
		const order = `ord_crash_${Date.now()}`;
		const charged = new Promise<void>((resolve) => api.events.once('received', () => resolve()));
		const first = n8n!.post(SEND_PATH, { id: order }, { timeoutMs: 300_000 }).catch((error: Error) => error);
		await charged;
		const [held] = await ledger.query<{ status: string; lease_left_ms: number }>(
			`SELECT status, (extract(epoch FROM lease_expires_at - now()) * 1000)::float8 AS lease_left_ms
			 FROM public."${table}" WHERE namespace = $1 AND key = $2 AND step = 'Charge'`,
			[`workflow:${sendWorkflowId}`, order],
		);
		// Guarded Send's claim took the short lease, not "Hold Step For" (5 minutes).
		expect(held).toMatchObject({ status: 'in_progress' });
		expect(held.lease_left_ms).toBeLessThanOrEqual(30_000);

		const { killedAt, restartedMs } = await killAndRestart(first, SEND_PATH, { method: 'POST' });
		await sleep(Math.max(0, 35_000 - (performance.now() - killedAt)));
		const res = await n8n!.post(SEND_PATH, { id: order }, { timeoutMs: 60_000 });
		const answeredMs = performance.now() - killedAt;
		const facts = (res.body as { facts?: Record<string, unknown> } | undefined)?.facts ?? {};
		figures['C. kill -9 → n8n restarted, webhook registered'] = secs(restartedMs);
		figures['C. redelivery after the kill'] = `${secs(answeredMs)}: ${outcomeOf(res)} (${String(facts.reason)}, recovered ${String(facts.recovered)})`;
		console.log(`C. kill -9 → redelivery at ${secs(answeredMs)} (restart ${secs(restartedMs)}): ${outcomeOf(res)}; ${JSON.stringify(facts.check ?? null)}`);

		expect(outcomeOf(res)).toBe('200 skipped');
		expect(facts).toMatchObject({ reason: 'already_sent', recovered: true, check: expect.objectContaining({ outcome: 'found' }) });
		expect(api.actions.filter((a) => (a.body as { order?: string })?.order === order)).toHaveLength(1);
		// And the next redelivery is a Duplicate at the gate: nothing more reaches the API.
		await settledRow(order, 15_000, sendWorkflowId);
		expect(outcomeOf(await n8n!.post(SEND_PATH, { id: order }))).toBe('200 duplicate');
		expect(api.actions.filter((a) => (a.body as { order?: string })?.order === order)).toHaveLength(1);
	}, 240_000);
});

const SLOW_MS = 180_000;
/** B's run, started in beforeAll on its own n8n; B's test awaits it. */
let slowRun: ReturnType<typeof runSlow>;

/**
 * B: the first delivery, held 3 minutes by the destination; a redelivery every 15 s meanwhile,
 * with the gate's row as PostgreSQL has it right after each; then one more after the run.
 */
async function runSlow(instance: N8nInstance) {
	const event = `evt_slow_${Date.now()}`;
	dest.plan(event, { kind: 'slow', ms: SLOW_MS });
	const started = performance.now();
	let firstDone = false;
	const first = instance.post(PATH, { id: event }, { timeoutMs: SLOW_MS + 120_000 }).finally(() => (firstDone = true));
	await dest.waitForCalls(event, 1);

	const answers: Array<[number, string, number | null]> = [];
	const leaseEnds = new Set<number>();
	while (!firstDone) {
		await Promise.race([sleep(15_000), first.catch(() => undefined)]);
		if (firstDone) break;
		const res = await instance.post(PATH, { id: event }, { timeoutMs: 30_000 });
		const row = await gateRow(event, slowWorkflowId);
		if (row?.lease_expires_at) leaseEnds.add(row.lease_expires_at.getTime());
		answers.push([performance.now() - started, outcomeOf(res), row?.lease_left_ms ?? null]);
	}
	const firstRes = await first;
	const slowMs = performance.now() - started;
	const after = await instance.post(PATH, { id: event });
	return { event, answers, leaseEnds, firstRes, slowMs, after };
}

// Last: B has run since beforeAll on its own n8n, while A and C ran on the other.
describe('B. a destination that takes 3 minutes, with the gate at its defaults', () => {
	test('redeliveries every 15 s during the 3 minutes are In Progress, the destination is called once, and afterwards a redelivery is a Duplicate', async () => {
		// Run since beforeAll, on B's own n8n, while A and C ran on the other.
		const { event, answers, leaseEnds, firstRes, slowMs, after } = await slowRun;

		figures['B. the slow run (destination 3 min)'] = `${secs(slowMs)}, answered ${outcomeOf(firstRes)}`;
		figures['B. redeliveries during it'] = answers.map(([ms, o, left]) => `${secs(ms)} ${o} (lease left ${left === null ? '-' : secs(left)})`).join(', ');
		figures['B. redelivery after it'] = outcomeOf(after);
		figures['B. destination calls'] = String(dest.callsFor(event));
		console.log(`B. ${answers.length} redeliveries during the ${secs(slowMs)} run: ${answers.map(([, o]) => o).join(', ')}; after: ${outcomeOf(after)}; destination calls: ${dest.callsFor(event)}; distinct lease ends seen: ${leaseEnds.size}`);

		expect(outcomeOf(firstRes)).toBe('200 new');
		expect(slowMs).toBeGreaterThanOrEqual(SLOW_MS);
		expect(answers.length).toBeGreaterThanOrEqual(10);
		expect(answers.filter(([, o]) => o !== '409 in_progress')).toEqual([]);
		// The lease stayed short and moved on: renewed by the live run, never lapsed.
		expect(answers.every(([, , left]) => left !== null && left > 0 && left <= 30_000)).toBe(true);
		expect(leaseEnds.size).toBeGreaterThanOrEqual(answers.length - 1);
		expect(dest.callsFor(event)).toBe(1);
		expect(outcomeOf(after)).toBe('200 duplicate');
		expect(await settledRow(event, 15_000, slowWorkflowId)).toMatchObject({ status: 'completed', attempts: 1 });
	}, 420_000);
});
