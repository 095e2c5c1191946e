/**
 * The Built-in ledger (a SQLite file in n8n's user folder) in a real n8n that keeps its own data
 * in SQLite too (DB_TYPE sqlite, n8n's default install): no PostgreSQL anywhere in the flow.
 *
 *   a. The README's quick start (examples/hello-dedupe.json, with Ledger = Built-in): three runs
 *      by `n8n execute` (a second n8n process on the same file, beside the running n8n): New,
 *      Duplicate, Duplicate; the work done once.
 *   b. The storm: 200 ids × 5 copies through Dedupe Gate → Guarded Send (HTTP) → Mark Step Done
 *      against a counting API: 200 sends, none twice.
 *   c. kill -9 of n8n mid-storm, restart, every id delivered again until settled: 0 twice, 0 lost.
 *   d. Queue mode (main + 1 worker): a node on the Built-in ledger refuses with its message.
 *
 * The ledger file is read back with Node 24's node:sqlite in a child process (this jest runs on
 * the machine's Node, which may not have it).
 */
import { execFileSync } from 'child_process';
import path from 'path';
import { performance } from 'perf_hooks';

import { stripeLikeServer, type StripeLikeServer } from '../support/destinations';
import { dedupeGate, guardedFlow, httpSend, markDone, pool, webhook, node, type CredentialRef, type Node } from './support/guardedWorkflows';
import { nodeOutput, queueEnv, startN8n, type N8nInstance, type WorkflowJson } from './support/n8n';
import { loadExample, nodeNamed } from './support/standIns';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const figures: string[] = [];
const LEDGER_FILE = 'idempotency-ledger.sqlite';

/** The same node on the Built-in ledger: Ledger = Built-in, and its credential instead of PostgreSQL's. */
function onBuiltin(n: Node, credential: CredentialRef): Node {
	const others = Object.fromEntries(Object.entries(n.credentials ?? {}).filter(([type]) => type !== 'idempotencyPostgresApi'));
	return { ...n, parameters: { ...n.parameters, backend: 'builtin' }, credentials: { ...others, idempotencyBuiltinApi: credential } };
}

interface FileRow {
	key: string;
	step: string;
	status: string;
	phase: string | null;
}

/** Rows of one namespace, read from the ledger file by Node 24 (node:sqlite) in a child process. */
function fileRows(n8n: N8nInstance, namespace: string): FileRow[] {
	const file = path.join(n8n.userFolder, '.n8n', LEDGER_FILE);
	const script = `const { DatabaseSync } = require('node:sqlite');
const db = new DatabaseSync(process.argv[1], { timeout: 10000 });
const now = Number(db.prepare("SELECT CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now").get().now);
process.stdout.write(JSON.stringify(db.prepare('SELECT key, step, status, phase FROM ledger WHERE namespace = ? AND expires_at > ? ORDER BY key, step').all(process.argv[2], now)));`;
	return JSON.parse(execFileSync(n8n.runtime.nodeBin, ['-e', script, file, namespace], { encoding: 'utf8' })) as FileRow[];
}

afterAll(() => {
	console.log(`built-in ledger e2e, figures:\n  ${figures.join('\n  ')}`);
});

