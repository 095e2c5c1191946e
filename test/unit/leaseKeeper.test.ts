/**
 * The lease keeper with a stand-in ledger and a hand-moved clock: which rows each round renews,
 * for how long, in how many calls, and what a failure or a "not renewed" answer does.
 * (Real ledgers: the renewLeases contract tests; a real engine: dedupeGate.leaseKeeping.engine.test.ts.)
 */
import type { FencedRow, Ledger } from '../../lib/ledger/types';
import { LEASE_KEEPING, LeaseKeeper, leasePlan } from '../../lib/n8n/leaseKeeper';

interface Call {
	keys: string[];
	leaseMs: number;
}

function standIn(answer: (row: FencedRow) => boolean | Error = () => true) {
	const calls: Call[] = [];
	const ledger = {
		async renewLeases(rows: FencedRow[], leaseMs: number) {
			calls.push({ keys: rows.map((r) => r.key), leaseMs });
			const answers = rows.map(answer);
			const failure = answers.find((a): a is Error => a instanceof Error);
			if (failure) throw failure;
			return answers as boolean[];
		},
	} as unknown as Ledger;
	return { ledger, calls };
}

const row = (key: string, fence = 1): FencedRow => ({ namespace: 'ns', key, step: '', fence });

describe('leasePlan', () => {
	test('a lease longer than the short lease is claimed short and renewed up to the configured one', () => {
		expect(leasePlan(600_000)).toEqual({ claimMs: LEASE_KEEPING.shortLeaseMs, maxMs: 600_000, renew: true });
	});
	test('a lease no longer than the short lease is claimed as it is and never renewed', () => {
		expect(leasePlan(LEASE_KEEPING.shortLeaseMs)).toEqual({ claimMs: 30_000, maxMs: 30_000, renew: false });
		expect(leasePlan(3_000)).toEqual({ claimMs: 3_000, maxMs: 3_000, renew: false });
		expect(leasePlan(0)).toEqual({ claimMs: 0, maxMs: 0, renew: false });
	});
	test('the numbers: 30 s renewed every 10 s', () => {
		expect(LEASE_KEEPING).toEqual({ shortLeaseMs: 30_000, renewEveryMs: 10_000 });
	});
});

