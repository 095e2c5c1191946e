import type { ClaimMode, ClaimOptions, ClaimOutcome, ClaimRequest, LedgerRecord, RowId } from './types';

/** A row's identity as one string: namespace, key and step joined by NUL. */
export const idKey = (ns: string, key: string, step: string) => `${ns}\u0000${key}\u0000${step}`;

/**
 * Duplicates inside one batch resolve before any storage is touched: the first request for a
 * row goes to the backend, every later one is answered `batch_duplicate`. `unique` lists the
 * first requests in the global row order (see sortByRowId), the order a statement locks them in.
 */
export function resolveBatch(requests: ClaimRequest[]): {
	unique: number[];
	outcomes: Array<ClaimOutcome | undefined>;
} {
	const n = requests.length;
	const outcomes = new Array<ClaimOutcome | undefined>(n);
	// Index arrays made at full size (and `unique` cut to what it holds), not grown one push at a
	// time: each growth copies, about three times the final size for 10,000 requests.
	const all = new Array<number>(n);
	for (let i = 0; i < n; i++) all[i] = i;
	const unique = new Array<number>(n);
	let u = 0;
	// The sort is stable: the requests of one row are adjacent, the first one first.
	let first: ClaimRequest | null = null;
	let firstIndex = -1;
	const sorted = sortByRowId(all, requests);
	// Counted loops, not for...of: this loop runs once per claim, in code V8 has not fully
	// optimised, where each step of an array iterator is a new object (40 bytes per request on
	// Node 24, a probe).
	for (let s = 0; s < n; s++) {
		const i = sorted[s];
		const r = requests[i];
		if (first !== null && r.key === first.key && r.namespace === first.namespace && r.step === first.step) {
			outcomes[i] = { kind: 'batch_duplicate', firstIndex };
		} else {
			unique[u++] = i;
			first = r;
			firstIndex = i;
		}
	}
	unique.length = u;
	return { unique, outcomes };
}

/** Retention of a claim: never shorter than its lease, so a row cannot expire while a run holds it. */
export const effectiveTtlMs = (options: ClaimOptions) =>
	options.mode === 'lease' ? Math.max(options.ttlMs, options.leaseMs) : options.ttlMs;

/** Whether a run holds the row's lease right now, as the ledger's clock saw it when it answered. */
export const leaseLive = (record: LedgerRecord) =>
	record.status === 'in_progress' && record.leaseRemainingMs !== null && record.leaseRemainingMs > 0;

/** Why a live row that the backend refused to hand over blocked this claim. */
export function classifyExisting(record: LedgerRecord, request: ClaimRequest, mode: ClaimMode): ClaimOutcome {
	if (leaseLive(record)) {
		return { kind: 'in_progress', record };
	}
	const differs =
		record.fingerprint !== null && request.fingerprint !== null && record.fingerprint !== request.fingerprint;
	// A newer version is expected to carry a new payload; only an equal or older one can mismatch.
	if (differs && !(mode === 'newer' && record.version !== (request.version ?? null))) {
		return { kind: 'mismatch', record };
	}
	return { kind: 'duplicate', record };
}

/**
 * One global order for row ids: code point order, which is the byte order of their UTF-8 text,
 * which is how PostgreSQL (`COLLATE "C"`) and Redis compare them. Every statement that locks
 * several rows locks them in this order, whatever the database's collation, so concurrent
 * statements cannot deadlock. JavaScript's `<` compares UTF-16 code units, which agrees with code
 * point order except when both differing units are at or above U+D800: those are remapped.
 */
export function compareCodePoints(a: string, b: string): number {
	if (a === b) return 0;
	const n = Math.min(a.length, b.length);
	for (let i = 0; i < n; i++) {
		let x = a.charCodeAt(i);
		let y = b.charCodeAt(i);
		if (x === y) continue;
		if (x >= 0xd800 && y >= 0xd800) {
			x = x >= 0xe000 ? x - 0x800 : x + 0x2000;
			y = y >= 0xe000 ? y - 0x800 : y + 0x2000;
		}
		return x - y;
	}
	return a.length - b.length;
}

const HIGH_UNITS = /[\ud800-\uffff]/;

/** Request indexes in the global row order (see compareCodePoints). */
export function sortByRowId<R extends RowId>(indexes: number[], requests: R[]): number[] {
	// Usually one namespace and one step: then the keys alone decide.
	const { namespace, step } = requests[indexes[0]] ?? { namespace: '', step: '' };
	const keysDecide = indexes.every((i) => requests[i].namespace === namespace && requests[i].step === step);
	// Native comparison is exact unless some text compared has a unit at or above U+D800: one scan decides.
	const high = (r: RowId) => HIGH_UNITS.test(r.key) || (!keysDecide && (HIGH_UNITS.test(r.namespace) || HIGH_UNITS.test(r.step)));
	const exact = indexes.some((i) => high(requests[i]));
	const cmp = exact ? compareCodePoints : (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
	if (keysDecide) {
		// The keys read once into one array: the sort compares 130,000 pairs for 10,000 keys.
		const key = new Array<string>(requests.length);
		for (let s = 0; s < indexes.length; s++) key[indexes[s]] = requests[indexes[s]].key;
		return [...indexes].sort((x, y) => cmp(key[x], key[y]));
	}
	return [...indexes].sort((x, y) => {
		const a = requests[x];
		const b = requests[y];
		return cmp(a.namespace, b.namespace) || cmp(a.key, b.key) || cmp(a.step, b.step);
	});
}
