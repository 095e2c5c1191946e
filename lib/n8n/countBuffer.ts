import type { IExecuteFunctions } from 'n8n-workflow';

import type { ClaimOutcome, CountIncrement, Ledger, RowId } from '../ledger/types';
import { atExecutionEnd, executionOf } from './executionEnd';

/**
 * Daily counters (Prompt Cache hits, misses, tokens and money saved; duplicates blocked) written
 * off the answer's path. A Lookup (or a gate that turned deliveries away) hands its counts here and
 * returns its items at once; the counts of every run in this process are added up per ledger and
 * written in one `addCounts` call:
 *
 * - when the execution that made them ends (n8n awaits that hook before it reports the execution
 *   finished, so a Get Stats in a later execution sees them);
 * - at the latest FLUSH_AFTER_MS after they were added (a long execution, or an n8n whose
 *   execution-end hooks the package does not use);
 * - before a Get Stats of this process reads the counters;
 * - when the process ends cleanly: its event loop runs empty (`beforeExit`). n8n itself ends
 *   only after its running executions, whose end writes their counts.
 *
 * A write that fails keeps the counts for the next one (with a warning in n8n's log), so a ledger
 * blip loses nothing; a process that is killed loses what it had not written yet, at most the
 * counts of its running executions and of the last FLUSH_AFTER_MS.
 */

/** The longest counts wait in memory. */
export const COUNT_FLUSH = { afterMs: 1_000 };

interface Logger {
	warn(message: string): void;
}

class CountBuffer {
	/** namespace -> counter -> amount, not yet written. */
	private pending = new Map<string, Map<string, number>>();
	private timer: ReturnType<typeof setTimeout> | null = null;
	private writing: Promise<void> | null = null;
	private logger: Logger | null = null;
	/** Writes that failed since the last one that worked. */
	failures = 0;

	constructor(private readonly ledger: Ledger) {}

	get size(): number {
		return this.pending.size;
	}

	add(increments: CountIncrement[], logger?: Logger): void {
		if (logger) this.logger = logger;
		for (const { namespace, counts } of increments) {
			let into = this.pending.get(namespace);
			if (!into) {
				into = new Map();
				this.pending.set(namespace, into);
			}
			for (const [name, amount] of Object.entries(counts)) {
				if (amount !== 0) into.set(name, (into.get(name) ?? 0) + amount);
			}
		}
		if (this.pending.size > 0 && this.timer === null) {
			// After failed writes, less often (up to a minute apart).
			this.timer = setTimeout(() => void this.flush(), COUNT_FLUSH.afterMs * Math.min(60, 2 ** this.failures));
			// Never keeps a process alive: a process whose loop runs empty writes them at beforeExit.
			this.timer.unref?.();
		}
	}

	/** Writes everything pending (waiting for a write under way first). Never throws. */
	async flush(): Promise<void> {
		while (this.writing) await this.writing;
		if (this.timer !== null) {
			clearTimeout(this.timer);
			this.timer = null;
		}
		if (this.pending.size === 0) return;
		const batch = this.pending;
		this.pending = new Map();
		const increments: CountIncrement[] = [...batch].map(([namespace, counts]) => ({ namespace, counts: Object.fromEntries(counts) }));
		this.writing = this.ledger.addCounts(increments).then(
			() => void (this.failures = 0),
			(error: unknown) => {
				// Kept for the next write: added back under what arrived meanwhile.
				this.failures++;
				this.add(increments);
				try {
					this.logger?.warn(
						`n8n-nodes-idempotency: the day counters of recent runs (Prompt Cache stats, duplicates blocked) could not be written to the ledger yet (${error instanceof Error ? error.message : String(error)}); they are kept and written with the next ones.`,
					);
				} catch {
					// A logger that fails must not fail the write.
				}
			},
		);
		try {
			await this.writing;
		} finally {
			this.writing = null;
		}
		// Nothing left: forget this ledger (a closed one must not be kept alive by its buffer).
		if (this.pending.size === 0 && buffers.get(this.ledger) === this) buffers.delete(this.ledger);
	}
}

const buffers = new Map<Ledger, CountBuffer>();

let listening = false;

function bufferFor(ledger: Ledger): CountBuffer {
	let buffer = buffers.get(ledger);
	if (!buffer) {
		buffer = new CountBuffer(ledger);
		buffers.set(ledger, buffer);
		if (!listening) {
			listening = true;
			process.on('beforeExit', onBeforeExit);
		}
	}
	return buffer;
}

/** Tries left at the end of the process for a ledger whose writes keep failing (it may be closed). */
const EXIT_TRIES = 3;

function onBeforeExit(): void {
	// Writing starts new work, so the loop runs on; once nothing is pending this adds none.
	const due = [...buffers.values()].filter((b) => b.size > 0 && b.failures < EXIT_TRIES);
	if (due.length > 0) void Promise.all(due.map((b) => b.flush()));
}

/** The buffers each execution already writes at its end. */
const endHooked = new WeakMap<object, Set<CountBuffer>>();

/**
 * Adds counts to be written for `ledger` (see the module comment) and returns at once. When the
 * execution of `ctx` ends, everything pending for that ledger is written. Never throws.
 */
export function deferCounts(ctx: IExecuteFunctions, ledger: Ledger, increments: CountIncrement[]): void {
	if (increments.length === 0) return;
	const buffer = bufferFor(ledger);
	let logger: Logger | undefined;
	try {
		logger = ctx.logger;
	} catch {
		logger = undefined;
	}
	buffer.add(increments, logger);
	try {
		// Without execution hooks (or where the package does not use them) the timer writes them.
		const execution = executionOf(ctx);
		if (!execution) return;
		let hooked = endHooked.get(execution);
		if (!hooked) {
			hooked = new Set();
			endHooked.set(execution, hooked);
		}
		if (hooked.has(buffer)) return;
		hooked.add(buffer);
		atExecutionEnd(ctx, () => buffer.flush());
	} catch {
		// The timer writes them.
	}
}

/** The day counter of deliveries a claim turned away as done already (the dashboard's "duplicates blocked per day"). */
export const DUPLICATES_BLOCKED = 'duplicatesBlocked';

/**
 * Counts, per namespace, the claims of `rows` that found the row done already (or met an earlier
 * row of the same batch), into today's DUPLICATES_BLOCKED (see deferCounts). Keys another run
 * still holds are not counted: a node may ask for them again.
 */
export function deferBlocked(ctx: IExecuteFunctions, ledger: Ledger, rows: RowId[], outcomes: ClaimOutcome[]): void {
	const blocked = new Map<string, number>();
	outcomes.forEach((o, i) => {
		if (o.kind === 'duplicate' || o.kind === 'batch_duplicate') blocked.set(rows[i].namespace, (blocked.get(rows[i].namespace) ?? 0) + 1);
	});
	deferCounts(ctx, ledger, [...blocked].map(([namespace, n]) => ({ namespace, counts: { [DUPLICATES_BLOCKED]: n } })));
}

/** Writes what is pending for `ledger` now (a Get Stats reads after it). Never throws. */
export function flushCounts(ledger: Ledger): Promise<void> {
	return buffers.get(ledger)?.flush() ?? Promise.resolve();
}

/** Writes what is pending for every ledger (a clean shutdown, tests). Never throws. */
export async function flushAllCounts(): Promise<void> {
	await Promise.all([...buffers.values()].map((b) => b.flush()));
}

/** Counts waiting to be written, by namespace (tests). */
export function pendingCounts(ledger: Ledger): number {
	return buffers.get(ledger)?.size ?? 0;
}
