import { fork, type ChildProcess } from 'child_process';
import http from 'http';
import type { AddressInfo } from 'net';
import path from 'path';

import { freshPostgresLedger, settingsFromUrl } from '../support/db';

const CHILD = path.join(__dirname, 'fixtures', 'prompt-singleflight-child.js');
const PROCESSES = 8;
const ROUNDS = 3;
const LLM_LATENCY_MS = 600;

interface ChildResult {
	round: number;
	late: boolean;
	startedAt: number;
	finishedAt: number;
	outcome: 'hit' | 'miss' | null;
	computing: boolean | null;
	waitedMs: number | null;
	text: string | null;
	storeOutcome: string | null;
	error: string | null;
}

/**
 * Single flight across processes: 8 OS processes, each with its own connection pool and its own
 * n8n engine, run the same workflow on the same new prompt at the same instant. The stand-in LLM
 * server on 127.0.0.1 must receive exactly one call per prompt; every run must end with the same
 * text.
 */
describe('Prompt Cache single flight: 8 processes, one new prompt, one LLM call', () => {
	let fx: Awaited<ReturnType<typeof freshPostgresLedger>>;
	let server: http.Server;
	let url: string;
	const calls = new Map<string, number>();

	beforeAll(async () => {
		fx = await freshPostgresLedger();
		server = http.createServer((req, res) => {
			let body = '';
			req.on('data', (chunk) => (body += chunk));
			req.on('end', () => {
				const { prompt } = JSON.parse(body) as { prompt: string };
				const n = (calls.get(prompt) ?? 0) + 1;
				calls.set(prompt, n);
				setTimeout(() => {
					res.setHeader('content-type', 'application/json');
					res.end(
						JSON.stringify({
							id: `chatcmpl-${n}`,
							model: 'gpt-4o-mini',
							choices: [{ index: 0, message: { role: 'assistant', content: `Answer #${n} to "${prompt}" (${Math.random()})` } }],
							usage: { prompt_tokens: 20, completion_tokens: 10, total_tokens: 30 },
						}),
					);
				}, LLM_LATENCY_MS);
			});
		});
		await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
		url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/chat/completions`;
	});
	afterAll(async () => {
		await new Promise((resolve) => server?.close(resolve));
		if (fx) await fx.dispose();
	});

	test(`${PROCESSES} processes x ${ROUNDS} rounds: the LLM server is called once per prompt; all runs get the same text`, async () => {
		const stamp = Date.now();
		const prompts = Array.from({ length: ROUNDS }, (_, r) => `Single flight ${stamp} round ${r}`);
		// A last round with single flight off ("Go to Miss") shows the race is real: there, several
		// processes miss together and the server is called more than once.
		const control = `No single flight ${stamp}`;
		const rounds = [...prompts.map((prompt) => ({ prompt, whileComputing: 'wait' })), { prompt: control, whileComputing: 'miss' }];
		const settings = settingsFromUrl(fx.table);
		const children: ChildProcess[] = [];
		const ready: Array<Promise<void>> = [];
		const done: Array<Promise<{ pid: number; results: ChildResult[] }>> = [];
		for (let p = 0; p < PROCESSES; p++) {
			const child = fork(CHILD, [JSON.stringify(settings), `wf-singleflight-${stamp}`, url], { env: process.env, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
			children.push(child);
			let onReady: () => void;
			ready.push(new Promise<void>((resolve) => (onReady = resolve)));
			done.push(
				new Promise((resolve, reject) => {
					child.on('message', (m: { ready?: boolean; results?: ChildResult[]; pid: number }) => (m.ready ? onReady() : resolve(m as { pid: number; results: ChildResult[] })));
					child.on('exit', (code) => code !== 0 && reject(new Error(`child ${child.pid} exited with ${code}`)));
				}),
			);
		}
		// Every process has loaded n8n-core and the node; then the rounds start at shared instants.
		await Promise.all(ready);
		const first = Date.now() + 500;
		const starts = rounds.map((_, r) => first + r * 2500);
		for (const child of children) child.send({ rounds, starts });
		const results = await Promise.all(done);

		for (let round = 0; round < ROUNDS; round++) {
			const inRound = results.map((c) => c.results[round]);
			expect(inRound.every((r) => r.error === null)).toBe(true);
			// A child that reached this round after its start instant (a loaded machine) is only
			// reported: single flight must hold whenever each process arrives.
			const late = inRound.filter((r) => r.late).length;
			const computing = inRound.filter((r) => r.outcome === 'miss' && r.computing === true);
			const hits = inRound.filter((r) => r.outcome === 'hit');
			const spread = Math.max(...inRound.map((r) => r.startedAt)) - Math.min(...inRound.map((r) => r.startedAt));
			console.log(
				`round ${round}: LLM calls ${calls.get(prompts[round])}, ${computing.length} miss, ${hits.length} hits ` +
					`(waited ${hits.map((h) => h.waitedMs).join(', ')} ms), start spread ${spread} ms, ${late} late`,
			);
			expect(calls.get(prompts[round])).toBe(1);
			expect(computing).toHaveLength(1);
			expect(computing[0].storeOutcome).toBe('stored');
			expect(hits).toHaveLength(PROCESSES - 1);
			// Every run, the one that asked and the ones that waited, ends with the same text.
			const texts = new Set(inRound.map((r) => r.text));
			expect(texts.size).toBe(1);
			expect([...texts][0]).toMatch(new RegExp(`^Answer #1 to "${prompts[round]}"`));
			// The race was real: the waiters waited for the one model call rather than arriving after it.
			expect(hits.filter((h) => (h.waitedMs ?? 0) > 0).length).toBeGreaterThan(0);
		}

		const uncontrolled = results.map((c) => c.results[ROUNDS]);
		console.log(
			`control (single flight off): LLM calls ${calls.get(control)}, ${uncontrolled.filter((r) => r.outcome === 'miss').length} misses, ` +
				`${uncontrolled.filter((r) => r.storeOutcome === 'stored').length} stored`,
		);
		expect(calls.get(control)).toBeGreaterThan(1);
		// Even then only the run holding the reservation writes the answer.
		expect(uncontrolled.filter((r) => r.storeOutcome === 'stored')).toHaveLength(1);
	}, 120_000);
});
