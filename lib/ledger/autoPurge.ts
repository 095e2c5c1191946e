import type { AutoPurgeOptions } from './types';

/**
 * Retention without a cron job (see AutoPurgeOptions): a function to call after each claim and add
 * of counts that, when a purge is due, starts a bounded `purge` on the next turn of the event
 * loop, so that it runs off the caller's path even on a synchronous backend. Its errors are
 * dropped: the next one tries again. A no-op without options.
 */
export function backgroundPurge(options: AutoPurgeOptions | undefined, purge: (batch: number) => Promise<number>): () => void {
	if (!options) return () => undefined;
	const { everyMs, batch } = options;
	let last = Date.now();
	return () => {
		if (Date.now() - last < everyMs) return;
		last = Date.now();
		setImmediate(() => void purge(batch).catch(() => undefined));
	};
}
