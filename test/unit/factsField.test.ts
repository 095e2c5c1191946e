import type { IDataObject } from 'n8n-workflow';

import { FACTS_FIELD, itemWithFacts, withFactsField } from '../../lib/n8n/facts';

describe('withFactsField', () => {
	const facts = { outcome: 'new' };

	test('copies the item JSON, adds the facts last, and leaves the input alone', () => {
		const json = { id: 'evt_1', nested: { a: 1 } };
		const out = withFactsField(json, facts);
		expect(out).toEqual({ id: 'evt_1', nested: { a: 1 }, [FACTS_FIELD]: facts });
		expect(Object.keys(out)).toEqual(['id', 'nested', FACTS_FIELD]);
		expect(json).toEqual({ id: 'evt_1', nested: { a: 1 } });
	});

	test('replaces facts an earlier node left, in their place', () => {
		const out = withFactsField({ [FACTS_FIELD]: { outcome: 'old' }, id: 'x' }, facts);
		expect(Object.keys(out)).toEqual([FACTS_FIELD, 'id']);
		expect(out[FACTS_FIELD]).toBe(facts);
	});

	test('a parsed "__proto__" member stays a member and does not become the prototype', () => {
		const json = JSON.parse('{"id":"evt_2","__proto__":{"polluted":true}}');
		const out = withFactsField(json, facts);
		expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
		expect((out as Record<string, unknown>).polluted).toBeUndefined();
		expect(Object.prototype.hasOwnProperty.call(out, '__proto__')).toBe(true);
		expect(JSON.stringify(out)).toBe(`{"id":"evt_2","__proto__":{"polluted":true},"${FACTS_FIELD}":{"outcome":"new"}}`);
	});
});

describe('withFactsField on JSON behind a proxy (n8n 1.x: Code node items from vm2)', () => {
	const facts = { outcome: 'new' };
	/** A proxy that counts what is asked of it, as vm2's bridge answers each of these in turn. */
	const counted = (target: object) => {
		const asked = { ownKeys: 0, getOwnPropertyDescriptor: 0, get: 0, has: 0 };
		const proxy = new Proxy(target, {
			ownKeys: (t) => (asked.ownKeys++, Reflect.ownKeys(t)),
			getOwnPropertyDescriptor: (t, k) => (asked.getOwnPropertyDescriptor++, Reflect.getOwnPropertyDescriptor(t, k)),
			get: (t, k, r) => (asked.get++, Reflect.get(t, k, r)),
			has: (t, k) => (asked.has++, Reflect.has(t, k)),
		});
		return { proxy: proxy as IDataObject, asked };
	};

	test('copies what Object.assign copies, facts last, input left alone', () => {
		const target = { id: 'evt_1', nested: { a: 1 }, [FACTS_FIELD]: { outcome: 'old' }, amount: 3 };
		const { proxy } = counted(target);
		const out = withFactsField(proxy, facts);
		expect(out).toEqual({ ...Object.assign({}, target), [FACTS_FIELD]: facts });
		expect(Object.keys(out)).toEqual(['id', 'nested', FACTS_FIELD, 'amount']);
		expect(out.nested).toBe(target.nested);
		expect(target[FACTS_FIELD]).toEqual({ outcome: 'old' });
		expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
	});

	test('reads the member names once and each value once, and asks for no descriptor', () => {
		// Object.assign (the copy before) asked for each member's descriptor too, and for "__proto__".
		const { proxy, asked } = counted({ id: 'evt_1', amount: 1 });
		withFactsField(proxy, facts);
		expect(asked).toEqual({ ownKeys: 1, getOwnPropertyDescriptor: 0, get: 2, has: 0 });
	});

	test('a "__proto__" member stays a member', () => {
		const { proxy } = counted(JSON.parse('{"id":"evt_2","__proto__":{"polluted":true}}'));
		const out = withFactsField(proxy, facts);
		expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
		expect((out as Record<string, unknown>).polluted).toBeUndefined();
		expect(JSON.stringify(out)).toBe(`{"id":"evt_2","__proto__":{"polluted":true},"${FACTS_FIELD}":{"outcome":"new"}}`);
	});
});

describe('itemWithFacts', () => {
	test('passes the binary data on as it is (not copied), pairs the item, and adds no binary field to an item without one', () => {
		const binary = { data: { data: 'aGVsbG8=', mimeType: 'text/plain' } };
		const withBinary = itemWithFacts({ json: { id: 'a' }, binary }, 3, { outcome: 'new' });
		expect(withBinary.binary).toBe(binary);
		expect(withBinary.pairedItem).toEqual({ item: 3 });
		const plain = itemWithFacts({ json: { id: 'b' } }, 0, { outcome: 'new' });
		expect(Object.keys(plain)).toEqual(['json', 'pairedItem']);
	});
});
