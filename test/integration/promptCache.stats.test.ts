import type { Ledger } from '../../lib/ledger/types';
import { promptCacheStats, summarizeCounts } from '../../nodes/PromptCache/stats';
import { freshPostgresLedger } from '../support/db';
import { describeIfRedis, freshRedisLedger } from '../support/redis';

/**
 * Prompt Cache stats from the ledger's daily counters, on the real PostgreSQL and Redis: each
 * Lookup run adds its counts in one upsert, concurrent runs never lose each other's counts, and
 * the summary reports rates, tokens and money in total and per day.
 */
function statsSuite(open: () => Promise<{ ledger: Ledger; dispose(): Promise<void> }>) {
	let fx: { ledger: Ledger; dispose(): Promise<void> };
	beforeAll(async () => {
		fx = await open();
	});
	afterAll(async () => fx && (await fx.dispose()));

	test('50 concurrent runs adding their counts add up exactly, money included', async () => {
		const ns = `stats-${Date.now()}`;
		await Promise.all(
			Array.from({ length: 50 }, () =>
				fx.ledger.addCounts([{ namespace: ns, counts: { lookups: 3, hits: 2, misses: 1, tokensSaved: 30, inputTokensSaved: 21, outputTokensSaved: 9, moneySaved: 0.0241 } }]),
			),
		);
		const stats = await promptCacheStats(fx.ledger, ns);
		expect(stats).toMatchObject({ namespace: ns, hits: 100, misses: 50, lookups: 150, tokensSaved: 1500, inputTokensSaved: 1050, outputTokensSaved: 450, moneySaved: 1.205, windowDays: 30 });
		expect(stats.hitRate).toBeCloseTo(2 / 3, 4);
		expect(stats.days).toHaveLength(1);
		expect(stats.since).toBe(stats.days[0].day);
	});

	test('namespaces are separate; a namespace never counted reads as empty', async () => {
		const a = `stats-a-${Date.now()}`;
		const b = `stats-b-${Date.now()}`;
		await fx.ledger.addCounts([
			{ namespace: a, counts: { lookups: 1, hits: 1, tokensSaved: 5 } },
			{ namespace: b, counts: { lookups: 3, misses: 3, shadowLookups: 3, shadowWouldHit: 1 } },
		]);
		expect(await promptCacheStats(fx.ledger, a)).toMatchObject({ hits: 1, misses: 0, tokensSaved: 5 });
		expect(await promptCacheStats(fx.ledger, b)).toMatchObject({ hits: 0, misses: 3, hitRate: 0, shadow: { lookups: 3, wouldHit: 1, wouldHitRate: 0.3333 } });
		expect(await promptCacheStats(fx.ledger, `never-${Date.now()}`)).toMatchObject({ hits: 0, misses: 0, lookups: 0, hitRate: null, since: null, days: [] });
	});
}

describe('Prompt Cache stats on PostgreSQL', () => statsSuite(() => freshPostgresLedger()));
describeIfRedis('Prompt Cache stats on Redis')('Prompt Cache stats on Redis', () => statsSuite(() => freshRedisLedger()));

describe('Prompt Cache stats: the summary', () => {
	test('totals, rates and days, oldest first; days with nothing counted are left out; money without float noise', () => {
		const stats = summarizeCounts(
			'ns',
			[
				{ day: '2026-11-23', counts: { lookups: 10, hits: 4, misses: 6, moneySaved: 0.1 + 0.2, shadowLookups: 10, shadowWouldHit: 5, shadowCompared: 4, shadowDiffered: 1 } },
				{ day: '2026-11-24', counts: {} },
				{ day: '2026-11-25', counts: { lookups: 5, hits: 5, tokensSaved: 100, moneySaved: 0.7 } },
			],
			30,
		);
		expect(stats).toMatchObject({
			lookups: 15,
			hits: 9,
			misses: 6,
			hitRate: 0.6,
			tokensSaved: 100,
			moneySaved: 1,
			since: '2026-11-23',
			shadow: { lookups: 10, wouldHit: 5, wouldHitRate: 0.5, compared: 4, differed: 1, differedRate: 0.25 },
		});
		expect(stats.days.map((d) => [d.day, d.lookups, d.moneySaved])).toEqual([
			['2026-11-23', 10, 0.3],
			['2026-11-25', 5, 0.7],
		]);
	});
});
