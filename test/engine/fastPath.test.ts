/**
 * The fast path reads `={{ $json.a.b }}` straight from the item. It must give exactly what n8n's
 * expression engine gives, on a property-based set of payloads: the same key, or an error on both.
 */
import type { IDataObject, IExecuteFunctions, INodeExecutionData, IWorkflowSettings } from 'n8n-workflow';

import { batchedReader, CHUNK, itemLocalExpression, WHOLE_INPUT_BYTES, WHOLE_INPUT_ITEMS } from '../../lib/n8n/batchedExpression';
import { expressionSource, fillTemplate, pathTemplate, plainPath, readPath, toKeyText, type ValueSource } from '../../lib/n8n/keySource';
import { evaluateParameterForItems, settleShortcutChecks, type ParameterOutcome } from '../support/engine';
import { random } from '../support/random';

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

// Tests below count engine calls: let the process check its shortcuts first, as any process does once.
beforeAll(settleShortcutChecks, 60_000);

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

/**
 * A Probe reader that reads `expression` as the nodes do, through expressionSource, from the
 * Probe's context as `wrap` returns it; `seen` gets the source.
 */
const throughSource =
	(expression: string, wrap: (ctx: IExecuteFunctions) => IExecuteFunctions = (ctx) => ctx, seen: (source: ValueSource) => void = () => undefined) =>
	(ctx: IExecuteFunctions) => {
		const source = expressionSource(wrap(ctx), 'key', expression);
		seen(source);
		const input = ctx.getInputData();
		return (i: number) => source.read(i, input[i]);
	};

