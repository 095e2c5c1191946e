/**
 * Proves the real-n8n harness (test/e2e/support/n8n.ts) with n8n's built-in nodes: boot on our
 * PostgreSQL, owner + API key, a webhook workflow answered after its last node, the execution read
 * back through the public API, a crash (SIGKILL) and restart, `n8n execute` next to the running
 * server, and the refusal of a workflow whose node type is not installed.
 * Prints the figures it measured (boot, webhook round trip, Remove Duplicates v2 on 1,000 items).
 */
import { execFileSync } from 'child_process';
import { randomUUID } from 'crypto';
import { readFileSync } from 'fs';
import path from 'path';
import { performance } from 'perf_hooks';

import {
	ensureRuntime,
	N8nHttpError,
	N8nInstance,
	nodeExecutionTime,
	nodeOutput,
	PACKAGE_NAME,
	startN8n,
	type WorkflowJson,
} from './support/n8n';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { MATRIX } = require('./support/matrix') as { MATRIX: Array<{ version: string; node: number; n8nWorkflow: string }> };

// The 10,000-item head-to-head is npm run bench:n8n; here n8n execute only has to work.
const ITEMS = 1_000;
const figures: Record<string, string> = {};
const suiteStarted = performance.now();

function webhookWorkflow(path: string): WorkflowJson {
	return {
		name: `smoke webhook ${path}`,
		nodes: [
			{
				id: randomUUID(),
				name: 'Webhook',
				type: 'n8n-nodes-base.webhook',
				typeVersion: 2,
				position: [0, 0],
				webhookId: randomUUID(),
				parameters: { httpMethod: 'POST', path, responseMode: 'lastNode', options: {} },
			},
			{
				id: randomUUID(),
				name: 'Code',
				type: 'n8n-nodes-base.code',
				typeVersion: 2,
				position: [220, 0],
				parameters: { jsCode: 'return $input.all().map((item) => ({ json: { ...item.json.body, seen: true } }));' },
			},
		],
		connections: { Webhook: { main: [[{ node: 'Code', type: 'main', index: 0 }]] } },
		settings: { executionOrder: 'v1' },
	};
}

const removeDuplicatesWorkflow: WorkflowJson = {
	name: 'smoke remove duplicates',
	nodes: [
		{
			id: randomUUID(),
			name: 'Manual',
			type: 'n8n-nodes-base.manualTrigger',
			typeVersion: 1,
			position: [0, 0],
			parameters: {},
		},
		{
			id: randomUUID(),
			name: 'Items',
			type: 'n8n-nodes-base.code',
			typeVersion: 2,
			position: [220, 0],
			parameters: { jsCode: `return Array.from({ length: ${ITEMS} }, (_, i) => ({ json: { id: i } }));` },
		},
		{
			id: randomUUID(),
			name: 'Remove Duplicates',
			type: 'n8n-nodes-base.removeDuplicates',
			typeVersion: 2,
			position: [440, 0],
			// n8n-nodes-base/dist/nodes/Transform/RemoveDuplicates/v2: logic defaults to
			// removeItemsWithAlreadySeenKeyValues, options.historySize to 10000. With the default, a
			// second run whose items plus history exceed it fails outright ("exceeds the maximum
			// history size"), so the history is raised as a user would have to.
			parameters: { operation: 'removeItemsSeenInPreviousExecutions', dedupeValue: '={{ $json.id }}', options: { historySize: 100000 } },
		},
	],
	connections: {
		Manual: { main: [[{ node: 'Items', type: 'main', index: 0 }]] },
		Items: { main: [[{ node: 'Remove Duplicates', type: 'main', index: 0 }]] },
	},
	settings: { executionOrder: 'v1' },
};

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

