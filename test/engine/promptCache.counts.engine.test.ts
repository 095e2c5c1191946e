import { spawn } from 'child_process';
import path from 'path';

import type { IExecuteFunctions } from 'n8n-workflow';

import { PostgresLedger } from '../../lib/ledger/postgres/PostgresLedger';
import type { CountIncrement, Ledger } from '../../lib/ledger/types';
import { COUNT_FLUSH, deferCounts, flushAllCounts, pendingCounts } from '../../lib/n8n/countBuffer';
import { PromptCache } from '../../nodes/PromptCache/PromptCache.node';
import { promptCacheStats } from '../../nodes/PromptCache/stats';
import { FAKE_LLM_TYPE, FakeLlmNode } from '../integration/fixtures/prompt-llm-node';
import { useNodeCreatedTable } from '../support/engineBackends';
import { runWorkflow } from '../support/engine';
import { promptCacheFlow, PROMPT_CACHE_TYPE as TYPE, type FlowOptions } from './promptCacheFlow';

/**
 * A Prompt Cache hit answers without waiting for its counters: they are written after the Lookup
 * returned (lib/n8n/countBuffer.ts), when the execution ends, and are never lost when the process
 * ends cleanly. Get Stats shows them.
 */
const { table, pool, credentials } = useNodeCreatedTable('redispc_counts');
const nodeTypes = { [TYPE]: new PromptCache(), [FAKE_LLM_TYPE]: new FakeLlmNode() };
const inspect = new PostgresLedger({ pool, table });
const CHILD = path.join(__dirname, '..', 'integration', 'fixtures', 'prompt-cache-exit-child.js');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let counter = 0;
const fresh = (what: string) => `${what}-${Date.now()}-${++counter}`;
const flowFor = (namespace: string, prompt: string): FlowOptions => ({ prompts: [{ prompt }], lookup: { options: { namespace } }, llm: { shape: 'openai-full' } });

/** Runs a node process to its end; resolves with its stdout events and exit code. */
function runChild(input: object): Promise<{ code: number | string | null; events: Array<Record<string, unknown>>; stderr: string }> {
	return new Promise((resolve) => {
		// The child runs n8n's legacy expression engine even in `npm run test:vm`: under the vm
		// engine, isolated-vm's thread pool can end a Node 24 process by SIGSEGV in process.exit,
		// after its run (upstream, docs/development.md: "n8n execute ends by SIGSEGV"), seen here as
		// exit code null. What this file tests, the counts written before the process ends, does
		// not depend on the expression engine.
		const env = { ...process.env, TEST_EXPRESSION_ENGINE: 'legacy' };
		const child = spawn(process.execPath, [CHILD, JSON.stringify(input)], { env, stdio: ['ignore', 'pipe', 'pipe'] });
		let stdout = '';
		let stderr = '';
		child.stdout!.on('data', (d) => (stdout += String(d)));
		child.stderr!.on('data', (d) => (stderr += String(d)));
		// A signal is reported in place of the code, so a failure says which.
		child.on('exit', (code, signal) =>
			resolve({
				code: code ?? signal,
				stderr,
				events: stdout
					.split('\n')
					.filter((l) => l.startsWith('{'))
					.map((l) => JSON.parse(l)),
			}),
		);
	});
}

