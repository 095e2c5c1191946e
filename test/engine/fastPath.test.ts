/**
 * The fast path reads `={{ $json.a.b }}` straight from the item. It must give exactly what n8n's
 * expression engine gives, on a property-based set of payloads: the same key, or an error on both.
 */
import type { IDataObject, INodeExecutionData } from 'n8n-workflow';

import { fillTemplate, jsonPathTemplate, readPath, simpleJsonPath, toKeyText } from '../../lib/n8n/keySource';
import { evaluateParameterForItems } from '../support/engine';

/** Small deterministic PRNG (mulberry32), so a failure can be replayed. */
function random(seed: number) {
	return () => {
		seed |= 0;
		seed = (seed + 0x6d2b79f5) | 0;
		let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
		t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
		return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
	};
}

function anyValue(rnd: () => number, depth = 0): unknown {
	const pick = Math.floor(rnd() * 13);
	switch (pick) {
		case 0: return `evt_${Math.floor(rnd() * 1e6)}`;
		case 1: return Math.floor(rnd() * 1e9) - 5e8;
		case 2: return rnd() * 1000;
		case 3: return [0, -0, 1e21, 1e-7, Number.MAX_SAFE_INTEGER][Math.floor(rnd() * 5)];
		case 4: return rnd() > 0.5;
		case 5: return null;
		case 6: return undefined;
		case 7: return '';
		case 8: return '  spaced value  ';
		case 9: return 'ünïcødé ✓ 注文';
		case 10: return depth < 2 ? { id: anyValue(rnd, depth + 1), 'order id': anyValue(rnd, depth + 1) } : 'leaf';
		case 11: return depth < 2 ? [anyValue(rnd, depth + 1), anyValue(rnd, depth + 1)] : 'leaf';
		default: return String(Math.floor(rnd() * 100));
	}
}

function payload(rnd: () => number): IDataObject {
	const json: IDataObject = {};
	if (rnd() > 0.1) json.id = anyValue(rnd) as never;
	if (rnd() > 0.2) json['order id'] = anyValue(rnd) as never;
	if (rnd() > 0.2) json.data = (rnd() > 0.2 ? { object: rnd() > 0.15 ? { id: anyValue(rnd) } : anyValue(rnd) } : anyValue(rnd)) as never;
	if (rnd() > 0.3) json.items = (rnd() > 0.2 ? [{ id: anyValue(rnd) }, { id: anyValue(rnd) }] : anyValue(rnd)) as never;
	return JSON.parse(JSON.stringify(json));
}

const keyOf = (value: unknown): { ok: true; key: string } | { ok: false } => {
	try {
		return { ok: true, key: toKeyText(value) };
	} catch {
		return { ok: false };
	}
};

const expressions = [
	'={{ $json.id }}',
	'={{$json.id}}',
	'={{ $json["order id"] }}',
	"={{ $json['order id'] }}",
	'={{ $json.data.object.id }}',
	'={{ $json.items[0].id }}',
	'={{ $json.items[1].id }}',
];

describe('fast path vs the expression engine', () => {
	const rnd = random(20261122);
	const items: INodeExecutionData[] = Array.from({ length: 300 }, () => ({ json: payload(rnd) }));

	test.each(expressions)('%s gives the same key or the same failure on 300 random payloads', async (expression) => {
		const path = simpleJsonPath(expression);
		expect(path).not.toBeNull();
		const engine = await evaluateParameterForItems({ key: expression }, items, 'key');
		expect(engine).toHaveLength(items.length);
		let agreedKeys = 0;
		let agreedFailures = 0;
		items.forEach((item, i) => {
			const fast = keyOf(readPath(item.json, path!));
			const outcome = engine[i];
			const slow = outcome.ok ? keyOf(outcome.value) : { ok: false as const };
			if (fast.ok !== slow.ok || (fast.ok && slow.ok && fast.key !== slow.key)) {
				throw new Error(`item ${i} ${JSON.stringify(item.json)}: fast ${JSON.stringify(fast)} vs engine ${JSON.stringify(outcome.ok ? outcome.value : String(outcome.error))}`);
			}
			if (fast.ok) agreedKeys++;
			else agreedFailures++;
		});
		// The payloads exercise both sides: real keys and real failures.
		expect(agreedKeys).toBeGreaterThan(20);
		expect(agreedFailures).toBeGreaterThan(20);
	});
});

const templates = [
	'=k-{{ $json.id }}',
	'=order-{{$json.data.object.id}}-paid',
	'={{ $json.id }}/{{ $json["order id"] }}',
	"=shop {{ $json['order id'] }} #{{ $json.items[0].id }}",
	'={{ $json.id }}{{ $json.id }}',
];

describe('text templates built only from $json paths vs the expression engine', () => {
	const rnd = random(20261123);
	const items: INodeExecutionData[] = Array.from({ length: 300 }, () => ({ json: payload(rnd) }));

	test.each(templates)('%s gives the same text on 300 random payloads (objects and lists left to the engine)', async (expression) => {
		const parts = jsonPathTemplate(expression);
		expect(parts).not.toBeNull();
		const engine = await evaluateParameterForItems({ key: expression }, items, 'key');
		let filled = 0;
		let leftToEngine = 0;
		items.forEach((item, i) => {
			const fast = fillTemplate(parts!, item.json);
			const outcome = engine[i];
			if (fast === undefined) {
				leftToEngine++;
				return;
			}
			filled++;
			if (!outcome.ok || outcome.value !== fast) {
				throw new Error(`item ${i} ${JSON.stringify(item.json)}: fast ${JSON.stringify(fast)} vs engine ${JSON.stringify(outcome.ok ? outcome.value : String(outcome.error))}`);
			}
		});
		expect(filled).toBeGreaterThan(100);
		expect(leftToEngine).toBeGreaterThan(0);
	});

	test.each(['={{ $json.id.toUpperCase() }}-x', "=k-{{ $('Source').item.json.id }}", '=a{b}{{ $json.id }}', '=k-{{ $json.id', '=plain text', '={{ $json.id }}'])(
		'%s is not a template of plain paths (the engine, or the simple path, handles it)',
		(expression) => {
			expect(jsonPathTemplate(expression)).toBeNull();
		},
	);
});