describe('LeaseKeeper', () => {
	let now = 0;
	const clock = () => now;
	beforeEach(() => {
		now = 1_000;
	});

	test('every round renews all held rows of a ledger in one call, with the short lease', async () => {
		const { ledger, calls } = standIn();
		const keeper = new LeaseKeeper(ledger, clock);
		keeper.hold([row('a'), row('b')], 'e1', now + 600_000);
		keeper.hold([row('c', 2)], 'e2', now + 600_000);
		await keeper.renew();
		now += 10_000;
		await keeper.renew();
		expect(calls).toEqual([
			{ keys: ['a', 'b', 'c'], leaseMs: 30_000 },
			{ keys: ['a', 'b', 'c'], leaseMs: 30_000 },
		]);
		expect(keeper.counts).toEqual({ calls: 2, renewed: 6, failures: 0 });
		keeper.stop();
	});

	test('the maximum: the last renewal ends the lease at it, and nothing is renewed after it', async () => {
		const { ledger, calls } = standIn();
		const keeper = new LeaseKeeper(ledger, clock);
		keeper.hold([row('a'), row('b')], 'e1', now + 45_000);
		keeper.hold([row('long')], 'e2', now + 600_000);
		await keeper.renew(); // 45 s left: a full short lease
		now += 20_000; // 25 s left: the last renewal, 25 s long
		await keeper.renew();
		now += 10_000;
		await keeper.renew();
		expect(calls).toEqual([
			{ keys: ['a', 'b', 'long'], leaseMs: 30_000 },
			{ keys: ['long'], leaseMs: 30_000 },
			{ keys: ['a', 'b'], leaseMs: 25_000 },
			{ keys: ['long'], leaseMs: 30_000 },
		]);
		expect(keeper.size).toBe(1);
		keeper.stop();
	});

	test('rows past their maximum are dropped without a call', async () => {
		const { ledger, calls } = standIn();
		const keeper = new LeaseKeeper(ledger, clock);
		keeper.hold([row('a')], 'e1', now + 5_000);
		now += 6_000;
		await keeper.renew();
		expect(calls).toEqual([]);
		expect(keeper.size).toBe(0);
	});

	test('rows the ledger did not renew (settled, taken over, lapsed) are dropped; the others stay', async () => {
		const { ledger, calls } = standIn((r) => r.key !== 'settled');
		const keeper = new LeaseKeeper(ledger, clock);
		keeper.hold([row('settled'), row('alive')], 'e1', now + 600_000);
		await keeper.renew();
		await keeper.renew();
		expect(calls.map((c) => c.keys)).toEqual([['settled', 'alive'], ['alive']]);
		keeper.stop();
	});

	test('a failed renewal drops nothing, warns through the node\'s logger, and the next round tries again', async () => {
		let down = true;
		const { ledger, calls } = standIn(() => (down ? new Error('connection refused') : true));
		const warnings: string[] = [];
		const keeper = new LeaseKeeper(ledger, clock);
		keeper.hold([row('a'), row('b')], 'e1', now + 600_000, { warn: (m) => warnings.push(m) });
		await expect(keeper.renew()).resolves.toBeUndefined();
		expect(keeper.size).toBe(2);
		expect(warnings).toHaveLength(1);
		expect(warnings[0]).toMatch(/could not renew the hold on 2 key\(s\) of execution\(s\) e1; trying again in 10 s.*connection refused/);
		down = false;
		await keeper.renew();
		expect(calls).toHaveLength(2);
		expect(keeper.counts).toEqual({ calls: 2, renewed: 2, failures: 1 });
		keeper.stop();
	});

	test('heldUntil: the claim\'s lease, moved by each renewal the ledger answered; a failed call moves nothing; a refused row is lost; never past the maximum', async () => {
		let down = false;
		const { ledger } = standIn((r) => (down ? new Error('down') : r.key !== 'taken'));
		const keeper = new LeaseKeeper(ledger, clock);
		const a = row('a');
		const taken = row('taken');
		const kept = keeper.hold([a, taken], 'e1', now + 45_000, undefined, now + 30_000);
		expect(kept.heldUntil(a)).toBe(31_000);
		now += 10_000;
		await keeper.renew();
		expect(kept.heldUntil(a)).toBe(41_000);
		expect(kept.heldUntil(taken)).toBe(-Infinity);
		down = true;
		now += 10_000;
		await keeper.renew();
		expect(kept.heldUntil(a)).toBe(41_000);
		down = false;
		now += 10_000; // 15 s before the maximum: the last renewal ends at it
		await keeper.renew();
		expect(kept.heldUntil(a)).toBe(46_000);
		expect(keeper.size).toBe(0);
	});

	test('a logger that throws does not stop the keeper', async () => {
		const { ledger } = standIn(() => new Error('down'));
		const keeper = new LeaseKeeper(ledger, clock);
		keeper.hold([row('a')], 'e1', now + 600_000, {
			warn: () => {
				throw new Error('logger broken');
			},
		});
		await expect(keeper.renew()).resolves.toBeUndefined();
		expect(keeper.size).toBe(1);
		keeper.stop();
	});

	test('the end of an execution stops the renewals of its rows only', async () => {
		const { ledger, calls } = standIn();
		const keeper = new LeaseKeeper(ledger, clock);
		keeper.hold([row('a')], 'e1', now + 600_000);
		keeper.hold([row('b')], 'e2', now + 600_000);
		keeper.release('e1');
		await keeper.renew();
		expect(calls.map((c) => c.keys)).toEqual([['b']]);
		keeper.release('e2');
		expect(keeper.size).toBe(0);
	});

	test('one round at a time: a round asked for while one is running joins it', async () => {
		let finish: () => void = () => undefined;
		let count = 0;
		const ledger = {
			renewLeases: (rows: FencedRow[]) => {
				count++;
				return new Promise<boolean[]>((resolve) => (finish = () => resolve(rows.map(() => true))));
			},
		} as unknown as Ledger;
		const keeper = new LeaseKeeper(ledger, clock);
		keeper.hold([row('a')], 'e1', now + 600_000);
		const first = keeper.renew();
		const second = keeper.renew();
		expect(second).toBe(first);
		finish();
		await first;
		expect(count).toBe(1);
		keeper.stop();
	});

	test('its timer never keeps a process alive, and stops when nothing is held', () => {
		const { ledger } = standIn();
		const keeper = new LeaseKeeper(ledger, clock);
		keeper.hold([row('a')], 'e1', now + 600_000);
		const timer = (keeper as unknown as { timer: NodeJS.Timeout | null }).timer;
		expect(timer).not.toBeNull();
		expect(timer!.hasRef()).toBe(false);
		keeper.release('e1');
		expect((keeper as unknown as { timer: unknown }).timer).toBeNull();
	});
});
