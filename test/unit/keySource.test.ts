import { formatPath, parseFieldPath, parsePath, pathTemplate, plainPath, readPath, toKeyText } from '../../lib/n8n/keySource';
import { LedgerInputError } from '../../lib/ledger/errors';

describe('field paths', () => {
	test.each([
		['id', ['id']],
		['data.object.id', ['data', 'object', 'id']],
		['items[0].id', ['items', 0, 'id']],
		['["order id"]', ['order id']],
		["a['odd.name'].b", ['a', 'odd.name', 'b']],
		['a["quote \\" inside"]', ['a', 'quote " inside']],
		['$json.data.id', ['$json', 'data', 'id']],
		['a b', null],
	])('parsePath(%j)', (text, expected) => {
		expect(parsePath(text)).toEqual(expected);
	});

	test('a person may type $json. in front of a field name', () => {
		expect(parseFieldPath('$json.data.id', 'key field')).toEqual(['data', 'id']);
		expect(parseFieldPath(' json["a b"] ', 'key field')).toEqual(['a b']);
	});

	test.each(['', '   ', 'a..b', 'a.', '[unterminated', '{{ $json.id }}', 42])('a bad field name %j is refused in words', (text) => {
		expect(() => parseFieldPath(text, 'key field')).toThrow(LedgerInputError);
		expect(() => parseFieldPath(text, 'key field')).toThrow(/is not a field name/);
	});

	test('formatPath round-trips', () => {
		for (const text of ['id', 'data.object.id', 'items[0].id', '["order id"].x']) {
			expect(parsePath(formatPath(parsePath(text)!))).toEqual(parsePath(text));
		}
	});

	test('readPath never throws on missing steps', () => {
		const json = { a: { b: [{ c: 1 }] }, n: null };
		expect(readPath(json, ['a', 'b', 0, 'c'])).toBe(1);
		expect(readPath(json, ['a', 'x', 'y'])).toBeUndefined();
		expect(readPath(json, ['n', 'y'])).toBeUndefined();
	});
});

describe('plain-path expressions', () => {
	test.each([
		['={{ $json.id }}', ['id']],
		['={{$json.id}}', ['id']],
		['={{ $json["order id"] }}', ['order id']],
		["={{ $json['order id'] }}", ['order id']],
		['={{ $json.data.object.id }}', ['data', 'object', 'id']],
		['={{ $json.items[0].id }}', ['items', 0, 'id']],
	])('%s is read directly from the item', (raw, path) => {
		expect(plainPath(raw)).toEqual({ node: null, path });
	});

	test.each([
		["={{ $('Webhook').item.json.body.id }}", 'Webhook', ['json', 'body', 'id']],
		['={{ $("Order (paid)").item.json["order id"] }}', 'Order (paid)', ['json', 'order id']],
		["={{$( 'A' ) . item .json.items[0]}}", 'A', ['json', 'items', 0]],
	])('%s is read directly from the paired item of the node', (raw, node, path) => {
		expect(plainPath(raw)).toEqual({ node, path });
	});

	test.each([
		'={{ $json.id + "x" }}',
		'={{ $json.id.toString() }}',
		'={{ $json?.id }}',
		'={{ $json }}',
		"={{ $('Webhook').item.json.id + 1 }}",
		"={{ $('Webhook').item }}",
		"={{ $('Web\\'hook').item.json.id }}",
		"={{ $('Webhook').itemMatching(0).json.id }}",
		"={{ $('Webhook').first().json.id }}",
		"={{ $('Webhook')?.item.json.id }}",
		"={{ $(name).item.json.id }}",
		'=id-{{ $json.id }}',
		'= {{ $json.id }}',
		'={{ $json.id }} ',
		'{{ $json.id }}',
		'={{ $json.id }}{{ $json.v }}',
		'={{ $json[$json.k] }}',
	])('%s goes to the expression engine', (raw) => {
		expect(plainPath(raw)).toBeNull();
	});

	test('text templates may mix paths of the item and of paired items', () => {
		expect(pathTemplate("=k-{{ $json.id }}/{{ $('Webhook').item.json.body.id }}")).toEqual([
			{ text: 'k-' },
			{ node: null, path: ['id'] },
			{ text: '/' },
			{ node: 'Webhook', path: ['json', 'body', 'id'] },
		]);
		expect(pathTemplate("=k-{{ $('Webhook').item.json.id + 1 }}")).toBeNull();
	});
});

describe('key text', () => {
	test('strings stay, numbers print as JavaScript prints them', () => {
		expect(toKeyText('evt_1')).toBe('evt_1');
		expect(toKeyText(42)).toBe('42');
		expect(toKeyText(1.5)).toBe('1.5');
		expect(toKeyText(1e21)).toBe('1e+21');
	});
	test.each([
		[undefined, /missing/],
		[null, /missing/],
		[{ a: 1 }, /an object/],
		[[1], /a list/],
		[true, /a boolean/],
		[Number.NaN, /a number/],
	])('%j is refused in words', (value, message) => {
		expect(() => toKeyText(value)).toThrow(message);
	});
});