describe('Prompt Cache counters, written off the answer path', () => {
	test('a hit returns before its counters are written; they are in the ledger when the execution ends, and Get Stats shows them', async () => {
		const namespace = fresh('after-answer');
		const wf = fresh('wf');
		await runWorkflow(promptCacheFlow(flowFor(namespace, 'p1')), { credentials, nodeTypes, workflowId: wf }); // a miss, stored
		const events: string[] = [];
		const node = new PromptCache();
		const execute = node.execute;
		node.execute = async function (this: IExecuteFunctions) {
			const out = await execute.call(this);
			if (this.getNodeParameter('operation', 0) === 'lookup') events.push('lookup answered');
			return out;
		};
		const addCounts = PostgresLedger.prototype.addCounts;
		const spy = jest.spyOn(PostgresLedger.prototype, 'addCounts').mockImplementation(async function (this: PostgresLedger, increments: CountIncrement[]) {
			events.push('counts written');
			return addCounts.call(this, increments);
		});
		try {
			const r = await runWorkflow(promptCacheFlow(flowFor(namespace, 'p1')), { credentials, nodeTypes: { ...nodeTypes, [TYPE]: node }, workflowId: wf });
			expect(r.error).toBeUndefined();
			expect(r.outputs('Lookup')[0]).toHaveLength(1);
			// Before this change the Lookup awaited its counter upsert: 'counts written' came first.
			expect(events).toEqual(['lookup answered', 'counts written']);
		} finally {
			spy.mockRestore();
		}
		// The run has ended: its counts are in the ledger, read by another connection.
		expect(await promptCacheStats(inspect, namespace)).toMatchObject({ lookups: 2, hits: 1, misses: 1, tokensSaved: 30 });
	});

	test('a process that exits right after its execution ended, as n8n does on shutdown, has written its counts', async () => {
		const namespace = fresh('exit');
		const wf = fresh('wf');
		await runWorkflow(promptCacheFlow(flowFor(namespace, 'p2')), { credentials, nodeTypes, workflowId: wf }); // a miss, stored
		const flow = promptCacheFlow(flowFor(namespace, 'p2'));
		const lookupOnly = {
			nodes: flow.nodes.filter((n) => ['Trigger', 'Prompts', 'Lookup'].includes(n.name)),
			connections: { Trigger: flow.connections.Trigger, Prompts: flow.connections.Prompts },
		};
		const child = await runChild({ how: 'engine', credentials, workflow: lookupOnly, workflowId: wf });
		expect(child.stderr).toBe('');
		expect(child.code).toBe(0);
		expect(child.events).toEqual([{ event: 'answered', hits: 1 }]);
		expect(await promptCacheStats(inspect, namespace)).toMatchObject({ lookups: 2, hits: 1, misses: 1, tokensSaved: 30 });
	}, 60_000);

	test('a process without execution hooks whose event loop runs empty writes its counts before it ends', async () => {
		const namespace = fresh('loop');
		const child = await runChild({ how: 'loop', table, namespace });
		expect(child.stderr).toBe('');
		expect(child.code).toBe(0);
		expect(child.events).toEqual([{ event: 'answered', hits: 1 }]);
		expect(await promptCacheStats(inspect, namespace)).toMatchObject({ lookups: 1, hits: 1, tokensSaved: 30 });
	}, 60_000);

	test('without execution hooks the counts are written within COUNT_FLUSH.afterMs; a failed write keeps them for the next', async () => {
		const namespace = fresh('timer');
		let failNext = true;
		const warnings: string[] = [];
		const flaky: Ledger = Object.assign(Object.create(inspect) as Ledger, {
			addCounts: async (increments: CountIncrement[]) => {
				if (failNext) {
					failNext = false;
					throw new Error('the ledger did not answer');
				}
				return inspect.addCounts(increments);
			},
		});
		const saved = COUNT_FLUSH.afterMs;
		COUNT_FLUSH.afterMs = 100;
		try {
			const warnCtx = { getNode: () => ({ name: 'Lookup' }), logger: { warn: (m: string) => warnings.push(m) } } as unknown as IExecuteFunctions;
			deferCounts(warnCtx, flaky, [{ namespace, counts: { lookups: 1, hits: 1, moneySaved: 0.1 } }]);
			deferCounts(warnCtx, flaky, [{ namespace, counts: { lookups: 1, hits: 1, moneySaved: 0.2 } }]);
			expect(pendingCounts(flaky)).toBe(1);
			// The first write fails: the counts stay, a warning says so. Checked as soon as the
			// warning is there, 200 ms before the retry is due (a fixed sleep of 300 ms raced the
			// retry on a loaded machine).
			const failureWarned = () => warnings.some((w) => /could not be written to the ledger yet/.test(w));
			for (let i = 0; i < 100 && !failureWarned(); i++) await sleep(10);
			const failedAt = performance.now();
			expect(warnings.join(' ')).toMatch(/could not be written to the ledger yet/);
			expect(pendingCounts(flaky)).toBe(1);
			// The next one (twice the wait after a failure) writes them, exactly once.
			for (let i = 0; i < 200 && pendingCounts(flaky) > 0; i++) await sleep(10);
			expect(pendingCounts(flaky)).toBe(0);
			expect(performance.now() - failedAt).toBeGreaterThanOrEqual(150);
			// Counts leave the buffer when their write starts: wait for that write to land (on a
			// loaded machine it had not when the stats were read), with nothing left to write again.
			await flushAllCounts();
			expect(await promptCacheStats(inspect, namespace)).toMatchObject({ lookups: 2, hits: 2, moneySaved: 0.3 });
		} finally {
			COUNT_FLUSH.afterMs = saved;
			await flushAllCounts();
		}
	});
});
