/**
 * A guarded region around n8n's OWN nodes, in a REAL n8n (the newest version of
 * test/e2e/support/matrix.js, the package installed the user's way), with `kill -9`:
 *
 *   Webhook → Dedupe Gate (defaults) ─ New → Before → Start Step ─ Run → After Start → Create Order → Mark Step Done → After Record
 *                                                                  └ Check First → Look Up (GET) → Found? ─ true → Record Found (Mark Step Done)
 *                                                                                                         └ false → Create Order
 *
 * Create Order is n8n's HTTP Request node (POST to a local counting server) or n8n's Send Email
 * node (to a local SMTP server). Look Up is n8n's HTTP Request node (GET the order), Found? is
 * n8n's IF node. Before, After Start and After Record are HTTP Request nodes that call a local
 * barrier: the test makes one of them (or the destination itself) hang for a chosen message, so
 * that every message stands at its kill point when n8n is killed:
 *
 *   before      the gate let it through; the region has not started
 *   start       Start Step marked the step; Create Order has not run
 *   acted       the destination acted (counted the order, received the mail) and never answered
 *   record      Mark Step Done recorded the step; the execution has not ended
 *
 * Three flows (12 messages each, 3 per kill point, all in flight at once, one kill -9): HTTP with
 * the GET check on Check First; HTTP without a check; Send Email without a check (Start Step on
 * its default, Needs Review). After the restart every message is delivered again every 3 s until
 * it settles (its step completed, or on Needs Review), then once more.
 *
 * Then the storm of issue 27: 200 ids × 5 copies, 16 deliveries in flight, kill -9 mid-storm,
 * restart, every id delivered again until settled, with the HTTP recipe (GET check).
 */
import { randomUUID } from 'crypto';
import http from 'http';
import type { AddressInfo } from 'net';
import { performance } from 'perf_hooks';

import { smtpServer, type SmtpTestServer } from '../support/destinations';
import { startN8n, type N8nInstance, type WorkflowJson } from './support/n8n';
import { ledgerCredentialData, LedgerTables, nodePlacer, uniqueLedgerTable } from './support/standIns';

const PKG = 'n8n-nodes-idempotency';
const STEP = 'create order';
const table = uniqueLedgerTable('e2e_region');
const ledger = new LedgerTables(table);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const POINTS = ['before', 'start', 'acted', 'record'] as const;
type Point = (typeof POINTS)[number];

/* ------------------------------------------------------------------------------------------ */
/* The destination (orders, counted) and the barriers                                           */
/* ------------------------------------------------------------------------------------------ */

interface Destination {
	url: string;
	/** POST /orders received, per order id. */
	orders: Map<string, number>;
	/** `point:id` pairs to hang on once (the barrier's point, or `acted` at POST /orders). */
	hangs: Set<string>;
	/** `point:id` pairs that hung. */
	reached: Set<string>;
	close(): Promise<void>;
}

async function destination(): Promise<Destination> {
	const orders = new Map<string, number>();
	const hangs = new Set<string>();
	const reached = new Set<string>();
	const server = http.createServer((req, res) => {
		let body = '';
		req.on('data', (c) => (body += c));
		req.on('end', () => {
			const url = new URL(req.url ?? '/', 'http://x');
			const json = (status: number, value: unknown) => {
				res.writeHead(status, { 'content-type': 'application/json' });
				res.end(JSON.stringify(value));
			};
			const hang = (pair: string) => {
				if (!hangs.delete(pair)) return false;
				reached.add(pair);
				return true; // never answers: the connection dies with n8n
			};
			const barrier = /^\/barrier\/(\w+)\/(.+)$/.exec(url.pathname);
			if (barrier) {
				if (hang(`${barrier[1]}:${decodeURIComponent(barrier[2])}`)) return;
				return json(200, { ok: true });
			}
			const lookUp = /^\/orders\/(.+)$/.exec(url.pathname);
			if (req.method === 'GET' && lookUp) {
				const id = decodeURIComponent(lookUp[1]);
				return (orders.get(id) ?? 0) > 0 ? json(200, { id, orderId: `o-${id}` }) : json(404, { error: 'no such order' });
			}
			if (req.method === 'POST' && url.pathname === '/orders') {
				const id = String((JSON.parse(body || '{}') as { id?: unknown }).id);
				orders.set(id, (orders.get(id) ?? 0) + 1);
				if (hang(`acted:${id}`)) return;
				return json(200, { id, orderId: `o-${id}` });
			}
			json(404, {});
		});
		req.on('error', () => undefined);
		res.on('error', () => undefined);
	});
	await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
	return {
		url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
		orders,
		hangs,
		reached,
		close: () =>
			new Promise<void>((resolve) => {
				server.closeAllConnections?.();
				server.close(() => resolve());
			}),
	};
}

