import * as crypto from 'crypto';

/**
 * Canonical JSON: object keys sorted, strings trimmed with line endings normalized,
 * `undefined` members dropped, and no formatting whitespace. Two payloads that differ only
 * in key order or in surrounding whitespace normalize to the same text.
 */
export function normalize(value: unknown): string {
	return write(value) ?? 'null';
}

// What JSON.stringify escapes in a string: quote, backslash, control characters and lone
// surrogates. Text with none of them (a paired surrogate is let through to JSON.stringify too) is
// the same quoted by hand, without the call.
const ESCAPED = /["\\\u0000-\u001f\ud800-\udfff]/;

function text(s: string): string {
	const t = s.includes('\r') ? s.replace(/\r\n?/g, '\n').trim() : s.trim();
	return ESCAPED.test(t) ? JSON.stringify(t) : `"${t}"`;
}

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

/** Objects of one shape: the same member names in the same order. */
interface Shape {
	names: string[];
	sorted: string[];
	/** Each sorted name as `"name":`. */
	labels: string[];
}

// The objects of a batch have few shapes (an item, its nested objects): the last few seen are
// kept, so that their names are sorted and quoted once, not once per object. While objects do not
// find their shape (names that change with every item), only every 32nd one looks; the others are
// written as before shapes were kept.
const shapes: Shape[] = [];
const KEPT_SHAPES = 8;
let next = 0;
let misses = 0;

function shapeOf(names: string[]): Shape | undefined {
	if (misses >= 32 && ++misses % 32 !== 0) return undefined;
	for (let s = 0; s < shapes.length; s++) {
		const known = shapes[s].names;
		if (known.length !== names.length) continue;
		let i = 0;
		while (i < names.length && known[i] === names[i]) i++;
		if (i < names.length) continue;
		misses = 0;
		return shapes[s];
	}
	misses++;
	const sorted = names.slice().sort();
	const shape = { names, sorted, labels: sorted.map((name) => quoted(name) + ':') };
	shapes[next] = shape;
	next = (next + 1) % KEPT_SHAPES;
	return shape;
}

function write(value: unknown): string | undefined {
	switch (typeof value) {
		case 'string':
			return text(value);
		case 'number':
			// As JSON.stringify: the shortest text of a finite number, null for NaN and infinities.
			return Number.isFinite(value) ? String(value) : 'null';
		case 'boolean':
			return value ? 'true' : 'false';
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
	// A single name needs no order; several are sorted, once per kept shape.
	const shape = names.length > 1 ? shapeOf(names) : undefined;
	if (shape) {
		let out = '';
		for (let i = 0; i < shape.sorted.length; i++) {
			const member = write((value as Record<string, unknown>)[shape.sorted[i]]);
			if (member !== undefined) out += (out ? ',' : '{') + shape.labels[i] + member;
		}
		return out ? out + '}' : '{}';
	}
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
