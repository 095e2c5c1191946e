import { LedgerInputError } from './errors';
import { COUNTS_KEPT_DAYS, type RowId } from './types';

export const MAX_KEY_LENGTH = 512;
export const MAX_NAMESPACE_LENGTH = 200;
export const MAX_STEP_LENGTH = 200;

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;
/** Made once here: a regular expression literal in a function is a new RegExp object each time it runs (56 bytes per key checked). */
const LEADING_SPACE = /^\s/;

/** A schema or table name: letters, digits and underscores, starting with a letter or underscore, at most 63 characters. */
export function assertIdentifier(value: unknown, what: string): string {
	if (typeof value !== 'string' || !IDENTIFIER.test(value)) {
		throw new LedgerInputError(
			`The ${what} ${JSON.stringify(value)} is not a valid name`,
			`Use letters, digits and underscores only, start with a letter or underscore, and keep it to 63 characters (for example "idempotency_ledger").`,
		);
	}
	return value;
}

/** "key parameter" for a bare name, else the description as given ('key (field "id")'). */
const subject = (what: string) => (/^\w+$/.test(what) ? `${what} parameter` : what);

function assertText(value: unknown, what: string, max: number, allowEmpty: boolean): string {
	if (typeof value !== 'string') {
		const shown = value === undefined ? 'nothing' : value === null ? 'null' : `a ${Array.isArray(value) ? 'list' : typeof value}`;
		throw new LedgerInputError(
			`The ${what} must be text, but it is ${shown}`,
			`Check the ${subject(what)}: it should resolve to a string such as an event or order id.`,
		);
	}
	// Only text that starts with whitespace can be blank: no trimmed copy of every key.
	if (!allowEmpty && (value.length === 0 || (LEADING_SPACE.test(value) && value.trim() === ''))) {
		throw new LedgerInputError(
			`The ${what} is empty`,
			`Check the ${subject(what)}: the field it points at is missing or blank on this item.`,
		);
	}
	// Characters as a person counts them (an emoji is one), counted only when the text could be too long.
	if (value.length > max) {
		const characters = [...value].length;
		if (characters > max) {
			throw new LedgerInputError(
				`The ${what} is ${characters} characters long; the limit is ${max}`,
				`Use a shorter ${what}, such as an event or order id, or a hash of the long text.`,
			);
		}
	}
	// PostgreSQL text cannot hold NUL; it is refused on every backend, so a key means the same on both.
	if (value.includes('\u0000')) {
		throw new LedgerInputError(
			`The ${what} contains a NUL character (an invisible "\\0"), which the ledger cannot store`,
			`Check the ${subject(what)}: the value it reads has a NUL byte in it. Remove it, for example with {{ $json.id.replaceAll('\\u0000', '') }}.`,
		);
	}
	return value;
}

/** `what` names the key in messages, e.g. 'key (field "body.id")'. */
export const assertKey = (value: unknown, what = 'key'): string => assertText(value, what, MAX_KEY_LENGTH, false);
export const assertNamespace = (value: unknown): string =>
	assertText(value, 'namespace', MAX_NAMESPACE_LENGTH, false);
export const assertStep = (value: unknown): string => assertText(value, 'step', MAX_STEP_LENGTH, true);

export function assertRowId(id: RowId): RowId {
	assertNamespace(id.namespace);
	assertKey(id.key);
	assertStep(id.step);
	return id;
}

export function assertPositive(value: number, what: string): number {
	if (!Number.isFinite(value) || value <= 0) {
		throw new LedgerInputError(`The ${what} must be a positive number, not ${value}`);
	}
	return value;
}

const COUNTER_NAME = /^[A-Za-z][A-Za-z0-9_]{0,63}$/;

/** How a value that should be an object looks in a message. */
const shape = (value: unknown) =>
	value === undefined ? 'nothing' : value === null ? 'null' : Array.isArray(value) ? 'a list' : `a ${typeof value}`;

/**
 * Checks every increment of an addCounts call before anything is written, and merges those of one
 * namespace: one entry per namespace, in first-seen order, holding every (counter, amount) pair of
 * the call in call order. The pairs are not summed here: the backends add them exactly
 * (PostgreSQL numeric; Redis HINCRBYFLOAT), not in JavaScript floating point. A namespace with no
 * counters is left out.
 */
export function countsByNamespace(increments: unknown): Map<string, Array<[name: string, amount: number]>> {
	if (!Array.isArray(increments)) {
		throw new LedgerInputError(
			`The counts to add must be a list, but they are ${shape(increments)}`,
			'Pass a list of { namespace, counts } entries, for example [{ namespace: "prompts", counts: { hits: 1 } }].',
		);
	}
	const merged = new Map<string, Array<[string, number]>>();
	increments.forEach((increment: unknown, i) => {
		const { namespace, counts } = (increment ?? {}) as { namespace?: unknown; counts?: unknown };
		assertNamespace(namespace);
		if (typeof counts !== 'object' || counts === null || Array.isArray(counts)) {
			throw new LedgerInputError(
				`The counts of entry ${i + 1} (namespace ${JSON.stringify(namespace)}) must be an object of counter names and numbers, but they are ${shape(counts)}`,
				'Pass counts such as { hits: 1, costUsd: 0.0042 }. Nothing was added.',
			);
		}
		const pairs = merged.get(namespace as string) ?? [];
		for (const [name, amount] of Object.entries(counts)) {
			if (!COUNTER_NAME.test(name)) {
				throw new LedgerInputError(
					`The counter name ${JSON.stringify(name)} is not valid`,
					'Use letters, digits and underscores only, start with a letter, and keep it to 64 characters (for example "cacheHits"). Nothing was added.',
				);
			}
			if (typeof amount !== 'number' || !Number.isFinite(amount)) {
				const shown = typeof amount === 'number' ? String(amount) : typeof amount === 'string' ? `the text ${JSON.stringify(amount)}` : shape(amount);
				throw new LedgerInputError(
					`The amount for the counter "${name}" must be a finite number, but it is ${shown}`,
					'Pass a number such as 1 or 0.25 (0 and negative numbers are fine); NaN, Infinity and text are refused. Nothing was added.',
				);
			}
			pairs.push([name, amount]);
		}
		if (pairs.length > 0) merged.set(namespace as string, pairs);
	});
	return merged;
}

/** The `days` of readCounts: a whole number from 1 (today only) to COUNTS_KEPT_DAYS. */
export function assertCountDays(days: unknown): number {
	if (typeof days !== 'number' || !Number.isInteger(days) || days < 1 || days > COUNTS_KEPT_DAYS) {
		throw new LedgerInputError(
			`The number of days to read must be a whole number from 1 to ${COUNTS_KEPT_DAYS}, not ${typeof days === 'number' ? days : shape(days)}`,
			`Ask for 1 (today only) up to ${COUNTS_KEPT_DAYS} days: counters are kept ${COUNTS_KEPT_DAYS} days.`,
		);
	}
	return days;
}
