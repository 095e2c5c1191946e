import { OutputLists } from '../../lib/n8n/outputLists';

const item = (id: number) => ({ json: { id } });

describe('OutputLists', () => {
	test('each output holds its items in order, as long as what it holds; an output nothing reached is an empty array', () => {
		const outputs = new OutputLists(4, 5);
		outputs.add(0, item(1));
		outputs.add(2, item(2));
		outputs.add(0, item(3));
		outputs.add(0, item(4));
		const lists = outputs.done();
		expect(lists).toEqual([[item(1), item(3), item(4)], [], [item(2)], []]);
		expect(lists.map((list) => list.length)).toEqual([3, 0, 1, 0]);
		// No holes: n8n and JSON see exactly the items.
		expect(lists.every((list) => Object.keys(list).length === list.length)).toBe(true);
		expect(JSON.stringify(lists)).toBe('[[{"json":{"id":1}},{"json":{"id":3}},{"json":{"id":4}}],[],[{"json":{"id":2}}],[]]');
	});

	test('every item of the batch on one output fills it exactly', () => {
		const outputs = new OutputLists(3, 10_000);
		for (let i = 0; i < 10_000; i++) outputs.add(1, item(i));
		const [none, all, other] = outputs.done();
		expect(none).toEqual([]);
		expect(other).toEqual([]);
		expect(all).toHaveLength(10_000);
		expect(all[9_999]).toEqual(item(9_999));
	});

	test('more items than the batch size still all arrive (the array grows as a plain one would)', () => {
		const outputs = new OutputLists(1, 2);
		for (let i = 0; i < 5; i++) outputs.add(0, item(i));
		expect(outputs.done()[0]).toEqual([0, 1, 2, 3, 4].map(item));
	});
});
