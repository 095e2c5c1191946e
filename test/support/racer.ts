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