describe('e2e: the Built-in ledger, n8n on SQLite, no PostgreSQL', () => {
	let n8n: N8nInstance | undefined;
	let api: StripeLikeServer;
	let ledger: CredentialRef;

	beforeAll(async () => {
		api = await stripeLikeServer();
		n8n = await startN8n({ withPackage: true, sqlite: true });
		await n8n.setupOwner();
		await n8n.createApiKey();
		// No field is required: the credential is created with nothing in it.
		const created = await n8n.createCredential({ name: 'Built-in Ledger', type: 'idempotencyBuiltinApi', data: {} });
		ledger = { id: created.id, name: created.name };
	});

	afterAll(async () => {
		if (n8n) console.log(`n8n log: ${n8n.logFile}`);
		await n8n?.stop();
		await api?.close();
	});

	test('n8n runs on SQLite: no DB_TYPE postgresdb in its environment', () => {
		const env = n8n!.env();
		expect(env.DB_TYPE).toBe('sqlite');
		expect(Object.keys(env).filter((k) => k.startsWith('DB_POSTGRESDB'))).toEqual([]);
	});

	test('a. the quick start with Ledger = Built-in, run by `n8n execute` beside the running n8n: New, Duplicate, Duplicate; the work is done once', async () => {
		const workflow = loadExample('hello-dedupe.json');
		const gate = nodeNamed(workflow, 'Dedupe Gate');
		gate.parameters = { backend: 'builtin', options: { lease: 20, leaseUnit: 'seconds' } };
		gate.credentials = { idempotencyBuiltinApi: ledger };
		workflow.name = 'hello-dedupe (built-in)';
		const { id } = await n8n!.createWorkflow(workflow);
		const outcomes: string[] = [];
		let work = 0;
		let firstEnded = 0;
		for (const afterLease of [false, false, true]) {
			// The third run starts more than the 20 s lease after the first one ended (its claim was
			// before that): the second run's time counts towards the wait.
			if (afterLease) await sleep(Math.max(0, firstEnded + 21_000 - performance.now()));
			const { run } = await n8n!.executeCli(id);
			firstEnded ||= performance.now();
			const names = ['New', 'Duplicate', 'In Progress'];
			outcomes.push(names.filter((_, output) => nodeOutput(run, 'Dedupe Gate', output).length > 0).join('+'));
			work += nodeOutput(run, 'Do the Work', 0).length;
		}
		expect(outcomes).toEqual(['New', 'Duplicate', 'Duplicate']);
		expect(work).toBe(1);
		expect(fileRows(n8n!, `workflow:${id}`)).toEqual([{ key: 'order-1', step: '', status: 'completed', phase: null }]);
	}, 300_000);

	/** Webhook → Dedupe Gate → Guarded Send (POST /v1/charges, Idempotency-Key) → Mark Step Done, on the Built-in ledger. */
	function stormFlow(name: string, webhookPath: string, gateLeaseSeconds: number, send: { leaseSeconds: number; timeoutSeconds: number }): WorkflowJson {
		const flow = guardedFlow(
			name,
			webhookPath,
			onBuiltin(dedupeGate(ledger, gateLeaseSeconds), ledger),
			onBuiltin(httpSend(ledger, `${api.url}/v1/charges`, send), ledger),
			onBuiltin(markDone(ledger), ledger),
			'lastNode',
		);
		return flow;
	}

	const chargesOf = (id: string) => api.actions.filter((a) => (a.body as { event?: string } | null)?.event === id).length;

	test('b. the storm: 200 ids × 5 copies, 16 in flight: 200 sends, none twice', async () => {
		const id = await n8n!.deploy(stormFlow('built-in storm', 'builtin-storm', 300, { leaseSeconds: 60, timeoutSeconds: 10 }));
		const run = Date.now().toString(36);
		const ids = Array.from({ length: 200 }, (_, i) => `storm-${i}-${run}`);
		const deliveries = ids.flatMap((e) => [e, e, e, e, e]).sort(() => Math.random() - 0.5);
		const t = performance.now();
		const statuses = await pool(deliveries, 16, async (eventId) => (await n8n!.post('builtin-storm', { eventId, amount: 1200 }, { timeoutMs: 120_000 })).status);
		const stormMs = performance.now() - t;
		expect(statuses.filter((s) => s !== 200)).toEqual([]);
		const counts = ids.map(chargesOf);
		const twice = counts.filter((c) => c > 1).length;
		const sent = counts.filter((c) => c === 1).length;
		const rows = fileRows(n8n!, `workflow:${id}`);
		const line = `b. storm: 1,000 deliveries (200 ids × 5) in ${(stormMs / 1000).toFixed(1)} s; sends ${counts.reduce((a, b) => a + b, 0)}; ids sent twice ${twice}; Idempotency-Keys seen twice ${[...api.keysSeen.values()].filter((n) => n > 1).length}`;
		figures.push(line);
		console.log(line);
		expect({ sent, twice }).toEqual({ sent: 200, twice: 0 });
		// Each id: its unit and its send step completed, in the file.
		expect(rows).toHaveLength(400);
		expect(rows.filter((r) => r.status !== 'completed')).toEqual([]);
	}, 600_000);

	test('c. kill -9 of n8n mid-storm, restart, every id delivered again until settled: 0 twice, 0 lost', async () => {
		// Short leases, so that deliveries after the restart can take over what the killed n8n held.
		const id = await n8n!.deploy(stormFlow('built-in storm, kill -9', 'builtin-kill', 3, { leaseSeconds: 5, timeoutSeconds: 2 }));
		const namespace = `workflow:${id}`;
		const run = Date.now().toString(36);
		const ids = Array.from({ length: 200 }, (_, i) => `kill-${i}-${run}`);
		const deliveries = ids.flatMap((e) => [e, e, e, e, e]).sort(() => Math.random() - 0.5);
		let next = 0;
		let answered = 0;
		let killed = false;
		const sender = async () => {
			while (!killed && next < deliveries.length) {
				const eventId = deliveries[next++];
				await n8n!.post('builtin-kill', { eventId, amount: 1200 }, { timeoutMs: 120_000 }).then(
					() => answered++,
					() => undefined,
				);
			}
		};
		const senders = Array.from({ length: 16 }, sender);
		while (answered < 350 && next < deliveries.length) await sleep(50);
		killed = true;
		await n8n!.kill('SIGKILL');
		const killedAt = performance.now();
		await Promise.all(senders);
		const sentBeforeKill = ids.filter((e) => chargesOf(e) > 0).length;
		await n8n!.restart();
		await n8n!.waitForWebhook('builtin-kill');
		// Every id delivered again, every 3 s, until its send step is completed in the ledger.
		const settled = () => {
			const done = new Set(fileRows(n8n!, namespace).filter((r) => r.step === 'charge' && r.status === 'completed').map((r) => r.key));
			return ids.filter((e) => !done.has(e));
		};
		let open = settled();
		let redeliveries = 0;
		const until = performance.now() + 300_000;
		while (open.length > 0 && performance.now() < until) {
			const started = performance.now();
			await pool(open, 16, async (eventId) => {
				redeliveries++;
				await n8n!.post('builtin-kill', { eventId, amount: 1200 }, { timeoutMs: 60_000 }).catch(() => undefined);
			});
			open = settled();
			if (open.length > 0) await sleep(Math.max(0, 3_000 - (performance.now() - started)));
		}
		const counts = ids.map(chargesOf);
		const twice = counts.filter((c) => c > 1).length;
		const never = counts.filter((c) => c === 0).length;
		const line = `c. kill -9: ${answered} of 1,000 deliveries answered before the kill, ${sentBeforeKill} ids sent before it; all settled ${((performance.now() - killedAt) / 1000).toFixed(1)} s after the kill with ${redeliveries} redeliveries; sent twice ${twice}; never sent ${never}; not completed ${open.length}`;
		figures.push(line);
		console.log(line);
		expect({ twice, never, notCompleted: open }).toEqual({ twice: 0, never: 0, notCompleted: [] });
	}, 900_000);
});