describe('real n8n harness (built-in nodes)', () => {
	let n8n: N8nInstance | undefined;
	let webhookWorkflowId: string;

	beforeAll(async () => {
		const t0 = performance.now();
		const runtime = await ensureRuntime();
		figures['runtime check (scripts/n8n-runtime.sh, warm)'] = `${Math.round(performance.now() - t0)} ms (n8n ${runtime.version})`;
		const t1 = performance.now();
		n8n = await startN8n({ withPackage: true });
		figures['installPackage + boot'] = `${Math.round(performance.now() - t1)} ms`;
		figures['boot to /healthz/readiness'] = `${Math.round(n8n.bootMs)} ms`;
		await n8n.setupOwner();
		await n8n.createApiKey();
	});

	afterAll(async () => {
		if (n8n) console.log(`n8n log: ${n8n.logFile}`);
		await n8n?.stop();
		figures['whole smoke suite'] = `${Math.round((performance.now() - suiteStarted) / 1000)} s`;
		console.log(
			'real n8n smoke figures:\n' +
				Object.entries(figures)
					.map(([k, v]) => `  ${k}: ${v}`)
					.join('\n'),
		);
	});

	it('loads the package installed the user way, under its package name', async () => {
		const types = await n8n!.nodeTypes();
		const ours = types.filter((t) => t.startsWith(`${PACKAGE_NAME}.`));
		figures['our node types loaded'] = ours.join(', ');
		expect(ours.length).toBeGreaterThan(0);
		expect(types).toContain('n8n-nodes-base.removeDuplicates');
	});

	it('is the n8n of the matrix: the version asked for, on its Node, with the n8n-workflow the peer range names', async () => {
		const runtime = await ensureRuntime();
		const entry = MATRIX.find((m) => m.version === runtime.version);
		expect(entry).toBeDefined();
		expect(execFileSync(runtime.nodeBin, ['-v'], { encoding: 'utf8' })).toMatch(new RegExp(`^v${entry!.node}\\.`));
		const workflowPackage = JSON.parse(readFileSync(path.join(runtime.n8nDir, 'node_modules', 'n8n-workflow', 'package.json'), 'utf8'));
		expect(workflowPackage.version).toBe(entry!.n8nWorkflow);
	});

	it('answers a webhook after its last node and records the execution', async () => {
		webhookWorkflowId = await n8n!.deploy(webhookWorkflow('smoke'));
		const res = await n8n!.post('smoke', { hello: 'world' });
		expect(res.status).toBe(200);
		expect(res.body).toEqual({ hello: 'world', seen: true });

		const [execution] = await n8n!.waitForExecutions(webhookWorkflowId, 1);
		expect(execution.status).toBe('success');
		expect(execution.mode).toBe('webhook');
		expect(nodeOutput(execution, 'Code')).toEqual([{ hello: 'world', seen: true }]);
		expect(nodeExecutionTime(execution, 'Code')).toBeGreaterThanOrEqual(0);

		const times: number[] = [];
		for (let i = 0; i < 20; i++) {
			const r = await n8n!.post('smoke', { i });
			expect(r.body).toEqual({ i, seen: true });
			times.push(r.ms);
		}
		figures['webhook round trip, Webhook -> Code, lastNode, 20 sequential POSTs'] =
			`median ${median(times).toFixed(0)} ms, min ${Math.min(...times).toFixed(0)} ms, max ${Math.max(...times).toFixed(0)} ms`;
	});

	it('refuses to activate a workflow whose node type is not installed', async () => {
		const workflow = webhookWorkflow('missing-node');
		(workflow.nodes[1] as { type: string; typeVersion: number }).type = `${PACKAGE_NAME}.doesNotExist`;
		(workflow.nodes[1] as { type: string; typeVersion: number }).typeVersion = 1;
		const { id } = await n8n!.createWorkflow(workflow);
		const failure = await n8n!.activate(id).then(
			() => undefined,
			(e: unknown) => e,
		);
		expect(failure).toBeInstanceOf(N8nHttpError);
		expect((failure as N8nHttpError).status).toBe(400);
		expect((failure as N8nHttpError).text).toMatch(/Unrecognized node type/);
	});

	it('runs Remove Duplicates v2 on 1,000 items with n8n execute, first sight then duplicates', async () => {
		const { id: workflowId } = await n8n!.createWorkflow(removeDuplicatesWorkflow);
		const first = await n8n!.executeCli(workflowId);
		expect(nodeOutput(first.run, 'Items')).toHaveLength(ITEMS);
		expect(nodeOutput(first.run, 'Remove Duplicates')).toHaveLength(ITEMS);

		const second = await n8n!.executeCli(workflowId);
		expect(nodeOutput(second.run, 'Remove Duplicates')).toHaveLength(0);

		const firstMs = nodeExecutionTime(first.run, 'Remove Duplicates');
		const secondMs = nodeExecutionTime(second.run, 'Remove Duplicates');
		figures[`Remove Duplicates v2, ${ITEMS} items, first sight (executionTime)`] = `${firstMs} ms`;
		figures[`Remove Duplicates v2, ${ITEMS} items, all duplicates (executionTime)`] = `${secondMs} ms`;
		figures['n8n execute wall time (boot included)'] = `${Math.round(first.ms)} ms, ${Math.round(second.ms)} ms`;
		console.log(`Remove Duplicates v2 on ${ITEMS} items: first sight ${firstMs} ms, duplicates ${secondMs} ms`);
	});

	it('survives SIGKILL: restarted on the same database, the webhook answers again', async () => {
		await n8n!.kill('SIGKILL');
		expect(n8n!.running).toBe(false);
		await n8n!.restart();
		figures['restart (same database) to readiness'] = `${Math.round(n8n!.bootMs)} ms`;
		const t = performance.now();
		await n8n!.waitForWebhook('smoke');
		figures['readiness to webhook registered, after restart'] = `${Math.round(performance.now() - t)} ms`;
		const res = await n8n!.post('smoke', { after: 'crash' });
		expect(res.body).toEqual({ after: 'crash', seen: true });
	});
});
