/**
 * The fence around n8n internals (lib/n8n/shortcutCheck.ts): a future n8n that changes what
 * `$input.all()`, `$item(k)`, `$getPairedItem` or `itemMatching` mean, or drops one, must not make
 * a node read the wrong keys. Each test changes one of them inside the real n8n-workflow the
 * engine runs (its WorkflowDataProxy), as such an n8n would, and expects every item to get what
 * n8n's own per-item evaluation gives it, one warning in n8n's log for the process, and a hint on
 * every execution that reads per item because of it.
 */
import type { IExecuteFunctions, INodeExecutionData, NodeExecutionHint } from 'n8n-workflow';

import { expressionSource } from '../../lib/n8n/keySource';
import { forgetShortcutChecks } from '../../lib/n8n/shortcutCheck';
import { expectWarnedOnce, withChangedN8n, type DataProxy } from '../support/changedN8n';
import { evaluateParameterForItems, type ParameterOutcome } from '../support/engine';

/** `proxy` with `name` answered by `value(the real one)` instead. */
const overriding = (proxy: DataProxy, name: string, value: (real: unknown) => unknown): DataProxy =>
	new Proxy(proxy, { get: (target, key, receiver) => (key === name ? value(Reflect.get(target, key, receiver)) : Reflect.get(target, key, receiver)) });

/** `proxy` without `name`, however an engine looks for it. */
const without = (proxy: DataProxy, name: string): DataProxy =>
	new Proxy(proxy, {
		get: (target, key, receiver) => (key === name ? undefined : Reflect.get(target, key, receiver)),
		has: (target, key) => key !== name && Reflect.has(target, key),
		getOwnPropertyDescriptor: (target, key) => (key === name ? undefined : Reflect.getOwnPropertyDescriptor(target, key)),
		ownKeys: (target) => Reflect.ownKeys(target).filter((key) => key !== name),
	});

const changes: Record<string, (proxy: DataProxy) => DataProxy> = {
	'$input.all() gives the items in another order': (proxy) =>
		overriding(proxy, '$input', (input) => new Proxy(input as object, {
			get: (target, key, receiver) => {
				const value = Reflect.get(target, key, receiver);
				return key === 'all' ? () => [...(value as () => unknown[])()].reverse() : value;
			},
		})),
	'$item is gone': (proxy) => without(proxy, '$item'),
	'$getPairedItem answers for the next item': (proxy) =>
		overriding(proxy, '$getPairedItem', (real) => (node: string, source: unknown, paired: { item: number }) =>
			(real as (...args: unknown[]) => unknown)(node, source, { ...paired, item: paired.item + 1 })),
	"$('Node').itemMatching answers for the next item": (proxy) =>
		overriding(proxy, '$', (real) => (node: string) => {
			const data = (real as (name: string) => DataProxy)(node);
			return overriding(data, 'itemMatching', (match) => (k: number) => (match as (k: number) => unknown)(k + 1));
		}),
};

const relay = (source: INodeExecutionData[]) => source.map((_, k) => ({ json: { n: k }, pairedItem: { item: k } }));
const small = Array.from({ length: 40 }, (_, i) => ({ json: { id: `evt_${i}` } }));
// More items than go to the engine whole, so they are read through $item(k).
const many = Array.from({ length: 10_001 }, (_, i) => ({ json: { id: `evt_${i}` } }));

interface Reading {
	kinds: string[];
	outcomes: ParameterOutcome[];
	warnings: string[];
	hints: NodeExecutionHint[];
}

/** Reads `expression` for each item through expressionSource, as the nodes do, `runs` times. */
async function read(expression: string, items: INodeExecutionData[], runs = 1): Promise<Reading[]> {
	const readings: Reading[] = [];
	for (let run = 0; run < runs; run++) {
		const reading: Reading = { kinds: [], outcomes: [], warnings: [], hints: [] };
		reading.outcomes = await evaluateParameterForItems({ key: expression }, items, 'key', {
			relay: expression.includes("$('Source')") ? relay : undefined,
			reader: (ctx) => {
				// n8n's logger is a read-only property of the context: the proxy stands on an empty target.
				const watched = new Proxy({}, {
					get(_, key) {
						if (key === 'logger') return { ...ctx.logger, warn: (message: string) => reading.warnings.push(message) };
						if (key === 'addExecutionHints') return (...hints: NodeExecutionHint[]) => reading.hints.push(...hints);
						const value = Reflect.get(ctx, key);
						return typeof value === 'function' ? value.bind(ctx) : value;
					},
				}) as IExecuteFunctions;
				const source = expressionSource(watched, 'key', expression);
				reading.kinds.push(source.kind);
				const input = ctx.getInputData();
				return (i) => source.read(i, input[i]);
			},
		});
		readings.push(reading);
	}
	return readings;
}

