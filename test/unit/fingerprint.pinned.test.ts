/**
 * Stored fingerprints (and the keys of "Hash of Chosen Fields" and "Hash of Whole Item") are
 * `sha256(normalize(value))`: any change of the canonical text makes every row written before it
 * count as different content, and every hashed key as a new key. These outputs were taken from the
 * implementation of 2026-11-25; a faster normalize must give them byte for byte, and must agree
 * with that implementation (kept below as the reference) on many generated values.
 */
import { fingerprint, normalize } from '../../lib/ledger/fingerprint';
import { random } from '../support/random';

class Point {
	y = 2;
	x = 1;
	get sum() {
		return this.x + this.y;
	}
}

const INPUTS: Record<string, unknown> = {
	'top-level string': '  padded text\r\n',
	'top-level number': 42,
	'top-level undefined': undefined,
	'top-level null': null,
	'top-level function': () => 1,
	'top-level symbol': Symbol('s'),
	'top-level true': true,
	numbers: [0, -0, 1, -1, 1.5, 1e21, 1e-7, 123456789012345680000, 0.1 + 0.2, Number.MAX_SAFE_INTEGER, Number.MIN_VALUE, NaN, Infinity, -Infinity],
	bigints: [0n, -5n, 12345678901234567890123n],
	'booleans and null': [true, false, null],
	'strings to trim': [' a ', '\t\nb\n', '\u00a0c\u00a0', '\ufeffd', 'e\u2028', '   '],
	'line endings': ['a\r\nb', 'a\rb', 'a\r\r\nb', 'a\n\rb', '\r\n x \r\n'],
	'strings to escape': ['"quoted"', 'back\\slash', 'tab\tin', 'nul\u0000', 'bell\u0007', 'del\u007f', 'line\u2028sep', 'slash/'],
	unicode: ['na\u00efve', '\u6ce8\u6587', '\u{1F600}', 'lone \ud800 high', 'lone \udc00 low', 'pair \ud83d\ude00', '\ufffd'],
	'key order': { b: 1, a: 2, B: 3, _: 4, '10': 5, '9': 6, '1': 7, 'a b': 8, '\u00e9': 9, '\u{1F600}': 10, '\ufffd': 11, '': 12 },
	'nested shapes in a list': [
		{ id: 1, amount: 2, customer: { email: ' x@y ' } },
		{ amount: 3, id: 4, customer: { email: 'z' } },
		{ id: 5, customer: null },
		{ customer: { email: undefined }, id: 6 },
	],
	'undefined, functions and symbols as members': { a: undefined, b: () => 1, c: Symbol('c'), d: 1 },
	'only undefined members': { a: undefined },
	'undefined, functions and symbols in arrays': [undefined, () => 1, Symbol('x'), 1],
	// eslint-disable-next-line no-sparse-arrays
	'sparse array': [1, , 3],
	'empty containers': { o: {}, l: [], s: '', n: [[]], m: [{}] },
	dates: [new Date(Date.UTC(2026, 10, 23, 12, 0, 0, 5)), new Date(0), new Date(-1)],
	'class instance': new Point(),
	'boxed primitives': [Object('ab'), Object(3), Object(false)],
	'map, set, buffer, typed array': [new Map([['a', 1]]), new Set([1]), Buffer.from('hi'), new Uint8Array([3, 1])],
	'own __proto__ member': JSON.parse('{"__proto__":{"a":1},"b":2}'),
	'null prototype': Object.assign(Object.create(null), { b: 1, a: 2 }),
	'object with toJSON': { toJSON: () => 'ignored', v: 1 },
	deep: { a: { b: { c: { d: [{ e: ' f ' }] } } } },
	'webhook body': { body: { event: 'order.paid', data: { id: 'ord_1', total: 19.99 } }, headers: { 'content-type': 'application/json' } },
};

