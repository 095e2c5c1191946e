import type { ClaimOptions, Ledger } from '../../lib/ledger/types';

const DAY = 86_400_000;
const lease: ClaimOptions = { mode: 'lease', holder: 'run-1', leaseMs: 60_000, ttlMs: DAY };

/**
 * Ledger.peek, what a Prompt Cache hit reads instead of claiming: the rows as they are, null where
 * absent or expired, one round trip, nothing written (no duplicate counted, nothing renewed).
 * Run against each backend by ledger.peek.test.ts and (on Node 22.13+) sqlite.peek.test.ts.
 */
export function peekSuite(open: () => Promise<{ ledger: Ledger & { roundTrips: number }; dispose(): Promise<void> }>) {
	let fx: Awaited<ReturnType<typeof open>>;
	beforeAll(async () => {
		fx = await open();
	});
	afterAll(async () => fx && (await fx.dispose()));

	test('answers each id in order: the live row as get() has it, null for an absent one; one round trip, nothing written', async () => {
		const ns = `peek-${Date.now()}`;
		await fx.ledger.claim([{ namespace: ns, key: 'done', step: 's', fingerprint: 'fp' }], lease);
		await fx.ledger.record([{ namespace: ns, key: 'done', step: 's', status: 'completed', fingerprint: 'fp', result: { answer: 42 } }], { ttlMs: DAY });
		await fx.ledger.claim([{ namespace: ns, key: 'held', step: 's', fingerprint: null }], lease);
		const before = await fx.ledger.stats(ns);
		const trips = fx.ledger.roundTrips;
		const ids = [
			{ namespace: ns, key: 'held', step: 's' },
			{ namespace: ns, key: 'absent', step: 's' },
			{ namespace: ns, key: 'done', step: 's' },
			{ namespace: ns, key: 'done', step: 'other' },
		];
		const out = await fx.ledger.peek!(ids);
		expect(fx.ledger.roundTrips - trips).toBe(1);
		expect(out.map((r) => r && [r.key, r.status])).toEqual([['held', 'in_progress'], null, ['done', 'completed'], null]);
		const [done] = await fx.ledger.get(ns, 'done');
		expect(out[2]).toEqual(done);
		expect(out[2]!.result).toEqual({ answer: 42 });
		expect(out[0]!.leaseHolder).toBe('run-1');
		expect(out[0]!.leaseRemainingMs).toBeGreaterThan(50_000);
		expect(out[0]!.leaseRemainingMs).toBeLessThanOrEqual(60_000);
		// Nothing counted, nothing changed.
		expect(await fx.ledger.stats(ns)).toEqual(before);
		expect((await fx.ledger.get(ns, 'held'))[0].updatedAt).toEqual(out[0]!.updatedAt);
		// One id: the same answer.
		expect(await fx.ledger.peek!([ids[2]])).toEqual([done]);
		expect(await fx.ledger.peek!([])).toEqual([]);
	});

	test('ids of several namespaces, mixed: each answered in its place', async () => {
		const a = `peek-a-${Date.now()}`;
		const b = `peek-b-${Date.now()}`;
		await fx.ledger.claim(
			[
				{ namespace: a, key: 'k', step: 's', fingerprint: null },
				{ namespace: b, key: 'k', step: 's', fingerprint: null },
			],
			{ mode: 'seen', holder: 'h', leaseMs: 0, ttlMs: DAY },
		);
		const out = await fx.ledger.peek!([
			{ namespace: b, key: 'k', step: 's' },
			{ namespace: a, key: 'absent', step: 's' },
			{ namespace: a, key: 'k', step: 's' },
		]);
		expect(out.map((r) => r && [r.namespace, r.key, r.status, r.leaseRemainingMs])).toEqual([[b, 'k', 'completed', null], null, [a, 'k', 'completed', null]]);
	});

	test('an expired row reads as absent', async () => {
		const ns = `peek-exp-${Date.now()}`;
		await fx.ledger.claim([{ namespace: ns, key: 'k', step: '', fingerprint: null }], { mode: 'seen', holder: 'h', leaseMs: 0, ttlMs: 300 });
		expect((await fx.ledger.peek!([{ namespace: ns, key: 'k', step: '' }]))[0]?.status).toBe('completed');
		await new Promise((r) => setTimeout(r, 600));
		expect(await fx.ledger.peek!([{ namespace: ns, key: 'k', step: '' }])).toEqual([null]);
	});
}