/* ------------------------------------------------------------------------------------------ */
/* The workflows                                                                               */
/* ------------------------------------------------------------------------------------------ */

interface Variant {
	name: string;
	path: string;
	action: 'http' | 'email';
	check: boolean;
}

const ID = "$('Webhook').item.json.body.id";

function flow(v: Variant, ledgerRef: { id: string; name: string }, smtpRef: { id: string; name: string }, url: string): WorkflowJson {
	const node = nodePlacer(200);
	const ours = { credentials: { idempotencyPostgresApi: ledgerRef } };
	const barrier = (name: string, point: string) =>
		node(name, 'n8n-nodes-base.httpRequest', 4.2, { method: 'POST', url: `=${url}/barrier/${point}/{{ ${ID} }}`, options: { timeout: 600_000 } });
	const createOrder =
		v.action === 'http'
			? node('Create Order', 'n8n-nodes-base.httpRequest', 4.2, {
					method: 'POST',
					url: `${url}/orders`,
					sendBody: true,
					specifyBody: 'json',
					jsonBody: `={{ JSON.stringify({ id: ${ID} }) }}`,
					options: { timeout: 600_000 },
				})
			: node(
					'Create Order',
					'n8n-nodes-base.emailSend',
					2.1,
					{ fromEmail: 'shop@example.com', toEmail: `={{ ${ID} }}@customer.example.com`, subject: `=Order {{ ${ID} }}`, emailFormat: 'text', text: 'Thank you for your order.', options: {} },
					{ credentials: { smtp: smtpRef } },
				);
	const nodes = [
		node('Webhook', 'n8n-nodes-base.webhook', 2, { httpMethod: 'POST', path: v.path, responseMode: 'lastNode', options: {} }, { webhookId: randomUUID() }),
		node('Dedupe Gate', `${PKG}.dedupeGate`, 1, { keyExpression: '={{ $json.body.id }}' }, ours),
		barrier('Before', 'before'),
		node('Start Step', `${PKG}.startStep`, 1, { step: STEP, ...(v.check ? { onUncertain: 'check' } : {}) }, ours),
		barrier('After Start', 'start'),
		createOrder,
		node('Mark Step Done', `${PKG}.markStepDone`, 1, { status: 'completed' }, ours),
		barrier('After Record', 'record'),
	];
	const to = (name: string) => [{ node: name, type: 'main', index: 0 }];
	const connections: Record<string, { main: Array<Array<{ node: string; type: string; index: number }>> }> = {
		Webhook: { main: [to('Dedupe Gate')] },
		'Dedupe Gate': { main: [to('Before')] },
		Before: { main: [to('Start Step')] },
		'Start Step': { main: [to('After Start')] },
		'After Start': { main: [to('Create Order')] },
		'Create Order': { main: [to('Mark Step Done')] },
		'Mark Step Done': { main: [to('After Record')] },
	};
	if (v.check) {
		nodes.push(
			node('Look Up', 'n8n-nodes-base.httpRequest', 4.2, { method: 'GET', url: `=${url}/orders/{{ ${ID} }}`, options: { response: { response: { fullResponse: true, neverError: true } } } }),
			node('Found?', 'n8n-nodes-base.if', 2.2, {
				conditions: {
					options: { caseSensitive: true, leftValue: '', typeValidation: 'loose', version: 2 },
					conditions: [{ id: randomUUID(), leftValue: '={{ $json.statusCode }}', rightValue: 200, operator: { type: 'number', operation: 'equals' } }],
					combinator: 'and',
				},
				options: {},
			}),
			node('Record Found', `${PKG}.markStepDone`, 1, { status: 'completed' }, ours),
		);
		connections['Start Step'].main = [to('After Start'), [], [], [], to('Look Up')];
		connections['Look Up'] = { main: [to('Found?')] };
		connections['Found?'] = { main: [to('Record Found'), to('Create Order')] };
	}
	return { name: `region crash: ${v.name}`, nodes, connections, settings: { executionOrder: 'v1' } } as WorkflowJson;
}

/* ------------------------------------------------------------------------------------------ */

let n8n: N8nInstance | undefined;
let dest: Destination;
let smtp: SmtpTestServer;
/** Subjects ("Order <id>") the SMTP server hangs on once, after it received the mail. */
const hangMail = new Set<string>();
const workflowIds = new Map<string, string>();
const figures: string[] = [];

const VARIANTS: Variant[] = [
	{ name: 'HTTP Request, GET check on Check First', path: 'region-http-check', action: 'http', check: true },
	{ name: 'HTTP Request, no check', path: 'region-http', action: 'http', check: false },
	{ name: 'Send Email, no check', path: 'region-email', action: 'email', check: false },
];

