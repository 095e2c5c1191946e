/**
 * The retry policy, kept apart from correctness. The ledger decides *whether* a side effect may
 * happen; this decides how hard to try within one run, and what the ledger should say afterwards:
 *
 * - 429, 503 and other "not now" answers: exponential backoff with full jitter, or exactly the
 *   wait the destination asked for in Retry-After, up to a maximum number of attempts and a
 *   bounded total wait. Then `failed_retryable`, so a later run may try again.
 * - A permanent refusal (a 4xx other than 401/408/409/425/429): `needs_review`, with the response.
 * - Refused credentials: `failed_retryable` at once (retrying cannot help; fixing the credential can).
 * - An answer that leaves it unknown whether the destination acted (a timeout after the request
 *   was written, a dropped connection, a 500/502/504): retried when repeating is safe (the
 *   destination honours an idempotency key). Where the channel can ask the destination (its
 *   `check`: Slack history, the Sent folder, a check request), it is asked, after the backoff wait
 *   and just before the next attempt would start: found is `completed`, with the check's answer;
 *   not found goes on under the policy (a next attempt, or `failed_retryable` when the budget is
 *   spent: nothing went out); cannot tell is `needs_review`, or a next attempt where the user
 *   accepted a possible duplicate. With no check, `needs_review` at once unless the user accepted
 *   the risk.
 *
 * Nothing here knows about n8n or the ledger.
 */
import type { AttemptResult, Channel, CheckVerdict } from './types';

export interface RetryPolicy {
	/** Attempts per item in one run, the first included. */
	maxAttempts: number;
	/** The cap of the first backoff; each later cap doubles. */
	baseDelayMs: number;
	/** No single wait is longer than this. A Retry-After asking for more ends the run's attempts. */
	maxDelayMs: number;
	/** All waits of one item together stay under this. */
	maxTotalWaitMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = {
	maxAttempts: 5,
	baseDelayMs: 500,
	maxDelayMs: 30_000,
	maxTotalWaitMs: 60_000,
};

/** Full jitter (AWS architecture blog): a uniform wait between 0 and min(max, base * 2^(attempt-1)). */
export function backoffDelay(attempt: number, policy: RetryPolicy, random: () => number = Math.random): number {
	const cap = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.max(0, attempt - 1));
	return Math.floor(random() * cap);
}

/**
 * Retry-After as milliseconds: delta-seconds ("120", also "1.5"), or an HTTP date. Null when
 * absent or unreadable; a date in the past is 0.
 */
export function parseRetryAfter(value: unknown, now: number = Date.now()): number | null {
	const text = Array.isArray(value) ? value[0] : value;
	if (typeof text === 'number') return Number.isFinite(text) && text >= 0 ? Math.round(text * 1000) : null;
	if (typeof text !== 'string' || text.trim() === '') return null;
	const trimmed = text.trim();
	if (/^\d+(\.\d+)?$/.test(trimmed)) return Math.round(Number(trimmed) * 1000);
	// An HTTP date ("Wed, 21 Oct 2015 07:28:00 GMT") always has letters; "-1" is not a date.
	const at = /[A-Za-z]/.test(trimmed) ? Date.parse(trimmed) : Number.NaN;
	if (Number.isNaN(at)) return null;
	return Math.max(0, at - now);
}

/** What the destination said when asked about an uncertain answer, as kept with the verdict. */
export interface CheckedAnswer {
	outcome: CheckVerdict['outcome'];
	detail: string;
	checkedAt: string;
}

export type Verdict = (
	| { status: 'completed'; externalId: string | null; response: unknown; attempts: number; waitedMs: number }
	| {
			status: 'needs_review';
			/** `rejected`: the destination refused for good. `ambiguous`: it may have acted. */
			reason: 'rejected' | 'ambiguous';
			detail: string;
			response: unknown;
			attempts: number;
			waitedMs: number;
	  }
	| {
			status: 'failed_retryable';
			/**
			 * `check_later`: an uncertain answer whose check could not answer for now (rate limit,
			 * timeout, 5xx): it may have gone out, so the step keeps its phase `sending` and the next
			 * delivery asks again (nodes/GuardedSend/recheck.ts).
			 */
			reason: 'gave_up' | 'unauthorized' | 'out_of_time' | 'check_later';
			detail: string;
			response: unknown;
			attempts: number;
			waitedMs: number;
			/** Whether an attempt may have been performed (only possible when repeating is safe, or with `check_later`). */
			maybePerformed: boolean;
			/** With `check_later`: how long the destination asked to wait before the next check (Retry-After), if it said. */
			retryAfterMs?: number | null;
	  }
) & {
	/** The destination's answer when it was asked about an uncertain attempt (the last time it was asked). */
	check?: CheckedAnswer;
};

