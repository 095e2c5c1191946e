import { createHash } from 'crypto';

/**
 * Canonical JSON: object keys sorted, strings trimmed with line endings normalized,
 * `undefined` members dropped, and no formatting whitespace. Two payloads that differ only
 * in key order or in surrounding whitespace normalize to the same text.
 */
export function normalize(value: unknown): string {
	return JSON.stringify(canonical(value)) ?? 'null';
}

function canonical(value: unknown): unknown {
	if (typeof value === 'string') return value.replace(/\r\n?/g, '\n').trim();
	if (value === null || typeof value !== 'object') return value;
	if (value instanceof Date) return value.toISOString();
	if (Array.isArray(value)) return value.map((v) => (v === undefined ? null : canonical(v)));
	const out: Record<string, unknown> = {};
	for (const name of Object.keys(value).sort()) {
		const member = (value as Record<string, unknown>)[name];
		if (member !== undefined) out[name] = canonical(member);
	}
	return out;
}

export const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

/** SHA-256 of the normalized value, hex. */
export const fingerprint = (value: unknown): string => sha256(normalize(value));
