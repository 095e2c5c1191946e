import { fork, type ChildProcess } from 'child_process';
import http from 'http';
import type { AddressInfo } from 'net';
import path from 'path';

import { promptCacheStats } from '../../nodes/PromptCache/stats';
import { freshPostgresLedger, settingsFromUrl } from '../support/db';

const CHILD = path.join(__dirname, 'fixtures', 'prompt-singleflight-child.js');
const PROCESSES = 6;

interface ChildResult {
	outcome: 'hit' | 'miss' | null;
	computing: boolean | null;
	lookupReason: string | null;
	storeOutcome: string | null;
	storeReason: string | null;
	storeShadow: { sameAsCached?: boolean } | null;
	error: string | null;
}

/**
 * Shadow mode under concurrency (issue 32): runs that ask the model about a prompt while another
 * run holds its reservation go to Miss at once (shadow mode never waits) and ask the model too.
 * When their Store comes, the first run's answer is stored: each of them is compared with it and
 * counted, like a repeat that found the answer in the cache at its Lookup. Before, they were
 * reported as "Another run stored an answer for this prompt first" and left out of `compared`.
 *
 * 6 OS processes, each with its own pool and n8n engine, run the same new prompt at one instant
 * against the real PostgreSQL. The stand-in LLM server answers the run that holds the reservation
 * once a repeat has asked it too (a repeat asks the model only after its Lookup found the prompt
 * reserved), and the others only once that answer is stored in the ledger, so the race is real and
 * every repeat's Store comes after the holder's whatever the machine's load: under a loaded CI, a
 * holder answered at once stored before any repeat looked up. It answers half of the repeats with
 * the same text as the stored answer and half with another, so both counts are checked.
 */
describe('Prompt Cache shadow mode: concurrent repeats are compared with the answer stored first', () => {
	let fx: Awaited<ReturnType<typeof freshPostgresLedger>>;
	let server: http.Server;
	let url: string;
	const served: Array<{ computing: boolean; same: boolean }> = [];
	let repeatAsked: () => void;
	const aRepeatAsked = new Promise<void>((resolve) => (repeatAsked = resolve));

	const stored = async (hash: string) =>
		(await fx.pool.query(`SELECT 1 FROM "${fx.table}" WHERE key = $1 AND status = 'completed'`, [hash])).rowCount === 1;

	beforeAll(async () => {
		fx = await freshPostgresLedger();
		server = http.createServer((req, res) => {
			let body = '';
			req.on('data', (chunk) => (body += chunk));
			req.on('end', async () => {
				const { prompt, computing, promptHash } = JSON.parse(body) as { prompt: string; computing: boolean; promptHash: string };
				// The holder once a repeat has asked too (or after 20 s, and the test fails); every
				// other run once the holder's answer is in the ledger.
				if (computing) await Promise.race([aRepeatAsked, new Promise((r) => setTimeout(r, 20_000))]);
				else repeatAsked();
				for (let waited = 0; !computing && !(await stored(promptHash)) && waited < 20_000; waited += 50) await new Promise((r) => setTimeout(r, 50));
				const same = computing || served.filter((s) => !s.computing).length % 2 === 0;
				served.push({ computing, same });
				res.setHeader('content-type', 'application/json');
				res.end(
					JSON.stringify({
						model: 'gpt-4o-mini',
						choices: [{ index: 0, message: { role: 'assistant', content: same ? `The answer to "${prompt}"` : `Another answer to "${prompt}" (${served.length})` } }],
						usage: { prompt_tokens: 20, completion_tokens: 10, total_tokens: 30 },
					}),
				);
			});
		});
		await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
		url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/chat/completions`;
	});
	afterAll(async () => {
		await new Promise((resolve) => server?.close(resolve));
		if (fx) await fx.dispose();
	});

	test(`${PROCESSES} processes, one new prompt in shadow mode: every repeat is compared and counted`, async () => {
		const stamp = Date.now();
		const workflowId = `wf-shadow-race-${stamp}`;
		const rounds = [{ prompt: `Shadow race ${stamp}`, whileComputing: 'wait', options: { shadowMode: true } }];
		const children: ChildProcess[] = [];
		const ready: Array<Promise<void>> = [];
		const done: Array<Promise<{ results: ChildResult[] }>> = [];
		for (let p = 0; p < PROCESSES; p++) {
			const child = fork(CHILD, [JSON.stringify(settingsFromUrl(fx.table)), workflowId, url], { env: process.env, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
			children.push(child);
			let onReady: () => void;
			ready.push(new Promise<void>((resolve) => (onReady = resolve)));
			done.push(
				new Promise((resolve, reject) => {
					child.on('message', (m: { ready?: boolean; results?: ChildResult[] }) => (m.ready ? onReady() : resolve(m as { results: ChildResult[] })));
					child.on('exit', (code) => code !== 0 && reject(new Error(`child ${child.pid} exited with ${code}`)));
				}),
			);
		}
		await Promise.all(ready);
		const starts = [Date.now() + 500];
		for (const child of children) child.send({ rounds, starts });
		const results = (await Promise.all(done)).map((c) => c.results[0]);

		expect(results.map((r) => r.error)).toEqual(Array(PROCESSES).fill(null));
		// Shadow mode: nothing is answered from the cache; one run held the reservation and stored.
		expect(results.map((r) => r.outcome)).toEqual(Array(PROCESSES).fill('miss'));
		const holders = results.filter((r) => r.computing === true);
		expect(holders).toHaveLength(1);
		expect(holders[0].storeOutcome).toBe('stored');
		const repeats = results.filter((r) => r.computing !== true);
		// The race was real: repeats found the prompt reserved by another run at their Lookup.
		const concurrent = repeats.filter((r) => r.lookupReason === 'Shadow mode: another run is asking the model for this prompt right now');
		console.log(`shadow race: ${concurrent.length} of ${repeats.length} repeats looked up while the first run was asking the model`);
		expect(concurrent.length).toBeGreaterThan(0);

		// Every repeat was compared with the stored answer, and says how it compared.
		expect(repeats.map((r) => r.storeOutcome)).toEqual(Array(PROCESSES - 1).fill('not_stored'));
		expect(repeats.map((r) => typeof r.storeShadow?.sameAsCached)).toEqual(Array(PROCESSES - 1).fill('boolean'));
		const differed = served.filter((s) => !s.computing && !s.same).length;
		expect(repeats.filter((r) => r.storeShadow?.sameAsCached === false)).toHaveLength(differed);
		const stats = await promptCacheStats(fx.ledger, `workflow:${workflowId}`);
		expect(stats.shadow).toMatchObject({ lookups: PROCESSES, wouldHit: PROCESSES - 1, compared: PROCESSES - 1, differed });
	}, 120_000);
});
