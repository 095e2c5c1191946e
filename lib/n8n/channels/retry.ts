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
 *   was written, a 500/502/504): retried only when repeating is safe (the destination honours an
 *   idempotency key, or the user accepted the risk); otherwise `needs_review` at once.
 *
 * Nothing here knows about n8n or the ledger.
 */
import type { AttemptResult, Channel } from './types';

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

export type Verdict =
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
			reason: 'gave_up' | 'unauthorized' | 'out_of_time';
			detail: string;
			response: unknown;
			attempts: number;
			waitedMs: number;
			/** Whether an attempt may have been performed (only possible when repeating is safe). */
			maybePerformed: boolean;
	  };

export interface DeliverOptions {
	policy: RetryPolicy;
	/** Repeating an attempt that may have been performed is acceptable (the user said so). */
	acceptUncertain?: boolean;
	/** Epoch ms: no attempt starts after this (the lease ends soon after). */
	deadline?: number;
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
	let waitedMs = 0;
	let maybePerformed = false;
	let last: AttemptResult | null = null;
	let attempts = 0;

	const failed = (reason: 'gave_up' | 'unauthorized' | 'out_of_time', detail: string): Verdict => ({
		status: 'failed_retryable',
		reason,
		detail,
		response: last && 'response' in last ? last.response : null,
		attempts,
		waitedMs,
		maybePerformed,
	});

	for (let attempt = 1; attempt <= maxAttempts; attempt++) {
		if (options.deadline !== undefined && now() > options.deadline) {
			return failed('out_of_time', `The time this run may hold the step was about to run out before attempt ${attempt}; nothing more was sent`);
		}
		attempts = attempt;
		let result: AttemptResult;
		try {
			result = await channel.send(message, attempt);
		} catch (error) {
			// A channel that throws has a bug or met something unforeseen: assume the worst.
			result = { kind: 'uncertain', reason: (error as Error)?.message ?? String(error), retryAfterMs: null, response: null };
		}
		last = result;
		switch (result.kind) {
			case 'sent':
				return { status: 'completed', externalId: result.externalId, response: result.response, attempts, waitedMs };
			case 'rejected':
				return { status: 'needs_review', reason: 'rejected', detail: result.reason, response: result.response, attempts, waitedMs };
			case 'unauthorized':
				return failed('unauthorized', result.reason);
			case 'uncertain':
				maybePerformed = true;
				if (!repeatSafe) {
					return {
						status: 'needs_review',
						reason: 'ambiguous',
						detail: `${result.reason}. The destination may have acted, and ${channel.name} cannot be asked again safely.`,
						response: result.response,
						attempts,
						waitedMs,
					};
				}
				break;
			case 'unavailable':
				break;
		}
		if (attempt === maxAttempts) break;
		const asked = result.kind === 'unavailable' || result.kind === 'uncertain' ? result.retryAfterMs : null;
		const delay = asked ?? backoffDelay(attempt, policy, options.random);
		if (asked !== null && asked > policy.maxDelayMs) {
			return failed('gave_up', `${reasonOf(result)}; the destination asked to wait ${Math.ceil(asked / 1000)} s, longer than the longest wait allowed`);
		}
		if (waitedMs + delay > policy.maxTotalWaitMs) {
			return failed('gave_up', `${reasonOf(result)}; waiting again would exceed the total wait allowed`);
		}
		if (options.deadline !== undefined && now() + delay > options.deadline) {
			return failed('out_of_time', `${reasonOf(result)}; the time this run may hold the step runs out before the next attempt could start`);
		}
		await sleep(delay);
		waitedMs += delay;
	}
	return failed('gave_up', `${last ? reasonOf(last) : 'No attempt was made'}; gave up after ${attempts} attempt${attempts === 1 ? '' : 's'}`);
}

const reasonOf = (r: AttemptResult) => (r.kind === 'sent' ? 'sent' : r.reason);