/** The sends the destination saw for an id: orders for HTTP, mails for email. */
const sendsOf = (v: Variant, id: string) =>
	v.action === 'http' ? (dest.orders.get(id) ?? 0) : smtp.mails.filter((m) => m.subject === `Order ${id}`).length;

async function rowsOf(v: Variant, id: string) {
	const rows = await ledger.rows('namespace = $1 AND key = $2', [`workflow:${workflowIds.get(v.path)}`, id]);
	return { unit: rows.find((r) => r.step === ''), step: rows.find((r) => r.step === STEP) };
}

/** Settled: the step is done and so is its unit, or the step waits for a person. */
async function settled(v: Variant, id: string): Promise<boolean> {
	const { unit, step } = await rowsOf(v, id);
	if (step?.status === 'needs_review') return true;
	return step?.status === 'completed' && unit?.status === 'completed';
}

/** Delivers each id again every 3 s until all are settled (or the time runs out); returns deliveries made. */
async function redeliverUntilSettled(pairs: Array<[Variant, string]>, timeoutMs: number, inFlight = 16): Promise<number> {
	const until = performance.now() + timeoutMs;
	let open = pairs;
	let deliveries = 0;
	while (open.length > 0 && performance.now() < until) {
		const started = performance.now();
		for (let i = 0; i < open.length; i += inFlight) {
			await Promise.all(
				open.slice(i, i + inFlight).map(async ([v, id]) => {
					deliveries++;
					await n8n!.post(v.path, { id }, { timeoutMs: 60_000 }).catch(() => undefined);
				}),
			);
		}
		const still: Array<[Variant, string]> = [];
		for (const [v, id] of open) if (!(await settled(v, id))) still.push([v, id]);
		open = still;
		if (open.length > 0) await sleep(Math.max(0, 3_000 - (performance.now() - started)));
	}
	if (open.length > 0) throw new Error(`not settled after ${Math.round(timeoutMs / 1000)} s: ${open.map(([v, id]) => `${v.path}/${id}`).join(', ')}`);
	return deliveries;
}

beforeAll(async () => {
	dest = await destination();
	smtp = await smtpServer({ plan: (_n, { key }) => (key && hangMail.delete(key) ? { kind: 'hang' } : { kind: 'normal' }) });
	n8n = await startN8n({ withPackage: true });
	await n8n.setupOwner();
	await n8n.createApiKey();
	const ledgerCredential = await n8n.createCredential({ name: `Ledger ${table}`, type: 'idempotencyPostgresApi', data: ledgerCredentialData(table) });
	const smtpCredential = await n8n.createCredential({ name: 'SMTP (local)', type: 'smtp', data: smtp.credential });
	for (const v of VARIANTS) {
		workflowIds.set(v.path, await n8n.deploy(flow(v, { id: ledgerCredential.id, name: ledgerCredential.name }, { id: smtpCredential.id, name: smtpCredential.name }, dest.url)));
	}
}, 300_000);

afterAll(async () => {
	if (n8n) console.log(`n8n ${n8n.runtime.version} log: ${n8n.logFile}`);
	await n8n?.stop();
	await dest?.close();
	await smtp?.close();
	await ledger.drop();
	console.log(`region crash, figures (n8n ${n8n?.runtime.version}):\n${figures.map((f) => `  ${f}`).join('\n')}`);
});

