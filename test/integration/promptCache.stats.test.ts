import { CACHE_STEP, STATS_STEP, statsNamespace } from '../../nodes/PromptCache/common';
import { promptCacheStats } from '../../nodes/PromptCache/stats';
import { freshPostgresLedger } from '../support/db';

/**
 * Prompt Cache stats on the real PostgreSQL ledger: each Lookup run inserts one event per
 * namespace, so concurrent writers never overwrite each other, and reading pages through them.
 */
describe('Prompt Cache stats on PostgreSQL', () => {
	let fx: Awaited<ReturnType<typeof freshPostgresLedger>>;
	beforeAll(async () => {
		fx = await freshPostgresLedger();
	});
	afterAll(async () => fx && (await fx.dispose()));

	const event = (namespace: string, n: number, s: { hits: number; misses: number; tokensSaved: number }) => ({
		namespace: statsNamespace(namespace),
		key: `event-${n}-${Math.random()}`,
		step: STATS_STEP,
		status: 'completed' as const,
		result: { ...s, at: new Date().toISOString() },
	});

	test('2,500 events written by 50 concurrent writers add up exactly, across pages', async () => {
		const ns = `stats-${Date.now()}`;
		const writers = Array.from({ length: 50 }, (_, w) =>
			fx.ledger.record(
				Array.from({ length: 50 }, (_, n) => event(ns, w * 50 + n, { hits: 2, misses: 1, tokensSaved: 30 })),
				{ ttlMs: 60_000 },
			),
		);
		await Promise.all(writers);
		const stats = await promptCacheStats(fx.ledger, ns);
		expect(stats).toMatchObject({ namespace: ns, hits: 5000, misses: 2500, lookups: 7500, tokensSaved: 75_000, windowDays: 30 });
		expect(stats.hitRate).toBeCloseTo(2 / 3, 4);
		expect(stats.since).not.toBeNull();
	});

	test('namespaces are separate; cache entries and other rows are not counted', async () => {
		const a = `stats-a-${Date.now()}`;
		const b = `stats-b-${Date.now()}`;
		await fx.ledger.record([event(a, 1, { hits: 1, misses: 0, tokensSaved: 5 }), event(b, 1, { hits: 0, misses: 3, tokensSaved: 0 })], { ttlMs: 60_000 });
		await fx.ledger.record([{ namespace: a, key: 'f'.repeat(64), step: CACHE_STEP, status: 'completed', result: { v: 1, response: 'x' } }], { ttlMs: 60_000 });
		expect(await promptCacheStats(fx.ledger, a)).toMatchObject({ hits: 1, misses: 0, tokensSaved: 5 });
		expect(await promptCacheStats(fx.ledger, b)).toMatchObject({ hits: 0, misses: 3, hitRate: 0 });
		expect(await promptCacheStats(fx.ledger, `never-${Date.now()}`)).toMatchObject({ hits: 0, misses: 0, lookups: 0, hitRate: null, since: null });
	});

	test('a long namespace still gets a valid stats namespace', () => {
		const long = 'n'.repeat(200);
		expect(statsNamespace(long).length).toBeLessThanOrEqual(200);
		expect(statsNamespace(long)).not.toBe(statsNamespace('n'.repeat(199)));
	});
});