/** [input, its canonical text, its fingerprint], from the implementation of 2026-11-25. */
const PINNED: Array<[string, string, string]> = [
	['top-level string', '"padded text"', '45c918c736adf4a264f1709942249da09f41c7f59c7b3de1574ac3532f49e6ad'],
	['top-level number', '42', '73475cb40a568e8da8a045ced110137e159f890ac4da883b6b17dc651b3a8049'],
	['top-level undefined', 'null', '74234e98afe7498fb5daf1f36ac2d78acc339464f950703b8c019892f982b90b'],
	['top-level null', 'null', '74234e98afe7498fb5daf1f36ac2d78acc339464f950703b8c019892f982b90b'],
	['top-level function', 'null', '74234e98afe7498fb5daf1f36ac2d78acc339464f950703b8c019892f982b90b'],
	['top-level symbol', 'null', '74234e98afe7498fb5daf1f36ac2d78acc339464f950703b8c019892f982b90b'],
	['top-level true', 'true', 'b5bea41b6c623f7c09f1bf24dcae58ebab3c0cdd90ad966bc43a45b44867e12b'],
	['numbers', '[0,0,1,-1,1.5,1e+21,1e-7,123456789012345680000,0.30000000000000004,9007199254740991,5e-324,null,null,null]', '6706cca6cd497c980cca3ce0d0c97ca5ab5d8dd4ce80bc9bc5f50477cad2cf33'],
	['bigints', '[0,-5,12345678901234567890123]', 'd814d2d64557b4b75ac538907ae1916f2360efd9a2b4f3ce0a9aff48dff41637'],
	['booleans and null', '[true,false,null]', '4d0f18de2133118249c26acc481838d4f6bb6bc1de882d99abbd19ae9397e8df'],
	['strings to trim', '["a","b","c","d","e",""]', '96d360e4240a64497f09a0be3bfc29a8d83ac6895b4326b7c27bb3b8e0847d75'],
	['line endings', '["a\\nb","a\\nb","a\\n\\nb","a\\n\\nb","x"]', '37f887103c19e18fa839d31016f464687735766b63cb357d8154016c1e3e14e8'],
	['strings to escape', '["\\"quoted\\"","back\\\\slash","tab\\tin","nul\\u0000","bell\\u0007","del\u007f","line\u2028sep","slash/"]', '43b301e5903a2bc1cd56f4d52380aab49f0b85db7923e4b5dd7da19aa3df9b47'],
	['unicode', '["na\u00efve","\u6ce8\u6587","\ud83d\ude00","lone \\ud800 high","lone \\udc00 low","pair \ud83d\ude00","\ufffd"]', 'fa3d02c461dc2a57d81680c3f87953235178d5a89d47de6688dd521103f9cd11'],
	['key order', '{"":12,"1":7,"10":5,"9":6,"B":3,"_":4,"a":2,"a b":8,"b":1,"\u00e9":9,"\ud83d\ude00":10,"\ufffd":11}', 'f5715a4bf9163c51250b678f9139ee629238c837f4a067081c6cde4690ad0793'],
	['nested shapes in a list', '[{"amount":2,"customer":{"email":"x@y"},"id":1},{"amount":3,"customer":{"email":"z"},"id":4},{"customer":null,"id":5},{"customer":{},"id":6}]', 'ce8e25bf7b2cdb2b441ab89afe594d8a2d9604e6df4019ae4c31e0849ac2f794'],
	['undefined, functions and symbols as members', '{"d":1}', '99e6326a5a58748fb618850ce96523d192332126fbaeafd073b004f75148fdd3'],
	['only undefined members', '{}', '44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a'],
	['undefined, functions and symbols in arrays', '[null,null,null,1]', 'f08cbac69b81e8037583338387f7d06ac15165f47a6dad5871987811e22b2daa'],
	['sparse array', '[1,null,3]', '7db5b36a1553a4e31914df4beb60752bd07320e3056ac1d3790660c4cad6a173'],
	['empty containers', '{"l":[],"m":[{}],"n":[[]],"o":{},"s":""}', '116693153b0ae31f3308c742f378c8730babac5e301a2403b0da20ba19053a8d'],
	['dates', '["2026-11-23T12:00:00.005Z","1970-01-01T00:00:00.000Z","1969-12-31T23:59:59.999Z"]', 'cd20fde8ae035037cc7f659ea5b95f8789611e02f7217043fa18d575f04e8b9b'],
	['class instance', '{"x":1,"y":2}', '689a8f1db95402580476e38c264278ce7b1e664320cfb4e9ae8d3a908cf09964'],
	['boxed primitives', '[{"0":"a","1":"b"},{},{}]', 'c78d154cdf857a31a6094a6e84d6c7827219895fc0bfe20004141874bb8d3786'],
	['map, set, buffer, typed array', '[{},{},{"0":104,"1":105},{"0":3,"1":1}]', '4d2806441c6c99e7a10d0bc1fbbdd31eb6cf3d040d4275f832a344e78f700488'],
	['own __proto__ member', '{"__proto__":{"a":1},"b":2}', '8d6c652f4aa72c9b091d3bbace50453a7acf63914c029720b36c6feb1db06324'],
	['null prototype', '{"a":2,"b":1}', 'd3626ac30a87e6f7a6428233b3c68299976865fa5508e4267c5415c76af7a772'],
	['object with toJSON', '{"v":1}', 'afbf9d0f3560b0fd7795e81c42a0a79ee6b6fc67e064f77826aee642cad28d91'],
	['deep', '{"a":{"b":{"c":{"d":[{"e":"f"}]}}}}', '4bf193295134f80978bff035625fad4ed168b1bc79376518056757bb33e3933c'],
	['webhook body', '{"body":{"data":{"id":"ord_1","total":19.99},"event":"order.paid"},"headers":{"content-type":"application/json"}}', '37f110d3fa323b0d09015ccbbe61154b1a28444f156190c7bc0592f5906fb019'],
];

