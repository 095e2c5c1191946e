/**
 * npm run bench:webhook — what our nodes add to one webhook event, end to end, in a real n8n
 * (N8N_VERSION, default 2.41.1; the package installed the user's way by the e2e harness):
 *
 *   ours:     Webhook → Dedupe Gate (Key = body.id) → Guarded Send (HTTP POST to a local sink) → Mark Step Done
 *   baseline: Webhook → HTTP Request (the same POST to the same sink)
 *   floor:    Webhook → No Operation → HTTP Request → No Operation: n8n's own cost of the two
 *             nodes ours has more than the baseline, doing nothing (no ledger at all)
 *
 * Each flow answers when its last node finishes. BENCH_EVENTS one-item events (default 1,000),
 * one at a time, each with a new id, alternating between the flows so that both see the same
 * machine; a warm-up of 20 each first. The ledger is PostgreSQL, behind a proxy that counts its
 * round trips (pgRoundTrips.ts); the transactions are xact_commit of the ledger's database
 * (nothing else uses it meanwhile). Reports p50 and p99 of each flow's answer time, what ours
 * adds, and round trips and transactions per event.
 *
 * Then where the time goes: a copy of each flow that keeps its executions' data takes TRACED
 * more events, and n8n's own record of them (each node's start and run time) gives, per node,
 * the median time it ran and the median gap n8n left before it started (from the previous node's
 * end, or for the first node after the trigger, from the trigger's end).
 */
import http from 'http';
import { randomUUID } from 'crypto';

import { Client } from 'pg';

import { startN8n, type N8nExecution, type WorkflowJson } from '../../test/e2e/support/n8n';
import { ledgerCredentialData, LedgerTables, uniqueLedgerTable, workflowNode } from '../../test/e2e/support/standIns';
import { countingPostgresProxy } from './pgRoundTrips';

const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const EVENTS = Number(process.env.BENCH_EVENTS ?? 1_000);
const WARMUP = 20;
const TRACED = 50;

