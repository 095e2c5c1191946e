/**
 * npm run bench:items — one execution of many items through Dedupe Gate, against n8n's No
 * Operation on the same items, in a real n8n (N8N_VERSION, default 2.41.1; the package installed
 * the user's way by the e2e harness):
 *
 *   Webhook → Items (Code: N items { id }) → the node under test → Keep One (Limit: 1) → answer
 *
 * The gate reads the key by Field Name (`id`) on the PostgreSQL ledger, every setting else at its
 * default (keys marked done when the execution succeeds). For each size (BENCH_ITEM_SIZES, default
 * 10000,100000,1000000) and node, a fresh n8n runs BENCH_ITEM_RUNS executions (default 3; 1 at
 * 1,000,000) of new keys. It reports:
 * - the time of the execution (the webhook's answer, the run data is not saved) and the gate's
 *   time per item: its execution's time minus No Operation's, over N;
 * - the n8n process's peak memory (VmHWM of the process that executes: n8n's main process, the
 *   Code node's task runner apart), above its memory before the first execution.
 * Figures are medians; the ratio of the gate's time per item at the largest size to the smallest
 * is the drift the target bounds (≤ 1.3).
 */
import * as fs from 'fs';
import { randomUUID } from 'crypto';

import { startN8n, type N8nInstance, type WorkflowJson } from '../../test/e2e/support/n8n';
import { ledgerCredentialData, LedgerTables, uniqueLedgerTable } from '../../test/e2e/support/standIns';

const SIZES = (process.env.BENCH_ITEM_SIZES ?? '10000,100000,1000000').split(',').map(Number);
const RUNS = Number(process.env.BENCH_ITEM_RUNS ?? 3);
const runsAt = (size: number) => (size >= 1_000_000 ? Math.min(RUNS, 1) : RUNS);

type Kind = 'noop' | 'gate';

function flow(kind: Kind, path: string, size: number, credential: string): WorkflowJson {
	const node = (name: string, type: string, typeVersion: number, x: number, parameters: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({ id: randomUUID(), name, type, typeVersion, position: [x, 0], parameters, ...extra });
	const tested =
		kind === 'gate'
			? node('Node Under Test', 'n8n-nodes-idempotency.dedupeGate', 1, 440, { keySource: 'field', keyField: 'id', options: { namespace: `bench-items-${path}` } }, { credentials: { idempotencyPostgresApi: { id: credential, name: 'Ledger' } } })
			: node('Node Under Test', 'n8n-nodes-base.noOp', 1, 440, {});
	// Keys new to the ledger in every execution: the run's id in each.
	const code = `const run = $execution.id; const out = new Array(${size}); for (let i = 0; i < ${size}; i++) out[i] = { json: { id: run + '-' + i } }; return out;`;
	return {
		name: `bench items ${kind} ${size}`,
		nodes: [
			node('Webhook', 'n8n-nodes-base.webhook', 2, 0, { httpMethod: 'POST', path, responseMode: 'lastNode', options: {} }, { webhookId: randomUUID() }),
			node('Items', 'n8n-nodes-base.code', 2, 220, { jsCode: code }),
			tested,
			node('Keep One', 'n8n-nodes-base.limit', 1, 660, { maxItems: 1 }),
		],
		connections: {
			Webhook: { main: [[{ node: 'Items', type: 'main', index: 0 }]] },
			Items: { main: [[{ node: 'Node Under Test', type: 'main', index: 0 }]] },
			'Node Under Test': { main: [[{ node: 'Keep One', type: 'main', index: 0 }]] },
		},
		settings: { executionOrder: 'v1', saveDataSuccessExecution: 'none', saveManualExecutions: false },
	};
}

/** kB of a /proc/<pid>/status field. */
function statusKb(pid: number, field: 'VmHWM' | 'VmRSS'): number {
	const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
	return m ? Number(m[1]) : NaN;
}

/** The process that runs n8n's executions: the `n8n start` node process (its children are task runners). */
function mainPid(n8n: N8nInstance): number {
	return n8n.pid!;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function measure(kind: Kind, size: number, table: string): Promise<{ ms: number[]; peakMb: number }> {
	const n8n = await startN8n({ withPackage: true, env: { EXECUTIONS_DATA_SAVE_ON_SUCCESS: 'none', N8N_PAYLOAD_SIZE_MAX: '1024' } });
	try {
		await n8n.setupOwner();
		await n8n.createApiKey();
		const credential = (await n8n.createCredential({ name: 'Ledger', type: 'idempotencyPostgresApi', data: ledgerCredentialData(table) })).id;
		const path = `items-${kind}-${size}-${randomUUID().slice(0, 6)}`;
		await n8n.deploy(flow(kind, path, size, credential));
		const pid = mainPid(n8n);
		const before = statusKb(pid, 'VmRSS');
		const ms: number[] = [];
		for (let run = 0; run < runsAt(size); run++) {
			const started = performance.now();
			const res = await n8n.post(path, {}, { timeoutMs: 30 * 60_000 });
			if (res.status !== 200) throw new Error(`${kind} ${size}: HTTP ${res.status} ${res.text.slice(0, 300)}`);
			ms.push(performance.now() - started);
		}
		return { ms, peakMb: (statusKb(pid, 'VmHWM') - before) / 1024 };
	} finally {
		await n8n.stop();
	}
}

async function main() {
	const table = uniqueLedgerTable('bench_items');
	const ledger = new LedgerTables(table);
	const rows: string[] = [];
	const perItem: Record<number, number> = {};
	try {
		for (const size of SIZES) {
			const noop = await measure('noop', size, table);
			const gate = await measure('gate', size, table);
			const added = median(gate.ms) - median(noop.ms);
			perItem[size] = (added * 1000) / size;
			rows.push(
				`| ${size.toLocaleString('en-US')} | ${runsAt(size)} | ${(median(noop.ms) / 1000).toFixed(2)} s | ${(median(gate.ms) / 1000).toFixed(2)} s | ${perItem[size].toFixed(2)} µs | ${noop.peakMb.toFixed(0)} MB | ${gate.peakMb.toFixed(0)} MB | ${(gate.peakMb - noop.peakMb).toFixed(0)} MB |`,
			);
			console.log(rows.at(-1));
		}
	} finally {
		await ledger.drop().catch(() => undefined);
	}
	const smallest = Math.min(...SIZES);
	const largest = Math.max(...SIZES);
	console.log(`\n| items | runs | No Operation | Dedupe Gate | gate's time per item | No Operation peak | gate peak | gate over No Operation |\n|---|---|---|---|---|---|---|---|\n${rows.join('\n')}`);
	console.log(`\ngate's time per item at ${largest.toLocaleString('en-US')} over ${smallest.toLocaleString('en-US')}: ${(perItem[largest] / perItem[smallest]).toFixed(2)} (target ≤ 1.3)`);
}

main().then(
	() => process.exit(0),
	(error) => {
		console.error(error);
		process.exit(1);
	},
);
