import type { ClaimMode, ClaimOutcome, ClaimRequest, LedgerRecord } from './types';

/** A row's identity as one string: namespace, key and step joined by NUL. */
export const idKey = (ns: string, key: string, step: string) => `${ns}\u0000${key}\u0000${step}`;
const rowId = (r: ClaimRequest) => idKey(r.namespace, r.key, r.step);

/**
 * Duplicates inside one batch resolve before any storage is touched: the first request for a
 * row goes to the backend, every later one is answered `batch_duplicate`.
 */
export function resolveBatch(requests: ClaimRequest[]): {
	unique: number[];
	outcomes: Array<ClaimOutcome | undefined>;
} {
	const first = new Map<string, number>();
	const unique: number[] = [];
	const outcomes = new Array<ClaimOutcome | undefined>(requests.length);
	// Usually every request has the same namespace and step: then the key alone tells rows apart,
	// and no id string is built per request.
	const { namespace, step } = requests[0] ?? { namespace: '', step: '' };
	const byKey = requests.every((r) => r.namespace === namespace && r.step === step);
	for (let i = 0; i < requests.length; i++) {
		const id = byKey ? requests[i].key : rowId(requests[i]);
		const firstIndex = first.get(id);
		if (firstIndex === undefined) {
			first.set(id, i);
			unique.push(i);
		} else {
			outcomes[i] = { kind: 'batch_duplicate', firstIndex };
		}
	}
	return { unique, outcomes };
}

/** Why a live row that the backend refused to hand over blocked this claim. */
export function classifyExisting(record: LedgerRecord, request: ClaimRequest, mode: ClaimMode): ClaimOutcome {
	if (record.status === 'in_progress' && record.leaseExpiresAt && record.leaseExpiresAt.getTime() > Date.now()) {
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
