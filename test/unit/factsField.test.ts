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
