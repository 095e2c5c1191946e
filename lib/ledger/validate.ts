import { LedgerInputError } from './errors';
import type { RowId } from './types';

export const MAX_KEY_LENGTH = 512;
export const MAX_NAMESPACE_LENGTH = 200;
export const MAX_STEP_LENGTH = 200;

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

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
	if (!allowEmpty && (value.length === 0 || (/^\s/.test(value) && value.trim() === ''))) {
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
