/**
 * `npm start`'s progress while n8n installs (scripts/progress.ts): every phase line with the time
 * since the start, and a "still at" line every interval in between, so a first start is never
 * silent for longer than that (30 s in npm start; shortened here).
 */
import { progressPrinter } from '../../scripts/progress';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('phase lines with elapsed time, and "still at" the current phase every interval until the work settles', async () => {
	const lines: Array<{ at: number; line: string }> = [];
	const started = Date.now();
	const progress = progressPrinter((line) => lines.push({ at: Date.now() - started, line }), 100, started);
	await progress.during(async () => {
		progress.phase('installing n8n@2.41.1 into /cache with --ignore-scripts (about 4 to 6 minutes, 2.9 GB)');
		await sleep(450);
		progress.phase('building sqlite3 (1 to 2.5 minutes)');
		await sleep(250);
	});
	const settled = lines.length;
	await sleep(250);
	expect(lines.length).toBe(settled); // nothing after the work settled
	expect(lines[0].line).toBe('0 s  installing n8n@2.41.1 into /cache with --ignore-scripts (about 4 to 6 minutes, 2.9 GB)');
	const still = lines.filter((l) => l.line.includes('still at: installing n8n@2.41.1 into /cache with --ignore-scripts')).length;
	expect(still).toBeGreaterThanOrEqual(3);
	expect(lines.some((l) => l.line.endsWith('still at: building sqlite3'))).toBe(true);
	// Never silent for more than about one interval.
	const gaps = lines.slice(1).map((l, i) => l.at - lines[i].at);
	expect(Math.max(...gaps)).toBeLessThan(250);
});