describe('e2e: the Built-in ledger refuses queue mode (main + 1 worker)', () => {
	let n8n: N8nInstance | undefined;

	afterAll(async () => {
		if (n8n) console.log(`n8n log (queue mode): ${n8n.logFile}`);
		await n8n?.stop();
	});

	test('d. a webhook execution on the worker fails at the gate with "use the PostgreSQL or Redis ledger"; nothing after the gate runs', async () => {
		// Queue mode needs n8n's own data in PostgreSQL (its default database here) and Redis for the queue.
		n8n = await startN8n({ withPackage: true, env: queueEnv() });
		await n8n.setupOwner();
		await n8n.createApiKey();
		await n8n.startWorker();
		const created = await n8n.createCredential({ name: 'Built-in Ledger', type: 'idempotencyBuiltinApi', data: {} });
		const ref = { id: created.id, name: created.name };
		// A path of its own: in queue mode n8n caches webhooks in Redis, which other instances share.
		const hookPath = `builtin-queue-${Date.now().toString(36)}`;
		const hook = webhook(hookPath, 'onReceived');
		const gate = node('Dedupe Gate', 'n8n-nodes-idempotency.dedupeGate', { backend: 'builtin', keyExpression: '={{ $json.body.id }}' }, {
			credentials: { idempotencyBuiltinApi: ref },
		});
		const work = node('Do the Work', 'n8n-nodes-base.noOp', {}, { typeVersion: 1 });
		const id = await n8n.deploy({
			name: 'built-in ledger in queue mode',
			nodes: [hook, gate, work],
			connections: {
				[hook.name]: { main: [[{ node: gate.name, type: 'main', index: 0 }]] },
				[gate.name]: { main: [[{ node: work.name, type: 'main', index: 0 }], [], []] },
			},
			settings: { executionOrder: 'v1' },
		});
		expect((await n8n.post(hookPath, { id: 'order-1' })).status).toBe(200);
		const [execution] = await n8n.waitForExecutions(id, 1, { includeData: true, timeoutMs: 120_000 });
		expect(execution.status).toBe('error');
		const runData = execution.data!.resultData.runData;
		const error = runData['Dedupe Gate']?.[0]?.error ?? execution.data!.resultData.error;
		const text = `${error?.message ?? ''} ${error?.description ?? ''}`;
		// Said as a setting to change, not as an outage.
		expect(text).toContain('The Built-in ledger is for a single n8n; in queue mode (EXECUTIONS_MODE=queue) use PostgreSQL or Redis');
		expect(text).not.toMatch(/unavailable|cannot be reached/);
		expect(runData['Do the Work']).toBeUndefined();
		figures.push(`d. queue mode: the gate's error: ${error?.message}`);
	}, 600_000);
});
