import { LedgerInputError } from './errors';

export const DURATION_UNITS = {
	seconds: 1_000,
	minutes: 60_000,
	hours: 3_600_000,
	days: 86_400_000,
	weeks: 604_800_000,
} as const;
export type DurationUnit = keyof typeof DURATION_UNITS;

/** "30 days" style amounts to milliseconds, with a readable error for nonsense. */
export function toMilliseconds(amount: unknown, unit: DurationUnit, what: string): number {
	const n = typeof amount === 'string' && amount.trim() !== '' ? Number(amount) : amount;
	if (typeof n !== 'number' || !Number.isFinite(n) || n <= 0) {
		throw new LedgerInputError(
			`The ${what} must be a positive number of ${unit}, not ${JSON.stringify(amount)}`,
			`Set ${what} to a number such as 30.`,
		);
	}
	const factor = DURATION_UNITS[unit];
	if (factor === undefined) throw new LedgerInputError(`Unknown time unit "${unit}" for ${what}`);
	const ms = Math.round(n * factor);
	if (ms > 100 * 365 * DURATION_UNITS.days) {
		throw new LedgerInputError(`The ${what} is longer than 100 years`, `Use a shorter ${what}.`);
	}
	return ms;
}

/** "within 5 seconds" ("within 1 second", "within 0.5 seconds") for a time limit; "in time" when it is unknown. */
export function withinSeconds(ms: number | undefined): string {
	if (ms === undefined || !Number.isFinite(ms)) return 'in time';
	const n = Math.round(ms / 100) / 10;
	return `within ${n} second${n === 1 ? '' : 's'}`;
}

/**
 * Default time limits of both backends. Connecting (TCP and the handshake) gets a few seconds: a
 * server that accepts the connection and never answers must fail the node quickly. One statement
 * or command gets 10 seconds: a claim of 10,000 keys takes well under a second (calls are
 * chunked), so this catches a server that stopped answering mid-session without cutting real
 * work short. The credential's Timeout (Seconds) and Command Timeout (Seconds) change them.
 */
export const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;
export const DEFAULT_COMMAND_TIMEOUT_MS = 10_000;