const values = (outcomes: ParameterOutcome[]) => outcomes.map((o) => (o.ok ? o.value : `error: ${o.error.message}`));

/**
 * The change; the expression and items that take the shortcut it breaks; what n8n's log then
 * says; and how the process reads instead: per item ('engine', with a hint on each execution), or,
 * for the whole input, in chunks of 500 through $item(k) (after that passes its own check).
 */
const cases: Array<[string, string, INodeExecutionData[], string, 'engine' | 'batched']> = [
	['$input.all() gives the items in another order', "={{ 'k-' + $json.id }}", small, 'evaluating an expression for the whole input at once', 'batched'],
	['$item is gone', "={{ 'k-' + $json.id }}", many, 'this n8n does not answer $item as it needs', 'engine'],
	['$getPairedItem answers for the next item', "={{ 'k-' + $('Source').item.json.id }}", small, "evaluating $('Node').item for 500 items at once", 'engine'],
	["$('Node').itemMatching answers for the next item", "={{ $('Source').item.json.id }}", small, "reading $('Node').item directly", 'engine'],
];

describe('a changed n8n internal turns its shortcut off, and every key is still n8n’s own', () => {
	beforeEach(forgetShortcutChecks);

	test.each(cases)('%s', async (change, expression, items, told, instead) => {
		const [expected] = await read(expression, items);
		expect(expected.kinds).not.toEqual(['engine']); // the shortcut is taken on an unchanged n8n

		const restore = withChangedN8n(changes[change]);
		try {
			forgetShortcutChecks(); // a new process on the changed n8n
			const [first, second] = await read(expression, items, 2);
			for (const reading of [first, second]) {
				expect(values(reading.outcomes)).toEqual(values(expected.outcomes));
				expect(reading.kinds).toEqual([instead]);
				if (instead === 'engine') {
					expect(reading.hints).toHaveLength(1);
					expect(reading.hints[0]).toMatchObject({ type: 'warning', message: expect.stringContaining('one item at a time') });
				} else {
					expect(reading.hints).toEqual([]); // as fast as before, near enough: nothing to act on
				}
			}
			// Said once in n8n's log for the process, naming what went wrong.
			expectWarnedOnce(first.warnings, told);
			expect(second.warnings).toEqual([]);
		} finally {
			restore();
		}
	});

	test('a changed internal turns off only the shortcut that uses it', async () => {
		const restore = withChangedN8n(changes['$getPairedItem answers for the next item']);
		try {
			const [paired] = await read("={{ 'k-' + $('Source').item.json.id }}", small);
			expect(paired.kinds).toEqual(['engine']);
			const [whole] = await read("={{ 'k-' + $json.id }}", small);
			expect(whole.kinds).toEqual(['batched']);
			expect(whole.hints).toEqual([]);
		} finally {
			restore();
		}
	});

	test('an unchanged n8n passes every check and says nothing', async () => {
		for (const [, expression, items] of cases) {
			const [reading] = await read(expression, items);
			expect(reading.kinds).not.toEqual(['engine']);
			expect(reading.warnings).toEqual([]);
			expect(reading.hints).toEqual([]);
		}
	});

	test('an expression that reads the clock to the millisecond cannot decide the check: it is read per item, and the shortcut stays unjudged', async () => {
		const clock = "={{ $json.id + '@' + $now.toMillis() + Math.random() }}";
		const [reading] = await read(clock, small);
		expect(reading.kinds).toEqual(['engine']);
		expect(reading.warnings).toEqual([]);
		expect(reading.hints).toEqual([]);
		const [after] = await read("={{ 'k-' + $json.id }}", small);
		expect(after.kinds).toEqual(['batched']);
	});
});