describe('fast path vs the expression engine', () => {
	const rnd = random(20261122);
	const items: INodeExecutionData[] = Array.from({ length: 300 }, () => ({ json: payload(rnd) }));

	test.each(expressions)('%s gives the same key or the same failure on 300 random payloads', async (expression) => {
		const plain = plainPath(expression);
		expect(plain?.node).toBeNull();
		const path = plain?.path;
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
		const parts = pathTemplate(expression);
		expect(parts).not.toBeNull();
		const engine = await evaluateParameterForItems({ key: expression }, items, 'key');
		let filled = 0;
		let leftToEngine = 0;
		items.forEach((item, i) => {
			const fast = fillTemplate(parts!, () => item.json);
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

	test.each(['={{ $json.id.toUpperCase() }}-x', "=k-{{ $('Source').item.json.id + 1 }}", '=a{b}{{ $json.id }}', '=k-{{ $json.id', '=plain text', '={{ $json.id }}'])(
		'%s is not a template of plain paths (the engine, or the simple path, handles it)',
		(expression) => {
			expect(pathTemplate(expression)).toBeNull();
		},
	);
});

/**
 * `$('Node').item.json.a.b`, the form n8n's editor writes when a field of an earlier node is dragged
 * in, is read from the paired item that n8n's own `$('Node').itemMatching` finds, looked up once
 * per execution. Relay (between Source and the reader) shuffles the items and re-pairs them, so
 * the paired item is not `$json`; some of its items point past Source's items, and n8n's own
 * error must reach those.
 */
describe('plain paths of a paired item vs the expression engine', () => {
	const rnd = random(20261126);
	const items: INodeExecutionData[] = Array.from({ length: 300 }, () => ({ json: payload(rnd) }));
	const order = items.map((_, i) => i).sort(() => rnd() - 0.5);
	const relay = (source: INodeExecutionData[]) =>
		order.map((from, k) => ({ json: { n: k, id: `relay-${k}` }, pairedItem: { item: k % 29 === 0 ? source.length + k : from } }));

	test.each([
		"={{ $('Source').item.json.id }}",
		'={{ $("Source").item.json["order id"] }}',
		"={{ $('Source').item.json.data.object.id }}",
		"={{ $('Relay').item.json.id }}",
		"=k-{{ $('Source').item.json.id }}/{{ $json.n }}",
		"={{ $('Source').item.json.items[0].id }}-{{ $('Source').item.json['order id'] }}",
	])('%s gives the same key or the same failure as n8n on 300 shuffled items', async (expression) => {
		const engine = await evaluateParameterForItems({ key: expression }, items, 'key', { relay });
		const calls = { getNodeParameter: 0, getWorkflowDataProxy: 0 };
		let kind = '';
		const fast = await evaluateParameterForItems({ key: expression }, items, 'key', {
			relay,
			reader: throughSource(expression, (ctx) => countingCalls(ctx, calls), (source) => (kind = source.kind)),
		});
		expect(kind).toBe('fast');
		let [keys, failures, refused] = [0, 0, 0];
		engine.forEach((outcome, i) => {
			const slow = outcome.ok ? keyOf(outcome.value) : { ok: false as const };
			const quick = fast[i].ok ? keyOf((fast[i] as { value: unknown }).value) : { ok: false as const };
			if (slow.ok !== quick.ok || (slow.ok && quick.ok && slow.key !== quick.key)) {
				throw new Error(`item ${i}: engine ${JSON.stringify(outcome.ok ? outcome.value : String(outcome.error))} vs fast ${JSON.stringify(fast[i].ok ? (fast[i] as { value: unknown }).value : String((fast[i] as { error: Error }).error))}`);
			}
			// Where n8n refuses the pairing, the item gets n8n's own error.
			if (!outcome.ok && !fast[i].ok) {
				expect((fast[i] as { error: Error }).error.message).toBe(outcome.error.message);
				refused++;
			}
			if (slow.ok) keys++;
			else failures++;
		});
		expect(keys).toBeGreaterThan(100);
		// One lookup of the pairing for the execution; only the items n8n refuses go to the engine,
		// and in a template those with an object or a list in it (the engine prints those).
		expect(calls.getWorkflowDataProxy).toBe(1);
		if (plainPath(expression)) expect(calls.getNodeParameter).toBe(refused);
		else expect(calls.getNodeParameter).toBeGreaterThanOrEqual(refused);
		expect(calls.getNodeParameter).toBeLessThan(items.length / 2);
		if (!expression.includes('Relay')) expect(refused).toBe(Math.ceil(items.length / 29));
		expect(failures).toBeGreaterThanOrEqual(refused);
	});

	test('with binary data kept in the item (binaryMode "combined"), $(Node).item.id reads the item’s JSON, as n8n does', async () => {
		const expression = "={{ $('Source').item.id }}";
		const settings = { binaryMode: 'combined' as const };
		const engine = await evaluateParameterForItems({ key: expression }, items, 'key', { relay, settings });
		const fast = await evaluateParameterForItems({ key: expression }, items, 'key', {
			relay,
			settings,
			reader: throughSource(expression, undefined, (source) => expect(source.kind).toBe('fast')),
		});
		const show = (o: ParameterOutcome) => (o.ok ? JSON.stringify(o.value) : `error ${o.error.message}`);
		expect(fast.map(show)).toEqual(engine.map(show));
		expect(engine.filter((o) => o.ok && o.value !== undefined).length).toBeGreaterThan(100);
	});

	test('a node the reader is not connected to: every item gets n8n’s own error', async () => {
		const expression = "={{ $('Nowhere').item.json.id }}";
		const sample = items.slice(0, 5);
		const engine = await evaluateParameterForItems({ key: expression }, sample, 'key');
		const fast = await evaluateParameterForItems({ key: expression }, sample, 'key', {
			reader: throughSource(expression),
		});
		expect(engine.every((o) => !o.ok)).toBe(true);
		expect(fast.map((o) => (o.ok ? o.value : o.error.message))).toEqual(engine.map((o) => (o.ok ? o.value : o.error.message)));
	});
});

/**
 * Expressions that read the item only through `$json` are evaluated by n8n's engine for a chunk of
 * items per call. Each item must get exactly what a per-item getNodeParameter gives: the same
 * value, or the same error.
 */
const itemLocal = [
	"={{ 'k-' + $json.id }}",
	'={{ $json.id.toString() }}',
	'={{ $json["order id"] ?? $json.id }}',
	"={{ $json.data.object.id + '/' + $json.items[0].id }}",
	'={{ String($json.id).toUpperCase().trim() }}',
	"={{ String($json.id).hash('sha256') }}",
	'={{ Number($json.id) + 1 }}',
	"={{ $json.id === null ? 'none' : $json.items }}",
	"={{ $json.id + '#' + $itemIndex }}",
	"={{ String($json.id).replace(/[^a-z0-9]+/gi, '').toLowerCase() / 1 || $json.id }}",
	// The year of the evaluation: the same for every item, batched or not (a test run does not straddle New Year).
	"={{ $json.id + '@' + $now.toFormat('yyyy') + $today.toFormat('yyyy') }}",
];

/** `ctx`, counting the calls of the methods named in `counts`. */
function countingCalls(ctx: IExecuteFunctions, counts: Record<string, number>): IExecuteFunctions {
	return new Proxy(ctx, {
		get(target, property) {
			const value = Reflect.get(target, property);
			if (typeof value !== 'function') return value;
			return (...args: unknown[]) => {
				if (typeof property === 'string' && property in counts) counts[property]++;
				return value.apply(target, args);
			};
		},
	});
}

/**
 * Reads `expression` for every item both per item (getNodeParameter) and through batchedReader,
 * and expects each item to get the same value or the same error, in one engine call per `size`
 * items, with only the items the batch could not answer evaluated again on their own.
 */
async function expectBatchedAsPerItem(
	expression: string,
	items: INodeExecutionData[],
	{
		size,
		wholeInputBytes = WHOLE_INPUT_BYTES,
		relay,
		sourceName,
		settings,
	}: { size: number; wholeInputBytes?: number; relay?: (items: INodeExecutionData[]) => INodeExecutionData[]; sourceName?: string; settings?: IWorkflowSettings },
) {
	expect(itemLocalExpression(expression)).not.toBeNull();
	const perItem = await evaluateParameterForItems({ key: expression }, items, 'key', { relay, sourceName, settings });
	const calls = { evaluateExpression: 0, getNodeParameter: 0 };
	let kind = '';
	const batched = await evaluateParameterForItems({ key: expression }, items, 'key', {
		relay,
		sourceName,
		settings,
		reader: (ctx) => {
			kind = expressionSource(ctx, 'key', expression).kind;
			const counting = countingCalls(ctx, calls);
			return batchedReader(counting, 'key', itemLocalExpression(expression)!, ctx.getInputData(), undefined, wholeInputBytes);
		},
	});
	expect(kind).toBe('batched');
	expect(batched).toHaveLength(perItem.length);
	let values = 0;
	const answered: boolean[] = [];
	perItem.forEach((a, i) => {
		const b = batched[i];
		const show = (o: ParameterOutcome) => (o.ok ? JSON.stringify(o.value) : `error ${o.error.message}`);
		if (a.ok !== b.ok || (a.ok && b.ok && JSON.stringify(a.value) !== JSON.stringify(b.value)) || (!a.ok && !b.ok && a.error.message !== b.error.message)) {
			throw new Error(`item ${i}: per item ${show(a)}, batched ${show(b)}`);
		}
		if (a.ok) values++;
		answered.push(a.ok && (typeof a.value === 'string' || (typeof a.value === 'number' && Number.isFinite(a.value))));
	});
	expect(values).toBeGreaterThan(100);
	// One engine call per chunk (or for all); only items whose answer is not text or a number, or that
	// failed, are evaluated again on their own, so that their value or error is n8n's. After a
	// chunk where those are the majority, the rest goes per item.
	let [expectedEngineCalls, expectedItemCalls] = [0, 0];
	for (let start = 0; start < answered.length; start += size) {
		const chunk = answered.slice(start, start + size);
		const misses = chunk.filter((ok) => !ok).length;
		expectedEngineCalls++;
		expectedItemCalls += misses;
		if (misses > chunk.length / 2) {
			expectedItemCalls += answered.length - start - chunk.length;
			break;
		}
	}
	expect(calls.evaluateExpression).toBe(expectedEngineCalls);
	expect(calls.getNodeParameter).toBe(expectedItemCalls);
	// The batch answered a real share of the items on its own.
	expect(answered.length - calls.getNodeParameter).toBeGreaterThan(50);
}

describe('item-local expressions evaluated in batches vs per item', () => {
	const rnd = random(20261124);
	// More than two chunks, so that chunk boundaries are crossed.
	const items: INodeExecutionData[] = Array.from({ length: 2 * CHUNK + 100 }, () => ({ json: payload(rnd) }));

	// Whole: the input is small, so it goes to the engine in one call ($input.all()). Chunked: as
	// for an input over WHOLE_INPUT_BYTES, 500 items per call through $item(k).
	const modes: Array<[string, number, number]> = [
		['whole input', WHOLE_INPUT_BYTES, items.length],
		['chunks of 500', 0, CHUNK],
	];
	const cases = modes.flatMap(([mode, bytes, size]) => itemLocal.map((expression) => [expression, mode, bytes, size] as const));

	test.each(cases)('%s, %s: each item gets what getNodeParameter gives it', async (expression, _mode, wholeInputBytes, size) => {
		await expectBatchedAsPerItem(expression, items, { wholeInputBytes, size });
	});

	test('the input goes to the engine whole while it is small (items and JSON), else in chunks of 500', async () => {
		const padded = items.map((item) => ({ json: { ...item.json, pad: 'x'.repeat(1_000) } }));
		const many = Array.from({ length: WHOLE_INPUT_ITEMS + 1 }, (_, i) => ({ json: { id: i } }));
		for (const [input, calls] of [
			[items, 1],
			[padded, Math.ceil(padded.length / CHUNK)],
			[many, Math.ceil(many.length / CHUNK)],
		] as const) {
			const counted = { evaluateExpression: 0 };
			await evaluateParameterForItems({ key: "={{ 'k-' + $json.id }}" }, [...input], 'key', {
				reader: throughSource("={{ 'k-' + $json.id }}", (ctx) => countingCalls(ctx, counted)),
			});
			expect(counted.evaluateExpression).toBe(calls);
		}
		expect(JSON.stringify(items).length).toBeLessThan(WHOLE_INPUT_BYTES);
		expect(JSON.stringify(padded).length).toBeGreaterThan(WHOLE_INPUT_BYTES);
		expect(JSON.stringify(many).length).toBeLessThan(WHOLE_INPUT_BYTES);
	});

	test('an expression the engine cannot run in a batch is evaluated per item, with n8n’s own errors', async () => {
		const expression = '={{ $json.id ) }}';
		expect(itemLocalExpression(expression)).not.toBeNull();
		const sample = items.slice(0, 5);
		const perItem = await evaluateParameterForItems({ key: expression }, sample, 'key');
		const batched = await evaluateParameterForItems({ key: expression }, sample, 'key', {
			reader: throughSource(expression),
		});
		expect(batched.map((o) => (o.ok ? o.value : o.error.message))).toEqual(perItem.map((o) => (o.ok ? o.value : o.error.message)));
	});
});

/**
 * `$('Node').item` is the item of an earlier node paired with the item being read: the batch asks
 * n8n's `$getPairedItem` with item k's pairing, after n8n's own checks made once. Between Source and the reader sits Relay, which
 * shuffles the items and sets their pairing, so `$('Source').item` is a different item from
 * `$json`; some of Relay's items point past Source's items, so their lookup fails.
 */
describe('expressions that read $(Node).item, evaluated in batches vs per item', () => {
	const rnd = random(20261125);
	const items: INodeExecutionData[] = Array.from({ length: 2 * CHUNK + 100 }, () => ({ json: payload(rnd) }));
	const order = items.map((_, i) => i).sort(() => rnd() - 0.5);
	const relay = (source: INodeExecutionData[]) =>
		order.map((from, k) => ({ json: { n: k, tag: k % 7 === 0 ? null : `t${k % 5}` }, pairedItem: { item: k % 97 === 0 ? source.length + k : from } }));

	test.each([
		"={{ $('Source').item.json.id ?? 'none' }}",
		"={{ 'k-' + $('Source').item.json.id + '-' + $json.n }}",
		"={{ $('Source').item.json.id + '#' + $itemIndex }}",
		"={{ $('Source').item.json.data.object.id.toString() }}",
		"={{ $('Source').item.json[\"order id\"] ?? $('Relay').item.json.tag }}",
		"={{ $json.tag ? $json.tag + $( \"Source\" ).item.json.id : $('Relay').item.json.n }}",
	])('%s: each item gets what getNodeParameter gives it, in calls of 500', async (expression) => {
		await expectBatchedAsPerItem(expression, items, { size: CHUNK, relay });
	});

	test('with binary data kept in the item (binaryMode "combined"), $(Node).item is the item’s JSON, batched as per item', async () => {
		await expectBatchedAsPerItem("={{ 'k-' + $('Source').item.id }}", items, { size: CHUNK, relay, settings: { binaryMode: 'combined' } });
	});

	test('an input whose items are not paired with their own index (not what n8n gives) is evaluated per item', async () => {
		const expression = "={{ 'k-' + $('Source').item.json.id }}";
		const sample = items.slice(0, 20);
		const calls = { evaluateExpression: 0, getNodeParameter: 0 };
		const perItem = await evaluateParameterForItems({ key: expression }, sample, 'key', { relay: (s) => s });
		const read = await evaluateParameterForItems({ key: expression }, sample, 'key', {
			relay: (s) => s,
			reader: (ctx) => {
				const input = ctx.getInputData().map((item, k) => ({ ...item, pairedItem: { item: k, input: 1 } }));
				return batchedReader(countingCalls(ctx, calls), 'key', itemLocalExpression(expression)!, input);
			},
		});
		const show = (o: ParameterOutcome) => (o.ok ? JSON.stringify(o.value) : `error ${o.error.message}`);
		expect(read.map(show)).toEqual(perItem.map(show));
		expect(calls).toEqual({ evaluateExpression: 0, getNodeParameter: sample.length });
	});

	test('a node name with quotes and braces in it reaches n8n as it is', async () => {
		await expectBatchedAsPerItem(`={{ 'k-' + $("Shop {EU} 'A'").item.json.id }}`, items, { size: CHUNK, relay, sourceName: "Shop {EU} 'A'" });
	});

	test('a node the reader is not connected to: no batch, every item gets n8n’s own error', async () => {
		const expression = "={{ 'k-' + $('Nowhere').item.json.id }}";
		const sample = items.slice(0, 5);
		const calls = { evaluateExpression: 0, getNodeParameter: 0 };
		const perItem = await evaluateParameterForItems({ key: expression }, sample, 'key', { relay: (s) => s });
		const batched = await evaluateParameterForItems({ key: expression }, sample, 'key', {
			relay: (s) => s,
			reader: (ctx) => batchedReader(countingCalls(ctx, calls), 'key', itemLocalExpression(expression)!, ctx.getInputData()),
		});
		expect(perItem.every((o) => !o.ok)).toBe(true);
		expect(batched.map((o) => (o.ok ? o.value : o.error.message))).toEqual(perItem.map((o) => (o.ok ? o.value : o.error.message)));
		expect(calls).toEqual({ evaluateExpression: 0, getNodeParameter: sample.length });
	});
});