export interface DeliverOptions {
	policy: RetryPolicy;
	/** Repeating an attempt that may have been performed is acceptable (the user said so). */
	acceptUncertain?: boolean;
	/** By `now`: no attempt starts after this (the lease ends soon after). */
	deadline?: number;
	/**
	 * By `now`, read before each attempt: until when the lease is confirmed (a kept lease moves it
	 * on at each renewal). No attempt starts at or after it: a renewal that failed must not let an
	 * attempt start once the lease could have lapsed and another run could have taken the step.
	 */
	heldUntil?: () => number;
	/**
	 * Ask the destination about an uncertain answer (with the channel's `check`, where it has one
	 * and is not idempotent), for a send made since this time (epoch ms, the ledger's first claim
	 * of the step). Without it, uncertain answers are not checked.
	 */
	checkSinceMs?: number;
	/**
	 * An uncertain answer is checked no sooner than this after it came (ms, by `now`): a
	 * destination still working on the request when the answer timed out gets this long to finish.
	 */
	checkAfterMs?: number;
	sleep?: (ms: number) => Promise<void>;
	random?: () => number;
	now?: () => number;
}

const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Sends one message under the policy and says what the ledger should record. */
export async function deliver<M>(channel: Channel<M>, message: M, options: DeliverOptions): Promise<Verdict> {
	const { policy } = options;
	const sleep = options.sleep ?? defaultSleep;
	const now = options.now ?? Date.now;
	const repeatSafe = channel.idempotent || options.acceptUncertain === true;
	const maxAttempts = Math.max(1, Math.floor(policy.maxAttempts));
	const checkSinceMs = options.checkSinceMs;
	const check = !channel.idempotent && checkSinceMs !== undefined ? channel.check?.bind(channel) : undefined;
	let waitedMs = 0;
	let maybePerformed = false;
	let last: AttemptResult | null = null;
	let attempts = 0;
	let checked: CheckedAnswer | undefined;
	const withCheck = <V extends Verdict>(verdict: V): V => (checked ? { ...verdict, check: checked } : verdict);

	const failed = (reason: 'gave_up' | 'unauthorized' | 'out_of_time', detail: string): Verdict =>
		withCheck({
			status: 'failed_retryable',
			reason,
			detail:
				checked?.outcome === 'not_found' && last?.kind === 'uncertain'
					? `${detail} (the destination was asked and does not have it: nothing went out)`
					: detail,
			response: last && 'response' in last ? last.response : null,
			attempts,
			waitedMs,
			maybePerformed,
		});
	const ambiguous = (result: AttemptResult, why: string): Verdict =>
		withCheck({
			status: 'needs_review',
			reason: 'ambiguous',
			detail: `${reasonOf(result)}. The destination may have acted, and ${why}.`,
			response: 'response' in result ? result.response : null,
			attempts,
			waitedMs,
		});

	/**
	 * Asks the destination whether an uncertain attempt went through. Returns the verdict to end
	 * with (found; or cannot tell where a repeat is not safe), or null to go on (not found: nothing
	 * went out; or cannot tell where the user accepted a possible duplicate).
	 */
	const settleByCheck = async (result: AttemptResult, answeredAt: number): Promise<Verdict | null> => {
		const early = (options.checkAfterMs ?? 0) - (now() - answeredAt);
		if (early > 0) await sleep(early);
		const answer: CheckVerdict = await check!(message, { sinceMs: checkSinceMs!, untilMs: Date.now() }).catch((error: unknown) => ({
			outcome: 'unknown' as const,
			detail: `The check failed: ${(error as Error)?.message ?? String(error)}`,
		}));
		checked = { outcome: answer.outcome, detail: answer.detail, checkedAt: new Date().toISOString() };
		if (answer.outcome === 'found') {
			return withCheck({ status: 'completed', externalId: answer.externalId, response: answer.response, attempts, waitedMs });
		}
		if (answer.outcome === 'not_found') {
			maybePerformed = false;
			return null;
		}
		if (answer.outcome === 'later' && !repeatSafe) {
			// Not now (rate limit, timeout, 5xx): the next delivery asks again; nobody decides yet.
			return withCheck({
				status: 'failed_retryable',
				reason: 'check_later',
				detail: `The answer to the send left it unknown whether it arrived${'reason' in result ? ` (${result.reason})` : ''}, and the destination could not be asked now (${answer.detail})`,
				response: result.response ?? null,
				attempts,
				waitedMs,
				maybePerformed: true,
				retryAfterMs: answer.retryAfterMs,
			});
		}
		// Any other answer: the destination could not tell.
		return repeatSafe ? null : ambiguous(result, `the destination could not tell whether it arrived (${answer.detail})`);
	};

	for (let attempt = 1; attempt <= maxAttempts; attempt++) {
		if (options.deadline !== undefined && now() > options.deadline) {
			return failed('out_of_time', `The time this run may hold the step was about to run out before attempt ${attempt}; nothing more was sent`);
		}
		if (options.heldUntil !== undefined && now() >= options.heldUntil()) {
			return failed(
				'out_of_time',
				`The ledger did not confirm this run's hold on the step in time (its renewals failed), so attempt ${attempt} was not started: another run could take the step over once the hold runs out`,
			);
		}
		attempts = attempt;
		let result: AttemptResult;
		try {
			result = await channel.send(message, attempt);
		} catch (error) {
			// A channel that throws has a bug or met something unforeseen: assume the worst.
			result = { kind: 'uncertain', reason: (error as Error)?.message ?? String(error), retryAfterMs: null, response: null };
		}
		const answeredAt = now();
		last = result;
		switch (result.kind) {
			case 'sent':
				return withCheck({ status: 'completed', externalId: result.externalId, response: result.response, attempts, waitedMs });
			case 'rejected':
				return withCheck({ status: 'needs_review', reason: 'rejected', detail: result.reason, response: result.response, attempts, waitedMs });
			case 'unauthorized':
				return failed('unauthorized', result.reason);
			case 'uncertain':
				maybePerformed = true;
				if (!repeatSafe && !check) return ambiguous(result, `${channel.name} cannot be asked again safely`);
				break;
			case 'unavailable':
				break;
		}
		// An uncertain answer with a check: the destination is asked before this run gives up or
		// tries again, so that a message that went out is recorded as sent, not sent twice.
		const toCheck = result.kind === 'uncertain' && check !== undefined;
		/** Ends the attempts: asks first after an uncertain answer (found wins), then `end`. */
		const stop = async (end: () => Verdict): Promise<Verdict> => (toCheck ? ((await settleByCheck(result, answeredAt)) ?? end()) : end());
		if (attempt === maxAttempts) {
			return stop(() => failed('gave_up', `${reasonOf(result)}; gave up after ${attempts} attempt${attempts === 1 ? '' : 's'}`));
		}
		const asked = result.kind === 'unavailable' || result.kind === 'uncertain' ? result.retryAfterMs : null;
		const delay = asked ?? backoffDelay(attempt, policy, options.random);
		if (asked !== null && asked > policy.maxDelayMs) {
			return stop(() => failed('gave_up', `${reasonOf(result)}; the destination asked to wait ${Math.ceil(asked / 1000)} s, longer than the longest wait allowed`));
		}
		if (waitedMs + delay > policy.maxTotalWaitMs) {
			return stop(() => failed('gave_up', `${reasonOf(result)}; waiting again would exceed the total wait allowed`));
		}
		if (options.deadline !== undefined && now() + delay > options.deadline) {
			return stop(() => failed('out_of_time', `${reasonOf(result)}; the time this run may hold the step runs out before the next attempt could start`));
		}
		await sleep(delay);
		waitedMs += delay;
		// Asked as late as possible, just before the next attempt: a destination still working on
		// the request when the answer timed out has had the backoff wait to finish it.
		if (toCheck) {
			const settled = await settleByCheck(result, answeredAt);
			if (settled) return settled;
		}
	}
	return failed('gave_up', `${last ? reasonOf(last) : 'No attempt was made'}; gave up after ${attempts} attempt${attempts === 1 ? '' : 's'}`);
}

const reasonOf = (r: AttemptResult) => (r.kind === 'sent' ? 'sent' : r.reason);