const node = (name: string, type: string, typeVersion: number, x: number, parameters: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
	workflowNode(name, type, typeVersion, [x, 0], parameters, extra);

type Flow = 'baseline' | 'floor' | 'ours';
const FLOWS: Flow[] = ['baseline', 'floor', 'ours'];
const LABEL: Record<Flow, string> = {
	baseline: 'Webhook → HTTP Request',
	floor: 'Webhook → No Operation → HTTP Request → No Operation',
	ours: 'Webhook → Dedupe Gate → Guarded Send → Mark Step Done',
};

function flows(sink: string, credential: string): Record<Flow, WorkflowJson> {
	const hook = (path: string) => node('Webhook', 'n8n-nodes-base.webhook', 2, 0, { httpMethod: 'POST', path, responseMode: 'lastNode', options: {} }, { webhookId: randomUUID() });
	const ledger = { credentials: { idempotencyPostgresApi: { id: credential, name: 'Ledger' } } };
	const body = '={{ JSON.stringify({ id: $json.body.id }) }}';
	return {
		ours: {
			name: 'bench webhook ours',
			settings: { executionOrder: 'v1', saveDataSuccessExecution: 'none' },
			nodes: [
				hook('bench-ours'),
				node('Dedupe Gate', 'n8n-nodes-idempotency.dedupeGate', 1, 220, { keyExpression: '={{ $json.body.id }}', options: {} }, ledger),
				node('Guarded Send', 'n8n-nodes-idempotency.guardedSend', 1, 440, { channel: 'http', method: 'POST', url: sink, sendBody: true, bodyContentType: 'json', jsonBody: body, options: {} }, ledger),
				node('Mark Step Done', 'n8n-nodes-idempotency.markStepDone', 1, 660, { options: {} }, ledger),
			],
			connections: {
				Webhook: { main: [[{ node: 'Dedupe Gate', type: 'main', index: 0 }]] },
				'Dedupe Gate': { main: [[{ node: 'Guarded Send', type: 'main', index: 0 }], [], []] },
				'Guarded Send': { main: [[{ node: 'Mark Step Done', type: 'main', index: 0 }], [], [], []] },
			},
		},
		baseline: {
			name: 'bench webhook baseline',
			settings: { executionOrder: 'v1', saveDataSuccessExecution: 'none' },
			nodes: [hook('bench-baseline'), node('HTTP Request', 'n8n-nodes-base.httpRequest', 4.2, 220, { method: 'POST', url: sink, sendBody: true, specifyBody: 'json', jsonBody: body, options: {} })],
			connections: { Webhook: { main: [[{ node: 'HTTP Request', type: 'main', index: 0 }]] } },
		},
		floor: {
			name: 'bench webhook floor',
			settings: { executionOrder: 'v1', saveDataSuccessExecution: 'none' },
			nodes: [
				hook('bench-floor'),
				node('Before', 'n8n-nodes-base.noOp', 1, 220, {}),
				node('HTTP Request', 'n8n-nodes-base.httpRequest', 4.2, 440, { method: 'POST', url: sink, sendBody: true, specifyBody: 'json', jsonBody: body, options: {} }),
				node('After', 'n8n-nodes-base.noOp', 1, 660, {}),
			],
			connections: {
				Webhook: { main: [[{ node: 'Before', type: 'main', index: 0 }]] },
				Before: { main: [[{ node: 'HTTP Request', type: 'main', index: 0 }]] },
				'HTTP Request': { main: [[{ node: 'After', type: 'main', index: 0 }]] },
			},
		},
	};
}

const quantile = (xs: number[], q: number) => {
	const s = [...xs].sort((a, b) => a - b);
	return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};

/** Per node after the trigger, in run order: the median time it ran, and the median gap before it. */
function nodeTimes(executions: N8nExecution[]): string {
	const ran = new Map<string, number[]>();
	const gaps = new Map<string, number[]>();
	for (const execution of executions) {
		const runs = Object.entries(execution.data!.resultData.runData)
			.map(([name, [run]]) => ({ name, start: run.startTime, ms: run.executionTime }))
			.sort((a, b) => a.start - b.start);
		for (let i = 1; i < runs.length; i++) {
			const { name, start, ms } = runs[i];
			ran.set(name, [...(ran.get(name) ?? []), ms]);
			gaps.set(name, [...(gaps.get(name) ?? []), start - (runs[i - 1].start + runs[i - 1].ms)]);
		}
	}
	return [...ran.keys()].map((name) => `${name} ${quantile(ran.get(name)!, 0.5)} · ${quantile(gaps.get(name)!, 0.5)}`).join('; ');
}

async function main() {
	let sent = 0;
	const sink = http.createServer((req, res) => {
		req.resume();
		req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: `msg-${++sent}` })));
	});
	await new Promise<void>((r) => sink.listen(0, '127.0.0.1', r));
	const sinkUrl = `http://127.0.0.1:${(sink.address() as { port: number }).port}/messages`;
	const proxy = await countingPostgresProxy();
	const table = uniqueLedgerTable('bench_webhook');
	const n8n = await startN8n({ withPackage: true });
	try {
		await n8n.setupOwner();
		await n8n.createApiKey();
		const credential = (await n8n.createCredential({ name: 'Ledger', type: 'idempotencyPostgresApi', data: { ...ledgerCredentialData(table), host: '127.0.0.1', port: proxy.port } })).id;
		for (const workflow of Object.values(flows(sinkUrl, credential))) await n8n.deploy(workflow);
		const times: Record<Flow, number[]> = { ours: [], baseline: [], floor: [] };
		let trips = 0;
		const stats = new Client({ connectionString: DATABASE_URL });
		await stats.connect();
		const commitsNow = async () => {
			await new Promise((r) => setTimeout(r, 1_500)); // cumulative statistics are flushed within a second
			return Number((await stats.query('SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()')).rows[0].xact_commit);
		};
		let commitsBefore = 0;
		for (let i = 0; i < WARMUP + EVENTS; i++) {
			if (i === WARMUP) commitsBefore = await commitsNow();
			for (const kind of FLOWS) {
				const before = proxy.count;
				const started = performance.now();
				const res = await n8n.post(`bench-${kind}`, { id: `event-${i}-${randomUUID()}` });
				const ms = performance.now() - started;
				if (res.status !== 200) throw new Error(`${kind} event ${i}: HTTP ${res.status} ${res.text.slice(0, 300)}`);
				if (i < WARMUP) continue;
				times[kind].push(ms);
				if (kind === 'ours') trips += proxy.count - before;
			}
		}
		const commits = (await commitsNow()) - commitsBefore;
		await stats.end();
		const traced: Record<Flow, string> = { ours: '', baseline: '', floor: '' };
		for (const [kind, workflow] of Object.entries(flows(sinkUrl, credential)) as Array<[Flow, WorkflowJson]>) {
			const hook = workflow.nodes[0] as { parameters: Record<string, unknown>; webhookId: string };
			hook.parameters = { ...hook.parameters, path: `bench-${kind}-traced` };
			hook.webhookId = randomUUID();
			traced[kind] = await n8n.deploy({ ...workflow, name: `${workflow.name} (traced)`, settings: { ...workflow.settings, saveDataSuccessExecution: 'all' } });
		}
		for (let i = 0; i < TRACED; i++) for (const kind of FLOWS) await n8n.post(`bench-${kind}-traced`, { id: `traced-${i}-${randomUUID()}` });
		const row = (kind: Flow) => `| ${LABEL[kind]} | ${quantile(times[kind], 0.5).toFixed(1)} ms | ${quantile(times[kind], 0.99).toFixed(1)} ms |`;
		console.log(`\n${EVENTS} events each, one at a time, n8n ${process.env.N8N_VERSION ?? '2.41.1'}\n\n| flow | p50 | p99 |\n|---|---|---|\n${FLOWS.map(row).join('\n')}`);
		const adds = (kind: Flow, q: number) => (quantile(times[kind], q) - quantile(times.baseline, q)).toFixed(1);
		console.log(`\nours adds: p50 ${adds('ours', 0.5)} ms, p99 ${adds('ours', 0.99)} ms (targets ≤ 5 and ≤ 15); two No Operation nodes add: p50 ${adds('floor', 0.5)} ms, p99 ${adds('floor', 0.99)} ms`);
		console.log(`ledger per event: ${(trips / EVENTS).toFixed(1)} round trips, ${(commits / EVENTS).toFixed(1)} transactions; the sink got ${sent} requests for ${FLOWS.length * (WARMUP + EVENTS + TRACED)} events`);
		console.log(`\nWhere the time goes, from n8n's record of ${TRACED} traced events a flow (p50, ms): node ran · gap n8n left before it\n`);
		for (const kind of FLOWS) console.log(`- ${LABEL[kind]}: ${nodeTimes(await n8n.waitForExecutions(traced[kind], TRACED, { includeData: true }))}`);
	} finally {
		await n8n.stop();
		await proxy.close();
		await new LedgerTables(table).drop().catch(() => undefined);
		sink.close();
	}
}

main().then(
	() => process.exit(0),
	(error) => {
		console.error(error);
		process.exit(1);
	},
);
