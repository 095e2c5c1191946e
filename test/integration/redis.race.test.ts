import path from 'path';

import { namespaceKeys } from '../../lib/ledger/redis/keys';
import { claimRound } from '../support/racer';
import { describeIfRedis, freshRedisLedger, redisUrl } from '../support/redis';

const CHILD = path.join(__dirname, 'fixtures', 'redis-race-child.js');
const PROCESSES = 6;
const KEYS = 1000;
const ROUNDS = 5;

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
			// How many processes won something, per round. One script call or statement claims a whole
			// chunk of keys at once, so a round where one process got in first and won everything is a
			// legitimate outcome of the scheduler; across the rounds, the race must have been real.
			const winnersPerRound: number[] = [];
			for (let round = 0; round < ROUNDS; round++) {
				const namespace = `race-${mode}-${round}-${Date.now()}`;
				const { results, winners } = await claimRound(CHILD, PROCESSES, KEYS, (p) => [redisUrl(), fx.prefix, namespace, String(KEYS), mode, String(round * 100 + p)]);
				console.log(`redis ${mode} round ${round}: wins per process ${results.map((r) => r.won.length).join(', ')}`);
				winnersPerRound.push(winners);
				// Each key's new row was noted once for indexing (layout 3); stats index them, once each.
				const k = namespaceKeys(fx.prefix, namespace);
				const noted = (await fx.client.lrange(k.unindexed, 0, -1)).flatMap((text) => JSON.parse(text).m as string[]);
				expect(noted.length).toBe(KEYS);
				expect(new Set(noted).size).toBe(KEYS);
				const stats = await fx.ledger.stats(namespace);
				expect(await fx.client.zcard(k.fixed[0])).toBe(KEYS);
				expect(await fx.client.llen(k.unindexed)).toBe(0);
				expect(stats.byStatus[mode === 'lease' ? 'in_progress' : 'completed']).toBe(KEYS);
				expect(stats.duplicatesBlocked).toBe(KEYS * (PROCESSES - 1));
			}
			expect(Math.max(...winnersPerRound)).toBeGreaterThan(1);
		}, 180_000);
	}
});