describe('a guarded region around n8n\'s HTTP Request and Send Email nodes, kill -9 at four points', () => {
	test('0 second sends in every cell; with the GET check 0 on Needs Review; without a check only the uncertain ones on Needs Review', async () => {
		const run = Date.now().toString(36);
		const cells: Array<{ v: Variant; point: Point; id: string }> = [];
		for (const v of VARIANTS) {
			for (const point of POINTS) {
				for (let m = 1; m <= 3; m++) {
					const id = `${v.action}${v.check ? 'c' : ''}-${point}-${m}-${run}`;
					cells.push({ v, point, id });
					if (point === 'acted' && v.action === 'email') hangMail.add(`Order ${id}`);
					else dest.hangs.add(`${point}:${id}`);
				}
			}
		}
		const firsts = cells.map(({ v, id }) => n8n!.post(v.path, { id }, { timeoutMs: 600_000 }).catch(() => undefined));
		// Every message stands at its kill point.
		const until = performance.now() + 120_000;
		const standing = () =>
			cells.filter(({ v, point, id }) => (point === 'acted' && v.action === 'email' ? smtp.mails.some((m) => m.subject === `Order ${id}`) : dest.reached.has(`${point}:${id}`))).length;
		while (standing() < cells.length && performance.now() < until) await sleep(200);
		expect(standing()).toBe(cells.length);

		await n8n!.kill('SIGKILL');
		const killedAt = performance.now();
		await Promise.all(firsts);
		hangMail.clear();
		dest.hangs.clear();
		await n8n!.restart();
		for (const v of VARIANTS) await n8n!.waitForWebhook(v.path);

		const deliveries = await redeliverUntilSettled(cells.map(({ v, id }) => [v, id]), 240_000);
		const settledMs = performance.now() - killedAt;
		// And once more: nothing acts again.
		await Promise.all(cells.map(({ v, id }) => n8n!.post(v.path, { id }, { timeoutMs: 60_000 })));

		const table: string[] = ['| flow | kill point | sends per message | step |', '|---|---|---|---|'];
		const problems: string[] = [];
		for (const v of VARIANTS) {
			for (const point of POINTS) {
				const mine = cells.filter((c) => c.v === v && c.point === point);
				const sends: number[] = [];
				const steps: string[] = [];
				for (const { id } of mine) {
					sends.push(sendsOf(v, id));
					steps.push(String((await rowsOf(v, id)).step?.status));
				}
				table.push(`| ${v.name} | ${point} | ${sends.join(', ')} | ${steps.join(', ')} |`);
				// What each cell must end as.
				const uncertain = point === 'start' || point === 'acted';
				const wantStep = !v.check && uncertain ? 'needs_review' : 'completed';
				const wantSends = point === 'start' && !v.check ? 0 : 1;
				for (let m = 0; m < mine.length; m++) {
					if (sends[m] > 1) problems.push(`${mine[m].id}: sent ${sends[m]} times`);
					if (sends[m] !== wantSends) problems.push(`${mine[m].id}: ${sends[m]} sends, expected ${wantSends}`);
					if (steps[m] !== wantStep) problems.push(`${mine[m].id}: step ${steps[m]}, expected ${wantStep}`);
				}
			}
		}
		figures.push(`kill -9 with 36 messages at their points → all settled ${(settledMs / 1000).toFixed(1)} s after the kill, ${deliveries} redeliveries`, ...table);
		console.log(`region crash cells:\n${table.join('\n')}`);
		expect(problems).toEqual([]);
	}, 600_000);
});

describe('the storm: 200 ids × 5 copies, 16 in flight, kill -9 mid-storm, HTTP Request recipe with the GET check', () => {
	test('0 ids sent twice, 0 never sent', async () => {
		const v = VARIANTS[0];
		const run = Date.now().toString(36);
		const ids = Array.from({ length: 200 }, (_, i) => `storm-${i}-${run}`);
		const deliveries = ids.flatMap((id) => [id, id, id, id, id]);
		for (let i = deliveries.length - 1; i > 0; i--) {
			const j = Math.floor(Math.random() * (i + 1));
			[deliveries[i], deliveries[j]] = [deliveries[j], deliveries[i]];
		}
		let next = 0;
		let answered = 0;
		let killed = false;
		const KILL_AFTER = 350;
		const sender = async () => {
			while (!killed && next < deliveries.length) {
				const id = deliveries[next++];
				await n8n!.post(v.path, { id }, { timeoutMs: 120_000 }).then(
					() => answered++,
					() => undefined,
				);
			}
		};
		const senders = Array.from({ length: 16 }, sender);
		while (answered < KILL_AFTER && next < deliveries.length) await sleep(50);
		killed = true;
		await n8n!.kill('SIGKILL');
		const killedAt = performance.now();
		await Promise.all(senders);
		const sentBeforeKill = ids.filter((id) => (dest.orders.get(id) ?? 0) > 0).length;
		await n8n!.restart();
		await n8n!.waitForWebhook(v.path);
		const redeliveries = await redeliverUntilSettled(ids.map((id) => [v, id]), 300_000);
		const settledMs = performance.now() - killedAt;

		const counts = ids.map((id) => dest.orders.get(id) ?? 0);
		const twice = counts.filter((c) => c > 1).length;
		const never = counts.filter((c) => c === 0).length;
		const review: string[] = [];
		for (const id of ids) if ((await rowsOf(v, id)).step?.status !== 'completed') review.push(id);
		const line = `storm: ${answered} of ${deliveries.length} deliveries answered before the kill; ${sentBeforeKill} ids sent before it; all 200 settled ${(settledMs / 1000).toFixed(1)} s after the kill with ${redeliveries} redeliveries; sent twice: ${twice}; never sent: ${never}; steps not completed: ${review.length}`;
		figures.push(line);
		console.log(line);
		expect({ twice, never, notCompleted: review }).toEqual({ twice: 0, never: 0, notCompleted: [] });
	}, 900_000);
});
