/**
 * A check that could not answer for a passing reason (Slack's rate limit, a timeout, a 5xx) leaves
 * the step to be checked again, not to a person. The row is recorded `failed_retryable` with
 * `keepSending`: it keeps the phase `sending` (it may have gone out), so the next claim takes it
 * at once, sees `previousPhase` `sending` and asks again; it never sends blindly. Its result says
 * `check_later`, how many checks could not answer, from when on to ask again (by the ledger's
 * clock), and how far the last check got (`resume`).
 *
 *   check ─┬─ found / not found ──► recorded as sent / sent
 *          ├─ cannot tell (no scope, not in channel, no check) ──► Needs Review
 *          └─ not now ──► failed_retryable, phase sending, In Progress (check_later)
 *                         └─ the N-th such check ("Checks Before Review") ──► Needs Review
 */
import type { IDataObject } from 'n8n-workflow';

import type { LedgerRecord } from '../../lib/ledger/types';

export const CHECK_LATER = 'check_later';

/** What a `check_later` row keeps in its result. */
export interface PendingCheck {
	/** Checks that could not answer and made no progress, this one included. */
	checks: number;
	/** Epoch ms by the ledger's clock before which asking again is pointless (Retry-After). */
	checkAgainAtMs: number | null;
	/** The channel check's own note of how far it got. */
	resume?: unknown;
}

/** The pending re-check a claimed row carries from an earlier run, if it is one. */
export function pendingCheck(claim: LedgerRecord): PendingCheck | null {
	const result = claim.result as IDataObject | null;
	if (!result || typeof result !== 'object' || result.reason !== CHECK_LATER) return null;
	const checks = typeof result.checks === 'number' && Number.isFinite(result.checks) ? result.checks : 0;
	const at = typeof result.checkAgainAt === 'string' ? Date.parse(result.checkAgainAt) : Number.NaN;
	return { checks, checkAgainAtMs: Number.isNaN(at) ? null : at, ...(result.resume !== undefined ? { resume: result.resume } : {}) };
}

/** Whether the destination asked this claim to wait still (both times by the ledger's clock). */
export const tooEarly = (claim: LedgerRecord, pending: PendingCheck | null): boolean =>
	pending?.checkAgainAtMs != null && claim.updatedAt.getTime() < pending.checkAgainAtMs;

/** The ledger's clock now, from the claim's time and how long ago (by a monotonic clock) it answered. */
export const ledgerNow = (claim: LedgerRecord, claimedAt: number, now: number): number => claim.updatedAt.getTime() + Math.max(0, now - claimedAt);

/** The row's result while it waits for the next check. */
export function checkLaterResult(pending: PendingCheck, detail: string, extra: IDataObject): IDataObject {
	return {
		reason: CHECK_LATER,
		detail,
		checks: pending.checks,
		checkAgainAt: pending.checkAgainAtMs === null ? null : new Date(pending.checkAgainAtMs).toISOString(),
		...(pending.resume !== undefined ? { resume: pending.resume as IDataObject } : {}),
		...extra,
	};
}

/** What the item on In Progress says about it. */
export function checkLaterDetail(pending: PendingCheck, limit: number, why: string): string {
	const when = pending.checkAgainAtMs === null ? 'on the next delivery' : `on the next delivery after ${new Date(pending.checkAgainAtMs).toISOString()}`;
	return `A previous attempt may have sent this message and the destination could not be asked now (${why}). Nothing was sent; it is checked again ${when} (${pending.checks} of ${limit} checks without an answer before a person is asked)`;
}
