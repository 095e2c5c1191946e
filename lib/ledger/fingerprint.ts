import * as crypto from 'crypto';

/**
 * Canonical JSON: object keys sorted, strings trimmed with line endings normalized,
 * `undefined` members dropped, and no formatting whitespace. Two payloads that differ only
 * in key order or in surrounding whitespace normalize to the same text.
 */
export function normalize(value: unknown): string {
	return write(value) ?? 'null';
}

const text = (s: string) => JSON.stringify(s.includes('\r') ? s.replace(/\r\n?/g, '\n').trim() : s.trim());

// Member names repeat across items: quote each once.
const quotedNames = new Map<string, string>();
function quoted(name: string): string {
	let q = quotedNames.get(name);
	if (q === undefined) {
		q = JSON.stringify(name);
		if (quotedNames.size < 4096) quotedNames.set(name, q);
	}
	return q;
}

function write(value: unknown): string | undefined {
	switch (typeof value) {
		case 'string':
			return text(value);
		case 'number':
		case 'boolean':
			return JSON.stringify(value);
		case 'bigint':
			return value.toString();
		case 'object':
			break;
		default:
			return undefined;
	}
	if (value === null) return 'null';
	if (value instanceof Date) return JSON.stringify(value.toISOString());
	if (Array.isArray(value)) {
		let out = '[';
		for (let i = 0; i < value.length; i++) out += (i ? ',' : '') + (write(value[i]) ?? 'null');
		return out + ']';
	}
	const names = Object.keys(value);
	if (names.length > 1) names.sort();
	let out = '{';
	for (const name of names) {
		const member = write((value as Record<string, unknown>)[name]);
		if (member === undefined) continue;
		out += (out.length > 1 ? ',' : '') + quoted(name) + ':' + member;
	}
	return out + '}';
}

// crypto.hash (Node >= 20.12) is a one-shot digest, several times cheaper per item than createHash.
const oneShot = (crypto as { hash?: (algorithm: string, data: string, encoding: 'hex') => string }).hash;

export const sha256 = (text: string): string =>
	oneShot ? oneShot('sha256', text, 'hex') : crypto.createHash('sha256').update(text).digest('hex');

/** SHA-256 of the normalized value, hex. */
export const fingerprint = (value: unknown): string => sha256(normalize(value));
