import type { IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

/**
 * Evaluating an expression costs n8n a fixed 0.1–0.6 ms per call, whatever the expression
 * (0.6 ms on its default `vm` engine), so an expression read per item is most of a node's time
 * on a large input. An expression that reads the item only through `$json` means the same thing
 * for item k as for item 0 with `$json` bound to item k's data: `$input.all()[k].json`, or
 * `$item(k).$json`, the data proxy n8n builds for item k. n8n's own engine can therefore evaluate
 * it for many items in one call. The engine still does all of the work (syntax, extensions,
 * sandbox); this module only decides when that is safe and unpacks the answers.
 */

/** Bare names an expression may use and still mean the same for every item. */
const ITEM_INDEPENDENT = new Set([
	'$json',
	'true',
	'false',
	'null',
	'undefined',
	'NaN',
	'Infinity',
	'typeof',
	'void',
	'in',
	'instanceof',
	'String',
	'Number',
	'Boolean',
	'Math',
	'JSON',
	'Array',
	'Object',
	'parseInt',
	'parseFloat',
	'isNaN',
	'isFinite',
	'encodeURIComponent',
	'decodeURIComponent',
	'encodeURI',
	'decodeURI',
]);

const IDENTIFIER = /[A-Za-z_$][A-Za-z0-9_$]*/y;
const NUMBER = /[0-9][A-Za-z0-9_.]*/y;
const PUNCTUATION = /[\s()[\]{}?:,.+\-*%!<>=&|^~]/;

/**
 * The expression inside `={{ … }}` when the whole parameter is that one expression and it reads
 * the item only through `$json`, else null. Deliberately narrow: any other bare name (`$input`,
 * `$('Node')`, `$itemIndex`, `this`, arrow parameters, object keys), template literals, regular
 * expressions, comments, assignments and spreads leave the expression to be evaluated per item.
 */
export function itemLocalExpression(raw: unknown): string | null {
	if (typeof raw !== 'string') return null;
	const m = /^=\{\{([\s\S]*)\}\}$/.exec(raw);
	if (!m || m[1].includes('{{') || m[1].includes('}}')) return null;
	const body = m[1];
	let reads$json = false;
	let i = 0;
	while (i < body.length) {
		const c = body[i];
		if (c === '"' || c === "'") {
			i = skipString(body, i);
			if (i < 0) return null;
			continue;
		}
		IDENTIFIER.lastIndex = i;
		const id = IDENTIFIER.exec(body);
		if (id) {
			const name = id[0];
			if (!isPropertyName(body, i)) {
				if (!ITEM_INDEPENDENT.has(name)) return null;
				if (name === '$json') reads$json = true;
			}
			i += name.length;
			continue;
		}
		NUMBER.lastIndex = i;
		const num = NUMBER.exec(body);
		if (num) {
			i += num[0].length;
			continue;
		}
		if (!PUNCTUATION.test(c)) return null; // `/`, backtick, `;`, `#`, `@`, backslash, non-ASCII
		if (c === '=') {
			const end = comparisonEnd(body, i);
			if (end < 0) return null;
			i = end;
			continue;
		}
		if ((c === '+' || c === '-') && body[i + 1] === c) return null;
		if (c === '.' && body.startsWith('...', i)) return null;
		i++;
	}
	return reads$json ? body : null;
}

function skipString(text: string, start: number): number {
	const quote = text[start];
	for (let i = start + 1; i < text.length; i++) {
		if (text[i] === '\\') i++;
		else if (text[i] === quote) return i + 1;
		else if (text[i] === '\n') return -1;
	}
	return -1;
}

/** After `.` or `?.`, a name is a property of the value before it, not a variable. */
function isPropertyName(text: string, at: number): boolean {
	let j = at - 1;
	while (j >= 0 && /\s/.test(text[j])) j--;
	return j >= 0 && text[j] === '.';
}

/**
 * Where the comparison operator around the `=` at `at` ends (`==`, `===`, `!=`, `!==`, `<=`, `>=`),
 * or -1 when that `=` assigns (`=`, `+=`, `>>=`, `??=` …) or starts an arrow function.
 */
function comparisonEnd(text: string, at: number): number {
	let end = at;
	while (text[end] === '=') end++;
	const run = end - at;
	const before = text[at - 1];
	const ok = run >= 2 ? run <= 3 && !'+-*%&|^<>?'.includes(before) : before === '!' || ((before === '<' || before === '>') && text[at - 2] !== before);
	return ok && text[end] !== '>' ? end : -1;
}

/** Items per engine call through `$item(k)`: well inside n8n's default 5 s expression timeout. */
export const CHUNK = 500;

/**
 * An input of at most this many items and this size as JSON goes to the engine whole
 * (`$input.all()`, one call). The `vm` engine copies it into its isolate, whose memory limit is
 * 128 MB by default and 8 MB at the least n8n accepts; running out would dispose the isolate for
 * the rest of the execution. 10,000 items of 0.97 MB ran at that 8 MB limit in n8n 2.40.7.
 * Larger inputs are read through `$item(k)`, which copies only the fields the expression touches
 * but costs n8n ~50 µs per item (it builds a whole data proxy for each).
 */
export const WHOLE_INPUT_ITEMS = 10_000;
export const WHOLE_INPUT_BYTES = 1 << 20;

/**
 * Reads expression `expression` (from itemLocalExpression) of parameter `name` for each of
 * `items`, in as few engine calls as is safe. Text and finite numbers come from the batched call;
 * an item whose value is anything else, or that failed, is evaluated on its own with
 * `getNodeParameter`, so its value or its error is exactly n8n's. After a call that could not be
 * evaluated, or whose answers were mostly of that kind, the rest is evaluated per item.
 */
export function batchedReader(
	ctx: IExecuteFunctions,
	name: string,
	expression: string,
	items: INodeExecutionData[],
	fallback?: unknown,
	wholeInputBytes = WHOLE_INPUT_BYTES,
): (itemIndex: number) => unknown {
	const count = items.length;
	const whole = count <= WHOLE_INPUT_ITEMS && fitsWithin(items, wholeInputBytes);
	const size = whole ? count : CHUNK;
	// `$itemIndex` is the chunk's first item here. The expression sits on lines of its own so that
	// nothing in it can swallow the wrapper.
	const bind = `(($json) => (\n${expression}\n))`;
	const call = (length: number) =>
		whole
			? `{{ $input.all().map((__item) => { try { return [${bind}(__item.json)]; } catch (__e) { return null; } }) }}`
			: `{{ Array.from({ length: ${length} }, (__, __k) => { try { return [${bind}($item($itemIndex + __k).$json)]; } catch (__e) { return null; } }) }}`;
	const chunks = new Map<number, unknown[] | null>();
	let batching = true;
	const perItem = (i: number) => ctx.getNodeParameter(name, i, fallback);
	const evaluate = (start: number): unknown[] | null => {
		const length = Math.min(size, count - start);
		try {
			const result = ctx.evaluateExpression(call(length), start);
			return Array.isArray(result) && result.length === length ? result : null;
		} catch {
			return null;
		}
	};
	return (i) => {
		const chunk = Math.floor(i / size);
		let values = chunks.get(chunk);
		if (values === undefined) {
			if (!batching) return perItem(i);
			values = evaluate(chunk * size);
			chunks.set(chunk, values);
			// An expression the engine cannot run in a batch will not run in the next chunk either;
			// one whose answers are mostly not text or numbers would pay twice for most items.
			if (values === null || values.filter(isAnswer).length < values.length / 2) batching = false;
		}
		const answer = values?.[i - chunk * size];
		return isAnswer(answer) ? answer[0] : perItem(i);
	};
}

/** An input's size as JSON, counted up to the limit asked for, once for all of a node's parameters. */
const measured = new WeakMap<INodeExecutionData[], { limit: number; fits: boolean }>();

/** Whether the items, as JSON, add up to at most `limit` characters (stops counting beyond it). */
function fitsWithin(items: INodeExecutionData[], limit: number): boolean {
	const known = measured.get(items);
	if (known?.limit === limit) return known.fits;
	let size = 0;
	let fits = true;
	try {
		for (const item of items) {
			size += JSON.stringify(item).length;
			if (size > limit) {
				fits = false;
				break;
			}
		}
	} catch {
		fits = false;
	}
	measured.set(items, { limit, fits });
	return fits;
}

/** `[text]` or `[finite number]`: a value the batch may answer for its item. */
function isAnswer(answer: unknown): answer is [string | number] {
	if (!Array.isArray(answer) || answer.length !== 1) return false;
	const value: unknown = answer[0];
	return typeof value === 'string' || (typeof value === 'number' && Number.isFinite(value));
}
