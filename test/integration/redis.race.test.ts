import { spawn } from 'child_process';
import path from 'path';

import { namespaceKeys } from '../../lib/ledger/redis/keys';
import { describeIfRedis, freshRedisLedger, redisUrl } from '../support/redis';

const CHILD = path.join(__dirname, 'fixtures', 'redis-race-child.js');
const PROCESSES = 6;
const KEYS = 1000;
const ROUNDS = 5;

/** One racer process: resolves `ready` once it is loaded and connected, `done` with its wins. */
function racer(args: string[]) {
	const child = spawn(process.execPath, [CHILD, ...args], { env: process.env, stdio: ['pipe', 'pipe', 'pipe'] });
	let out = '';
	let err = '';
	let markReady: () => void;
	const ready = new Promise<void>((resolve) => (markReady = resolve));
	child.stdout.on('data', (d) => {
		out += d;
		if (out.startsWith('ready\n')) markReady();
	});
	child.stderr.on('data', (d) => (err += d));
	const done = new Promise<{ pid: number; won: string[] }>((resolve, reject) =>
		child.on('close', (code) =>
			code === 0 ? resolve(JSON.parse(out.slice('ready\n'.length))) : reject(new Error(`racer exited ${code}: ${err}`)),
		),
	);
	done.catch(() => markReady());
	return { ready, done, start: (at: number) => child.stdin.end(`${at}\n`) };
}

/**
 * Several OS processes, each with four connections of its own, claim the same 1,000 keys at the
 * same instant (a shared start time, sent once every process is ready). Every key must be won
 * exactly once across all of them.
 */
describeIfRedis('Redis multi-process race')('Redis claims under a multi-process race', () => {
	let fx: Awaited<ReturnType<typeof freshRedisLedger>>;
	beforeAll(async () => {
		fx = await freshRedisLedger();
	});
	afterAll(async () => fx && (await fx.dispose()));

	for (const mode of ['lease', 'seen'] as const) {
		test(`${PROCESSES} processes x ${KEYS} keys x ${ROUNDS} rounds, mode ${mode}: each key won exactly once`, async () => {
			for (let round = 0; round < ROUNDS; round++) {
				const namespace = `race-${mode}-${round}-${Date.now()}`;
				const children = Array.from({ length: PROCESSES }, (_, p) =>
					racer([redisUrl(), fx.prefix, namespace, String(KEYS), mode, String(round * 100 + p)]),
				);
				// Everyone is loaded and connected; all start at one shared instant a little ahead.
				await Promise.all(children.map((c) => c.ready));
				const startAt = Date.now() + 300;
				children.forEach((c) => c.start(startAt));
				const results = await Promise.all(children.map((c) => c.done));
				const wins = new Map<string, number>();
				for (const r of results) for (const key of r.won) wins.set(key, (wins.get(key) ?? 0) + 1);
				expect(results.reduce((n, r) => n + r.won.length, 0)).toBe(KEYS);
				expect(wins.size).toBe(KEYS);
				expect([...wins.values()].every((n) => n === 1)).toBe(true);
				console.log(`redis ${mode} round ${round}: wins per process ${results.map((r) => r.won.length).join(', ')}`);
				// The race was real: more than one process won something.
				expect(results.filter((r) => r.won.length > 0).length).toBeGreaterThan(1);
				expect(await fx.client.zcard(namespaceKeys(fx.prefix, namespace).fixed[0])).toBe(KEYS);
				const stats = await fx.ledger.stats(namespace);
				expect(stats.byStatus[mode === 'lease' ? 'in_progress' : 'completed']).toBe(KEYS);
				expect(stats.duplicatesBlocked).toBe(KEYS * (PROCESSES - 1));
			}
		}, 180_000);
	}
});
