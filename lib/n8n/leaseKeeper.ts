import type { IExecuteFunctions } from 'n8n-workflow';

import type { FencedRow, Ledger } from '../ledger/types';
import { atExecutionEnd } from './executionEnd';

/**
 * Keys held under a short lease that this process renews while the run that holds them is alive.
 *
 * A claim's lease is the longest a key stays In Progress when nobody finishes its run. A long
 * lease protects a slow run but keeps a crashed run's keys for as long; a short one frees them
 * soon but lets a slow run lose them. So a claim takes a SHORT lease, and the process that holds
 * it renews the lease every few seconds, up to the lease the flow builder configured (the
 * maximum a run may hold a key):
 *
 * - a run that is alive, however slow, keeps its keys up to the configured lease;
 * - a process that dies (crash, kill -9, a lost worker) stops renewing, and its keys are free
 *   again at most SHORT_LEASE_MS after its last renewal.
 *
 * The numbers, 30 s renewed every 10 s: a dead process's keys are free 30 s after its last
 * renewal, so 20 to 30 s after the crash (measured in a real n8n: a redelivery went through
 * 31.5 s after a kill -9, restart included, against 10 minutes with the lease as the only
 * clock), and a live process has three tries before its lease lapses: one failed renewal (a ledger blip, a
 * reconnect) or an event loop blocked for up to ~20 s (a large batch in another node) does not
 * lose a key. Renewing more often would buy little recovery time for more ledger traffic: one
 * statement (one script call) per ledger every 10 s, whatever the number of keys held.
 *
 * The keeper only ever extends a lease that is still live, with the claim's fence, by the
 * ledger's clock (Ledger.renewLeases): a lease that lapsed (the process stalled too long) is
 * never revived, as another run may already have taken the key. The maximum is measured by this
 * process's monotonic clock from just before the claim, so it never moves with the wall clock;
 * the last renewal ends the lease at the maximum, not a short lease after it.
 *
 * A lease no longer than the short lease is claimed as it is and never renewed (as before).
 */

/** Lease lengths and renewal period; a test may shorten them (read at each claim and renewal). */
export const LEASE_KEEPING = {
	/** The lease a claim takes and each renewal extends to. */
	shortLeaseMs: 30_000,
	/** How often the held leases are renewed. */
	renewEveryMs: 10_000,
};

/** How a claim with the configured lease `leaseMs` is made, and whether its lease is kept alive. */
export interface LeasePlan {
	/** The lease the claim takes. */
	claimMs: number;
	/** The configured lease: the longest the run may hold its keys. */
	maxMs: number;
	/** Whether the keeper renews the claim's leases (the configured lease is longer than the short one). */
	renew: boolean;
}

export function leasePlan(leaseMs: number): LeasePlan {
	const short = LEASE_KEEPING.shortLeaseMs;
	if (!(leaseMs > short)) return { claimMs: leaseMs, maxMs: leaseMs, renew: false };
	return { claimMs: short, maxMs: leaseMs, renew: true };
}

/** Where a failed renewal is reported (the node's logger). */
export interface Warner {
	warn(message: string): void;
}

/** The rows one claim of one execution holds: held, renewed and dropped together. */
interface Held {
	/** The rows still held; a renewal the ledger refused removes its row. */
	rows: FencedRow[];
	/** The execution that holds the rows; its end stops the renewals. */
	executionId: string;
	/** The end of the configured lease, by this process's monotonic clock (performance.now()). */
	until: number;
	/**
	 * Until when the ledger has confirmed the lease, by the same clock: the claim's lease, then
	 * moved by each renewal the ledger answered (counted from just before the call).
	 */
	confirmedUntil: number;
	/** Rows whose renewal the ledger refused (settled, taken over, released or lapsed). */
	refused: Set<FencedRow>;
}

/**
 * What a holder may ask about the leases kept for it: until when each row's lease is known to be
 * held. A node that starts side effects under the lease (Guarded Send) starts none past this.
 */
export interface KeptLeases {
	/**
	 * Until when (performance.now() time) this run's lease on `row` is confirmed by the ledger:
	 * the claim's lease, moved on by each renewal the ledger answered; -Infinity once the ledger
	 * refused to renew the row. A failed renewal call moves nothing, so the time stands and runs out.
	 */
	heldUntil(row: FencedRow): number;
}

/**
 * The held rows of one ledger in this process, and the timer that renews them. Rows are kept by
 * claim, not one by one: a 10,000-item claim costs one entry to hold and to release, and only a
 * renewal (every 10 s) walks its rows.
 */
export class LeaseKeeper {
	private readonly held = new Set<Held>();
	private timer: ReturnType<typeof setInterval> | null = null;
	private renewing: Promise<void> | null = null;
	private logger: Warner | null = null;
	/** Renewal calls made, and rows they renewed (for tests and debugging). */
	readonly counts = { calls: 0, renewed: 0, failures: 0 };

	constructor(
		private readonly ledger: Ledger,
		private readonly now: () => number = () => performance.now(),
	) {}

	/** Rows held right now. */
	get size(): number {
		let rows = 0;
		for (const held of this.held) rows += held.rows.length;
		return rows;
	}

	/**
	 * Starts renewing `rows` of `executionId` until `until` (performance.now() time); their claim's
	 * lease is confirmed until `confirmedUntil`. Never throws.
	 */
	hold(rows: FencedRow[], executionId: string, until: number, logger?: Warner, confirmedUntil = -Infinity): KeptLeases {
		if (logger) this.logger = logger;
		const held: Held = { rows, executionId, until, confirmedUntil, refused: new Set() };
		if (rows.length > 0) this.held.add(held);
		if (this.held.size > 0 && this.timer === null) {
			this.timer = setInterval(() => void this.renew(), LEASE_KEEPING.renewEveryMs);
			// Never keeps a process alive: a process that is ending lets its leases lapse.
			this.timer.unref?.();
		}
		return { heldUntil: (row) => (held.refused.has(row) ? -Infinity : held.confirmedUntil) };
	}

