/**
 * What a channel (Slack, SMTP, HTTP) reports about one delivery attempt. Channels know nothing
 * about n8n or the ledger; the retry policy and the node decide what each answer means.
 */
export type AttemptResult =
	/** The destination accepted it. */
	| { kind: 'sent'; externalId: string | null; response: unknown }
	/**
	 * The destination said no and will keep saying no (a permanent 4xx, an SMTP 5xx, Slack
	 * `channel_not_found`): a person has to look. Nothing was performed.
	 */
	| { kind: 'rejected'; reason: string; response: unknown }
	/**
	 * The destination refused to act for now (429, 503, SMTP 4xx, connection refused). Nothing was
	 * performed, so trying again is safe on every channel. `retryAfterMs` comes from Retry-After.
	 */
	| { kind: 'unavailable'; reason: string; retryAfterMs: number | null; response: unknown }
	/**
	 * The request may have been performed: a timeout or a dropped connection after the request was
	 * written, or a 500/502/504. Only safe to repeat on a destination that honours an idempotency key.
	 */
	| { kind: 'uncertain'; reason: string; retryAfterMs: number | null; response: unknown }
	/**
	 * The credentials were refused (401, Slack `invalid_auth`, SMTP 535). Nothing was performed;
	 * the next run may try again once the credential is fixed.
	 */
	| { kind: 'unauthorized'; reason: string; response: unknown };

/**
 * The time window in which an earlier attempt may have sent a message: from when the step was
 * first claimed to when this run took it over, as epoch milliseconds by the ledger's clock. A
 * check widens it by its own margin for the destination's clock.
 */
export interface CheckWindow {
	sinceMs: number;
	untilMs: number;
}

/**
 * What a destination says about a message an earlier attempt may have sent. `found` carries what
 * a send would have returned (Slack `ts`, an HTTP resource id). `unknown` means the check cannot
 * answer and asking again will not help (no scope, not in the channel, not set up): the step goes
 * to Needs Review. `later` means it could not answer for a passing reason (rate limit, timeout,
 * 5xx): the step waits to be checked again, `retryAfterMs` from now at the earliest when the
 * destination said so. `resume` is the check's own note of how far it got (a later check of the
 * same message gets it back in `CheckRequest.resume`); `progressed` says it got further than before.
 */
export type CheckVerdict =
	| { outcome: 'found'; externalId: string | null; response: unknown; detail: string }
	| { outcome: 'not_found'; detail: string }
	| { outcome: 'unknown'; detail: string }
	| { outcome: 'later'; detail: string; retryAfterMs: number | null; resume?: unknown; progressed?: boolean };

/** One message to look for: where it may have gone out, and how far an earlier check got. */
export interface CheckRequest<M> {
	message: M;
	window: CheckWindow;
	/** The `resume` of this message's last `later` verdict, if any. */
	resume?: unknown;
}

/**
 * How long the checks of one run may take, by a monotonic clock (`now()`): no request starts once
 * it could not finish before `deadline`, and waits for Retry-After add up to at most `maxWaitMs`.
 */
export interface CheckBudget {
	now(): number;
	deadline: number;
	maxWaitMs: number;
}

export interface Channel<M> {
	/** `http`, `slack` or `email`: stored with the result. */
	readonly name: string;
	/**
	 * Whether repeating the same message is safe because the destination deduplicates it (an HTTP
	 * API that honours the Idempotency-Key header). Slack and email are not.
	 */
	readonly idempotent: boolean;
	send(message: M, attempt: number): Promise<AttemptResult>;
	/**
	 * Asks the destination whether this message went out in an earlier attempt, within `window`.
	 * Never sends anything, never throws (a failure is `unknown`). Absent on a channel that has no
	 * way to ask, or whose check the user has not set up.
	 */
	check?(message: M, window: CheckWindow): Promise<CheckVerdict>;
	/**
	 * Many checks at once, where the destination answers them together (Slack: one history read
	 * per channel or thread). Verdicts in request order; never throws. Absent: `check` per message.
	 */
	checkMany?(requests: Array<CheckRequest<M>>, budget: CheckBudget): Promise<CheckVerdict[]>;
}

/** A minimal HTTP client interface, so that channels run on n8n's request helpers or on anything else. */
export interface HttpCall {
	method: string;
	url: string;
	headers: Record<string, string>;
	qs?: Record<string, string>;
	/** Objects are sent as JSON; strings as they are. */
	body?: unknown;
	timeoutMs: number;
}

export interface HttpReply {
	status: number;
	headers: Record<string, unknown>;
	body: unknown;
}

/** Resolves with any HTTP status; rejects only when no response arrived (the error's `code` says why). */
export type HttpTransport = (call: HttpCall) => Promise<HttpReply>;