describe('normalize and fingerprint give what they gave before', () => {
	test.each(PINNED)('%s', (name, text, hash) => {
		expect(normalize(INPUTS[name])).toBe(text);
		expect(fingerprint(INPUTS[name])).toBe(hash);
	});

	test('every input above is pinned', () => {
		expect(PINNED.map(([name]) => name).sort()).toEqual(Object.keys(INPUTS).sort());
	});

	test('an invalid date is refused, as before', () => {
		expect(() => normalize({ when: new Date(NaN) })).toThrow(RangeError);
	});

	test('the same as the reference implementation on 20,000 generated values', () => {
		const rnd = random(20261125);
		let differ = 0;
		const examples: string[] = [];
		for (let n = 0; n < 20_000; n++) {
			const value = anyValue(rnd, 0);
			const expected = reference(value);
			const actual = normalize(value);
			if (actual !== expected) {
				differ++;
				if (examples.length < 3) examples.push(`${expected} became ${actual}`);
			}
		}
		expect(examples).toEqual([]);
		expect(differ).toBe(0);
	});
});

// Pieces of text with everything a canonical form treats specially: whitespace to trim, line
// endings, characters JSON escapes, surrogates (paired and lone), and plain text.
const PIECES = [' ', '\t', '\n', '\r', '\r\n', '\u00a0', '\u2028', '\ufeff', '"', '\\', '/', '\u0000', '\u001f', '\u007f', 'a', 'Z', '0', 'é', '注', '\u{1F600}', '\ud800', '\udfff', 'id', 'x y'];
// Member names: a few that repeat (shapes recur, in several orders), and generated ones (many shapes).
const NAMES = ['id', 'amount', 'customer', 'email', 'a', 'b', 'B', '_', '10', '9', '1', '', 'é', '\u{1F600}', 'a b', '"q"', '__proto__x'];

function anyText(rnd: () => number): string {
	let s = '';
	const n = Math.floor(rnd() * 5);
	for (let i = 0; i < n; i++) s += PIECES[Math.floor(rnd() * PIECES.length)];
	return s;
}

function anyName(rnd: () => number): string {
	return rnd() < 0.8 ? NAMES[Math.floor(rnd() * NAMES.length)] : anyText(rnd);
}

function anyValue(rnd: () => number, depth: number): unknown {
	const pick = Math.floor(rnd() * (depth > 3 ? 10 : 14));
	switch (pick) {
		case 0: return anyText(rnd);
		case 1: return Math.floor(rnd() * 2e6) - 1e6;
		case 2: return [0, -0, 1e21, 1e-7, 0.1, NaN, Infinity, -Infinity, Number.MAX_SAFE_INTEGER, 5e-324][Math.floor(rnd() * 10)];
		case 3: return rnd() * 1000 - 500;
		case 4: return rnd() > 0.5;
		case 5: return null;
		case 6: return undefined;
		case 7: return BigInt(Math.floor(rnd() * 1e6)) * 1_000_000_007n;
		case 8: return rnd() > 0.5 ? new Date(Math.floor(rnd() * 4e12)) : () => 1;
		case 9: return `evt_${Math.floor(rnd() * 1e6)}`;
		case 10: {
			const list: unknown[] = [];
			const n = Math.floor(rnd() * 4);
			for (let i = 0; i < n; i++) list.push(anyValue(rnd, depth + 1));
			return list;
		}
		default: {
			const object: Record<string, unknown> = {};
			const n = Math.floor(rnd() * 5);
			for (let i = 0; i < n; i++) object[anyName(rnd)] = anyValue(rnd, depth + 1);
			return object;
		}
	}
}

/** normalize as it was written on 2026-11-25: the specification of the canonical text. */
function reference(value: unknown): string {
	const text = (s: string) => JSON.stringify(s.includes('\r') ? s.replace(/\r\n?/g, '\n').trim() : s.trim());
	const write = (v: unknown): string | undefined => {
		switch (typeof v) {
			case 'string':
				return text(v);
			case 'number':
			case 'boolean':
				return JSON.stringify(v);
			case 'bigint':
				return v.toString();
			case 'object':
				break;
			default:
				return undefined;
		}
		if (v === null) return 'null';
		if (v instanceof Date) return JSON.stringify(v.toISOString());
		if (Array.isArray(v)) {
			let out = '[';
			for (let i = 0; i < v.length; i++) out += (i ? ',' : '') + (write(v[i]) ?? 'null');
			return out + ']';
		}
		const names = Object.keys(v);
		if (names.length > 1) names.sort();
		let out = '{';
		for (const name of names) {
			const member = write((v as Record<string, unknown>)[name]);
			if (member === undefined) continue;
			out += (out.length > 1 ? ',' : '') + JSON.stringify(name) + ':' + member;
		}
		return out + '}';
	};
	return write(value) ?? 'null';
}