	/** Stops renewing the rows of an execution (it ended). Their leases lapse on their own. */
	release(executionId: string): void {
		for (const held of this.held) if (held.executionId === executionId) this.held.delete(held);
		this.stopWhenIdle();
	}

	/** Stops renewing everything (this process is going away, or a test simulates a crash). */
	stop(): void {
		this.held.clear();
		this.stopWhenIdle();
	}

	/**
	 * One round of renewals (the timer calls it; a test may too). Rows past their maximum are
	 * dropped; the others are renewed in one renewLeases call, except rows whose maximum comes
	 * sooner than a short lease from now: they get their last renewal, ending at the maximum, and
	 * are dropped. Rows the ledger did not renew (settled, taken over, released, lapsed) are
	 * dropped. A failed call drops nothing: the next round tries again. Never throws.
	 */
	renew(): Promise<void> {
		// One round at a time: a slow ledger does not pile up calls.
		this.renewing ??= this.round().finally(() => {
			this.renewing = null;
			this.stopWhenIdle();
		});
		return this.renewing;
	}

	private async round(): Promise<void> {
		const now = this.now();
		const short = LEASE_KEEPING.shortLeaseMs;
		const full: Held[] = [];
		const last = new Map<number, Held[]>();
		for (const held of this.held) {
			const left = held.until - now;
			if (left <= 0) this.held.delete(held);
			else if (left >= short) full.push(held);
			else {
				const group = last.get(held.until);
				if (group) group.push(held);
				else last.set(held.until, [held]);
			}
		}
		if (full.length > 0) await this.renewRows(full, short, false);
		// Rows of one claim share their maximum: one more call per claim, once in its life.
		for (const [until, group] of last) await this.renewRows(group, Math.max(1, Math.floor(until - now)), true);
	}

	private async renewRows(claims: Held[], leaseMs: number, lastTime: boolean): Promise<void> {
		this.counts.calls++;
		const rows = claims.flatMap((held) => held.rows);
		// The ledger counts the new lease from its own now, which is later than this.
		const askedAt = this.now();
		let answers: boolean[];
		try {
			answers = await this.ledger.renewLeases(rows, leaseMs);
		} catch (error) {
			this.counts.failures++;
			this.warn(
				`Idempotency ledger: could not renew the hold on ${rows.length} key(s) of execution(s) ${[...new Set(claims.map((h) => h.executionId))].join(', ')}; trying again in ${Math.round(LEASE_KEEPING.renewEveryMs / 1000)} s. If renewals keep failing, another execution may take these keys once their leases lapse. ${(error as Error)?.message ?? String(error)}`,
			);
			return;
		}
		for (const renewed of answers) if (renewed) this.counts.renewed++;
		let at = 0;
		for (const held of claims) {
			const from = at;
			at += held.rows.length;
			held.confirmedUntil = Math.max(held.confirmedUntil, Math.min(held.until, askedAt + leaseMs));
			held.rows.forEach((row, i) => {
				if (!answers[from + i]) held.refused.add(row);
			});
			if (lastTime) this.held.delete(held);
			else held.rows = held.rows.filter((_, i) => answers[from + i]);
			if (held.rows.length === 0) this.held.delete(held);
		}
	}

	private warn(message: string): void {
		try {
			this.logger?.warn(message);
		} catch {
			// A logger that fails must not stop the keeper.
		}
	}

	private stopWhenIdle(): void {
		if (this.held.size === 0 && this.timer !== null && this.renewing === null) {
			clearInterval(this.timer);
			this.timer = null;
		}
	}
}

/** One keeper per ledger (per credential's shared client) in this process. */
const keepers = new WeakMap<Ledger, LeaseKeeper>();

export function keeperFor(ledger: Ledger): LeaseKeeper {
	let keeper = keepers.get(ledger);
	if (!keeper) {
		keeper = new LeaseKeeper(ledger);
		keepers.set(ledger, keeper);
	}
	return keeper;
}

/**
 * Keeps the leases of `rows`, claimed under `plan` by this execution from `claimedFrom` on
 * (performance.now() just before the claim), alive until the configured lease has passed or the
 * execution ends, whichever comes first. An execution that pauses (a Wait node) keeps them up to
 * the configured lease, as before. Where n8n offers no execution hooks, the renewals stop at the
 * configured lease, or once a later node settles the rows. Never throws; makes no ledger call.
 */
export function keepLeases(ctx: IExecuteFunctions, ledger: Ledger, rows: FencedRow[], plan: LeasePlan, claimedFrom: number): KeptLeases {
	const claimed = claimedFrom + plan.claimMs;
	const unrenewed: KeptLeases = { heldUntil: () => claimed };
	if (!plan.renew || rows.length === 0) return unrenewed;
	try {
		const executionId = ctx.getExecutionId() ?? 'unknown';
		const keeper = keeperFor(ledger);
		const kept = keeper.hold(rows, executionId, claimedFrom + plan.maxMs, ctx.logger, claimed);
		atExecutionEnd(ctx, async (end) => {
			if (end !== 'waiting') keeper.release(executionId);
		});
		return kept;
	} catch {
		// Nothing to report to the run: without renewals its keys are held for the short lease only.
		return unrenewed;
	}
}
