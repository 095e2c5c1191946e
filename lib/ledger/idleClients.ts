/**
 * The one rule by which the PostgreSQL and Redis connection caches (postgres/connect.ts,
 * redis/connect.ts) close a client: nobody asked the cache for it, and its ledger made no call,
 * for IDLE_DROP_MS. A node that holds its ledger through a long execution (a Guarded Send of many
 * items, a lease keeper, a long agent run) asks the cache once, then only calls the ledger; those
 * calls count as use, so its client is not closed under it.
 */
export const IDLE_DROP_MS = 15 * 60_000;
const SWEEP_EVERY_MS = 60_000;

export interface CachedClient {
	/** When the cache last handed this client out. */
	lastUsed: number;
	ledger: { readonly roundTrips: number };
	/** The ledger's round trips at the last sweep (see idleSweeper). */
	tripsSeen?: number;
}

/**
 * A start function for the sweeper of `cache`: once a minute it closes (`close`) and forgets each
 * entry idle for IDLE_DROP_MS that `mayClose` agrees to, and stops once the cache is empty.
 */
export function idleSweeper<E extends CachedClient>(cache: Map<string, E>, close: (entry: E) => void, mayClose: (entry: E) => boolean = () => true): () => void {
	let timer: NodeJS.Timeout | null = null;
	return () => {
		if (timer) return;
		timer = setInterval(() => {
			const now = Date.now();
			for (const [key, entry] of cache) {
				const trips = entry.ledger.roundTrips;
				if (trips !== entry.tripsSeen) {
					entry.tripsSeen = trips;
					entry.lastUsed = Math.max(entry.lastUsed, now);
				}
				if (now - entry.lastUsed > IDLE_DROP_MS && mayClose(entry)) {
					cache.delete(key);
					close(entry);
				}
			}
			if (cache.size === 0 && timer) {
				clearInterval(timer);
				timer = null;
			}
		}, SWEEP_EVERY_MS);
		timer.unref();
	};
}
