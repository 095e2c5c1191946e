/**
 * Duplicates inside one batch (resolveBatch): each later request of a row points at the first
 * request of that row, whatever lies between them, and the distinct rows come out in the global
 * row order that claim statements lock in.
 */
import { compareCodePoints, resolveBatch } from '../../lib/ledger/claims';
import type { ClaimRequest } from '../../lib/ledger/types';

const req = (key: string, namespace = 'ns', step = ''): ClaimRequest => ({ namespace, key, step, fingerprint: null });
const rowOf = (r: ClaimRequest) => [r.namespace, r.key, r.step];

describe('resolveBatch', () => {
	test('later requests of a row point at its first request; namespaces and steps are separate rows', () => {
		const batch = [req('b'), req('a', 'other'), req('a'), req('b'), req('a', 'other'), req('a', 'ns', 'email'), req('a'), req('b')];
		const { unique, outcomes } = resolveBatch(batch);
		expect(outcomes).toEqual([
			undefined,
			undefined,
			undefined,
			{ kind: 'batch_duplicate', firstIndex: 0 },
			{ kind: 'batch_duplicate', firstIndex: 1 },
			undefined,
			{ kind: 'batch_duplicate', firstIndex: 2 },
			{ kind: 'batch_duplicate', firstIndex: 0 },
		]);
		expect(unique.map((i) => rowOf(batch[i]))).toEqual([
			['ns', 'a', ''],
			['ns', 'a', 'email'],
			['ns', 'b', ''],
			['other', 'a', ''],
		]);
	});

	test('one namespace and step: 10,000 keys in code point order, the first of each repeated key kept', () => {
		const keys = Array.from({ length: 10_000 }, (_, i) => `k${(i * 7919) % 6000}${i % 3 === 0 ? '\u{1F600}' : i % 5 === 0 ? '\uFF5E' : ''}`);
		const batch = keys.map((key) => req(key));
		const { unique, outcomes } = resolveBatch(batch);
		const firstOf = new Map<string, number>();
		keys.forEach((key, i) => {
			if (!firstOf.has(key)) firstOf.set(key, i);
		});
		expect(unique).toHaveLength(firstOf.size);
		expect(new Set(unique)).toEqual(new Set(firstOf.values()));
		keys.forEach((key, i) => {
			const first = firstOf.get(key)!;
			expect(outcomes[i]).toEqual(first === i ? undefined : { kind: 'batch_duplicate', firstIndex: first });
		});
		const inOrder = unique.map((i) => keys[i]);
		expect(inOrder).toEqual([...inOrder].sort(compareCodePoints));
	});

	test('several namespaces and steps: code point order in each, also where only a namespace or a step has a character above U+FFFF', () => {
		const batch = [req('a', '\uFF5E'), req('a', '\u{1F600}'), req('a', 'ns', '\u{1F600}'), req('a', 'ns', '\uFF5E'), req('b', '\uFF5E')];
		const { unique } = resolveBatch(batch);
		expect(unique.map((i) => rowOf(batch[i]))).toEqual([
			['ns', 'a', '\uFF5E'],
			['ns', 'a', '\u{1F600}'],
			['\uFF5E', 'a', ''],
			['\uFF5E', 'b', ''],
			['\u{1F600}', 'a', ''],
		]);
	});
});
