/**
 * Every `reason` Guarded Send puts on an output item, by output, with what it means in plain words.
 * The item's reason and the reason stored in the ledger row's result are the same word. Tests
 * check that the node emits no reason missing here, so the docs can list this table as it is.
 */
export const NEEDS_REVIEW_REASONS = {
	ambiguous: 'An earlier attempt may have sent this and then stopped before it was recorded. Nothing was sent again.',
	rejected: 'The destination refused the message (for example HTTP 400 or 422, or a Slack error). Sending it again would not help.',
	gave_up: 'Not delivered after every attempt allowed (for example HTTP 429 or 503). The next run tries again.',
	unauthorized: 'The destination refused the credential (HTTP 401 or 403, Slack invalid_auth, SMTP 535). Fix the credential; the next run tries again.',
	out_of_time: 'The time this run may hold the step ran out before the next attempt. The next run tries again.',
	mismatch: 'This key was sent before with different content. Nothing was sent.',
	marked_for_review: 'An earlier run put this step on Needs Review. Release it with the Idempotency Ledger node to send again.',
	error: 'The item could not be sent because of a problem in its data or settings; the error says which.',
} as const;

export const SKIPPED_REASONS = {
	already_sent: 'This key was sent before; the stored result is on the item.',
	mismatch: 'This key was sent before with different content, and "When the Content Differs" says to treat it as already sent.',
	same_key_earlier_in_input: 'An earlier item of this same input has the same key and content; only that one was sent.',
} as const;

export const IN_PROGRESS_REASONS = {
	in_progress: 'Another run is sending this step right now. Nothing was sent here; that run finishes it.',
	check_later: 'An earlier attempt may have sent this, and the destination could not be asked now (rate limit, timeout, server error). Nothing was sent; the next delivery asks again.',
} as const;

export type ReviewReason = keyof typeof NEEDS_REVIEW_REASONS;

/** Every reason, whatever the output: the list the docs show. */
export const REASONS: readonly string[] = [
	...new Set([...Object.keys(NEEDS_REVIEW_REASONS), ...Object.keys(SKIPPED_REASONS), ...Object.keys(IN_PROGRESS_REASONS)]),
];
