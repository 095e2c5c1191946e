import { spawn } from 'child_process';

/**
 * One racer process of a multi-process race test. The child script loads, connects, prints
 * "ready\n", then reads a shared start instant (epoch ms) from stdin, waits for it, races, and
 * prints its result as JSON. `ready` resolves once it is loaded and connected, so a loaded
 * machine cannot stagger the start; `done` resolves with the parsed result.
 */
export function racer<T>(script: string, args: string[]) {
	const child = spawn(process.execPath, [script, ...args], { env: process.env, stdio: ['pipe', 'pipe', 'pipe'] });
	let out = '';
	let err = '';
	let markReady: () => void;
	const ready = new Promise<void>((resolve) => (markReady = resolve));
	child.stdout.on('data', (d) => {
		out += d;
		if (out.startsWith('ready\n')) markReady();
	});
	child.stderr.on('data', (d) => (err += d));
	const done = new Promise<T>((resolve, reject) =>
		child.on('close', (code) =>
			code === 0 ? resolve(JSON.parse(out.slice('ready\n'.length)) as T) : reject(new Error(`racer exited ${code}: ${err}`)),
		),
	);
	done.catch(() => markReady());
	return { ready, done, start: (at: number) => child.stdin.end(`${at}\n`) };
}

/** Starts all racers at one shared instant a little ahead, once every one of them is ready. */
export async function race<T>(racers: Array<ReturnType<typeof racer<T>>>): Promise<T[]> {
	await Promise.all(racers.map((r) => r.ready));
	const startAt = Date.now() + 300;
	racers.forEach((r) => r.start(startAt));
	return Promise.all(racers.map((r) => r.done));
}

/**
 * One round of a multi-process claim race (the children run fixtures/claimRaceChild.js's loop):
 * `processes` racers of `script`, racer `p` with `argsFor(p)`, started at one instant. Expects each
 * of the `keys` keys won exactly once across them; returns their results and how many of them won
 * something (a round where one process won everything is a legitimate outcome of the scheduler).
 */
export async function claimRound<T extends { pid: number; won: string[] }>(script: string, processes: number, keys: number, argsFor: (p: number) => string[]) {
	const results = await race(Array.from({ length: processes }, (_, p) => racer<T>(script, argsFor(p))));
	const wins = new Map<string, number>();
	for (const r of results) for (const key of r.won) wins.set(key, (wins.get(key) ?? 0) + 1);
	expect(results.reduce((n, r) => n + r.won.length, 0)).toBe(keys);
	expect(wins.size).toBe(keys);
	expect([...wins.values()].every((n) => n === 1)).toBe(true);
	return { results, winners: results.filter((r) => r.won.length > 0).length };
}
