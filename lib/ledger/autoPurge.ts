import type { AutoPurgeOptions } from './types';

/**
 * The retention the pooled ledgers keep without a cron job: a turn may start every 10 s and drains
 * up to 50 batches of 2,000 rows while each comes back full, so one process deletes up to 10,000
 * expired rows a second, ten times the steady rate it is built for, and a backlog left by an older
 * version goes in turns of 100,000 rows. A batch of 2,000 holds its row locks for tens of
 * milliseconds, and only on expired rows: a claim waits on it only for a key it claims again at
 * the moment its expired row is being deleted.
 */
export const DEFAULT_AUTO_PURGE: Required<AutoPurgeOptions> = { everyMs: 10_000, batch: 2_000, maxBatches: 50 };

const nextTurnOfTheLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * A function to call after each claim and add of counts (see AutoPurgeOptions). When a turn is due
 * and none is running in this process, it starts one on the next turn of the event loop, off the
 * caller's path even on a synchronous backend: `purge(batch)` again and again while each call
 * deletes a full batch, at most `maxBatches` times, yielding to the event loop between calls so
 * that claims interleave. Errors end the turn quietly; the next turn tries again. Several
 * processes on one ledger each run their own turns: `purge` must take rows other purges do not
 * (SKIP LOCKED on PostgreSQL, one writer at a time on SQLite, atomic scripts on Redis).
 * A no-op without options.
 */
export function backgroundPurge(options: AutoPurgeOptions | undefined, purge: (batch: number) => Promise<number>): () => void {
	if (!options) return () => undefined;
	const { everyMs, batch } = options;
	const maxBatches = Math.max(1, options.maxBatches ?? DEFAULT_AUTO_PURGE.maxBatches);
	let last = Date.now();
	let running = false;
	const turn = async () => {
		try {
			for (let i = 0; i < maxBatches; i++) {
				if ((await purge(batch)) < batch) return;
				await nextTurnOfTheLoop();
			}
		} catch {
			// The ledger's own error for an outage; the claim path reports those, the next turn retries.
		} finally {
			running = false;
		}
	};
	return () => {
		if (running || Date.now() - last < everyMs) return;
		last = Date.now();
		running = true;
		setImmediate(() => void turn());
	};
}
