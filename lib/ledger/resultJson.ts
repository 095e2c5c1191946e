/**
 * A stored result as JSON text, in a form every backend can keep, and back.
 *
 * PostgreSQL's jsonb cannot hold the NUL character (`\u0000`) nor a lone UTF-16 surrogate
 * (`\ud83d` without its pair) anywhere in a value: the write fails, and with it every row of the
 * statement. Such characters do reach results (a destination's response, an AI model's answer,
 * text copied from a PDF). A result that holds one is kept as its JSON text under one marker key,
 *
 *     { "$idempotencyJson": "{\"text\":\"before\\u0000after\"}" }
 *
 * which jsonb holds (the escapes are plain characters of a string there), and `resultFromStored`
 * gives back the very value that was recorded. A result that is itself an object with the marker
 * key is kept the same way, so that nothing a caller records is ever misread. Every other result
 * is kept as it is: SQL that reads a field of `result` works as before, and reading a row costs
 * one property check. Redis keeps the JSON text as it is and needs none of this. (An operator's
 * "It Was Sent" keeps the row's earlier result under `before` as PostgreSQL holds it, so there a
 * marked result stays in its marked form.)
 */

/** The marker key of a result kept as JSON text. */
export const RESULT_AS_JSON = '$idempotencyJson';

/** Escapes JSON.stringify writes only for NUL and lone surrogates (paired ones are written as they are). */
const UNSTORABLE = /\\u0000|\\ud[89a-f][0-9a-f]{2}/;

const isMarked = (value: unknown): value is Record<string, unknown> =>
	typeof value === 'object' && value !== null && !Array.isArray(value) && Object.prototype.hasOwnProperty.call(value, RESULT_AS_JSON);

/**
 * The JSON text to store for a result; null for none. A backslash in the text followed by `u0000`
 * may also select the marked form: it still reads back the same.
 */
export function resultToJson(result: unknown): string | null {
	if (result === undefined) return null;
	const text = JSON.stringify(result);
	if (text === undefined) return null;
	if (!isMarked(result) && !(text.includes('\\u') && UNSTORABLE.test(text))) return text;
	return JSON.stringify({ [RESULT_AS_JSON]: text });
}

/** A stored result as the backend parsed it, back to the value that was recorded. */
export function resultFromStored(stored: unknown): unknown {
	if (!isMarked(stored)) return stored;
	const text = stored[RESULT_AS_JSON];
	// Only the form resultToJson writes (one key, a string) is read back; anything else is as it is.
	if (typeof text !== 'string' || Object.keys(stored).length !== 1) return stored;
	try {
		return JSON.parse(text);
	} catch {
		return stored;
	}
}
