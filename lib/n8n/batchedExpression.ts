import type { IExecuteFunctions, INodeExecutionData, IWorkflowDataProxyData } from 'n8n-workflow';

/**
 * Evaluating an expression costs n8n a fixed 0.1–0.6 ms per call, whatever the expression
 * (0.6 ms on its default `vm` engine), so an expression read per item is most of a node's time
 * on a large input. An expression that reads the item only through `$json` means the same thing
 * for item k as for item 0 with `$json` bound to item k's data: `$input.all()[k].json`, or
 * `$item(k).$json`, the data proxy n8n builds for item k. Likewise `$('Node').item` means, for
 * item k, the Node item that n8n's `$getPairedItem` finds from item k's pairing. n8n's own engine
 * can therefore evaluate such an expression for many items in one call. The engine still does all
 * of the work (syntax, extensions, sandbox); this module only decides when that is safe and
 * unpacks the answers.
 */

/**
 * Bare names an expression may use and still mean the same for every item. `$now` and `$today`
 * are the time of the evaluation: one call's items share it, as items evaluated within the same
 * millisecond do.
 */
const ITEM_INDEPENDENT = new Set([
	'$json',
	'$now',
	'$today',
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
 * An expression n8n may evaluate for many items per call: `body` is its text with each
 * `$('Node').item` written as `__pairedN(__at)`, where N is the node's place in `nodes` (names),
 * and each `$itemIndex` as `__at`, the item's index; batchedReader defines `__pairedN`.
 */
export interface ItemLocalExpression {
	body: string;
	nodes: string[];
	readsJson: boolean;
}

/**
 * `$('Node').item` (or with double quotes; no backslash in the name): the node's name is group 1
 * or 2. Also read by keySource's plain paths.
 */
export const PAIRED_ITEM_SOURCE = String.raw`\$\s*\(\s*(?:'([^'\\\n]*)'|"([^"\\\n]*)")\s*\)\s*\.\s*item`;
/** PAIRED_ITEM_SOURCE, not followed by more of a name such as `itemMatching`. */
const PAIRED_ITEM = new RegExp(`${PAIRED_ITEM_SOURCE}(?![A-Za-z0-9_$])`, 'y');

/**
 * The expression inside `={{ … }}` when the whole parameter is that one expression and it reads
 * the item only through `$json`, `$('Node').item` and `$itemIndex`, else null. Deliberately narrow:
 * any other bare name (`$input`, `$runIndex`, `$vars`, `this`, arrow parameters, object keys), any
 * other use of `$('Node')`, template literals, comments, assignments and spreads leave the
 * expression to be evaluated per item.
 */
export function itemLocalExpression(raw: unknown): ItemLocalExpression | null {
	if (typeof raw !== 'string') return null;
	const m = /^=\{\{([\s\S]*)\}\}$/.exec(raw);
	if (!m || m[1].includes('{{') || m[1].includes('}}')) return null;
	const text = m[1];
	let body = '';
	let copied = 0;
	const nodes: string[] = [];
	let readsJson = false;
	let readsIndex = false;
	let i = 0;
	while (i < text.length) {
		const c = text[i];
		if (c === '"' || c === "'") {
			i = skipString(text, i);
			if (i < 0) return null;
			continue;
		}
		IDENTIFIER.lastIndex = i;
		const id = IDENTIFIER.exec(text);
		if (id) {
			const name = id[0];
			if (!isPropertyName(text, i)) {
				if (name === '$') {
					PAIRED_ITEM.lastIndex = i;
					const paired = PAIRED_ITEM.exec(text);
					if (!paired) return null;
					const node = paired[1] ?? paired[2];
					let n = nodes.indexOf(node);
					if (n < 0) n = nodes.push(node) - 1;
					body += `${text.slice(copied, i)}__paired${n}(__at)`;
					i = copied = i + paired[0].length;
					continue;
				}
				if (name === '$itemIndex') {
					body += `${text.slice(copied, i)}__at`;
					i = copied = i + name.length;
					readsIndex = true;
					continue;
				}
				if (!ITEM_INDEPENDENT.has(name)) return null;
				if (name === '$json') readsJson = true;
			}
			i += name.length;
			continue;
		}
		NUMBER.lastIndex = i;
		const num = NUMBER.exec(text);
		if (num) {
			i += num[0].length;
			continue;
		}
		if (c === '/') {
			// A comment, or `/=`, is refused; after a value `/` divides, elsewhere it starts a regular expression.
			if (text[i + 1] === '/' || text[i + 1] === '*') return null;
			if (followsValue(text, i)) {
				if (text[i + 1] === '=') return null;
				i++;
			} else {
				i = skipRegularExpression(text, i);
				if (i < 0) return null;
			}
			continue;
		}
		if (!PUNCTUATION.test(c)) return null; // backtick, `;`, `#`, `@`, backslash, non-ASCII
		if (c === '=') {
			const end = comparisonEnd(text, i);
			if (end < 0) return null;
			i = end;
			continue;
		}
		if ((c === '+' || c === '-') && text[i + 1] === c) return null;
		if (c === '.' && text.startsWith('...', i)) return null;
		i++;
	}
	return readsJson || readsIndex || nodes.length > 0 ? { body: body + text.slice(copied), nodes, readsJson } : null;
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

/**
 * Whether the `/` at `at` follows a value (a name, a number, a text, `)`, `]` or `}`), so that it
 * divides. A name that is a keyword (`typeof /x/`) counts as a value too: the regular expression is
 * then read as names to check, which refuses it or leaves it harmless.
 */
function followsValue(text: string, at: number): boolean {
	let j = at - 1;
	while (j >= 0 && /\s/.test(text[j])) j--;
	return j >= 0 && /[A-Za-z0-9_$)\]}'"]/.test(text[j]);
}

/** Where the regular expression literal starting at `start` ends, flags included, or -1. */
function skipRegularExpression(text: string, start: number): number {
	let inClass = false;
	for (let i = start + 1; i < text.length; i++) {
		const c = text[i];
		if (c === '\n') return -1;
		if (c === '\\') i++;
		else if (c === '[') inClass = true;
		else if (c === ']') inClass = false;
		else if (c === '/' && !inClass) {
			i++;
			while (i < text.length && /[a-z]/.test(text[i])) i++;
			return i;
		}
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

/** Items per engine call through `$item(k)` or `$getPairedItem`: well inside n8n's default 5 s expression timeout. */
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
 * Reads `expression` (from itemLocalExpression) of parameter `name` for each of `items`, in as
 * few engine calls as is safe. Text and finite numbers come from the batched call; an item whose
 * value is anything else, or that failed, is evaluated on its own with `getNodeParameter`, so its
 * value or its error is exactly n8n's. After a call that could not be evaluated, or whose answers
 * were mostly of that kind, the rest is evaluated per item.
 */
export function batchedReader(
	ctx: IExecuteFunctions,
	name: string,
	expression: ItemLocalExpression,
	items: INodeExecutionData[],
	fallback?: unknown,
	wholeInputBytes = WHOLE_INPUT_BYTES,
): (itemIndex: number) => unknown {
	const count = items.length;
	const perItem = (i: number) => ctx.getNodeParameter(name, i, fallback);
	const pairing = expression.nodes.length > 0 ? pairingFor(ctx, expression.nodes, items) : undefined;
	if (pairing === null) return perItem;
	const whole = batchMode(expression, items, wholeInputBytes) === 'whole input';
	const size = whole ? count : CHUNK;
	// The expression sits on lines of its own so that nothing in it can swallow the wrapper.
	// `$itemIndex` is the chunk's first item.
	const at = whole ? '__k' : '$itemIndex + __k';
	const json = !expression.readsJson ? 'undefined' : whole ? '__items[__k].json' : `$item(${at}).$json`;
	const bind = `(($json, __at) => (\n${expression.body}\n))`;
	const call = (length: number) =>
		`{{ (() => { ${whole ? 'const __items = $input.all();' : ''} ${pairing ?? ''} return Array.from({ length: ${length} }, (__, __k) => { try { return [${bind}(${json}, ${at})]; } catch (__e) { return null; } }); })() }}`;
	const chunks = new Map<number, unknown[] | null>();
	let batching = true;
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

/**
 * Which n8n internals a batch of `expression` over `items` leans on: the whole input
 * (`$input.all()`), chunks through `$item(k)`, or chunks through `$item(k)` and `$getPairedItem`.
 */
export type BatchMode = 'whole input' | 'chunks' | 'paired items';

export function batchMode(expression: ItemLocalExpression, items: INodeExecutionData[], wholeInputBytes = WHOLE_INPUT_BYTES): BatchMode {
	if (expression.nodes.length > 0) return 'paired items';
	return items.length <= WHOLE_INPUT_ITEMS && fitsWithin(items, wholeInputBytes) ? 'whole input' : 'chunks';
}

/**
 * How a batch finds `$('Node').item` for item k: the definitions of `__pairedN`, or null when the
 * expression must go per item. `.item` first checks that the node is connected and has run, which
 * does not depend on the item, then resolves the item's pairing with
 * `$getPairedItem(node, source, pairedItem)`. Asking for `.item` or `.itemMatching(k)` inside the
 * batch would repeat the checks for every item, and n8n's check works out the reading node's
 * outputs with a whole expression evaluation each time when they depend on its settings (Dedupe
 * Gate's and Prompt Cache's do). So the checks are made once, here, through n8n's own
 * `$('Node').itemMatching` lookup, and the batch calls `$getPairedItem` directly.
 *
 * n8n gives each input item the pairing `{ item: <its own index> }` on the node's first input;
 * the batch relies on that, so the code it sends is the same for every input (n8n rewrites an
 * expression's code once per distinct text). Any other pairing (another input, a source
 * overwrite) leaves the expression per item.
 */
function pairingFor(ctx: IExecuteFunctions, nodes: string[], items: INodeExecutionData[]): string | null {
	try {
		if (!items.every((item, k) => pairedWithOwnIndex(item.pairedItem, k))) return null;
		const source = ctx.getExecuteData().source?.main?.[0];
		if (!source) return null;
		const proxy = ctx.getWorkflowDataProxy(0);
		for (const node of nodes) itemMatching(proxy, node);
		// `.item` gives the item's JSON alone when binary data is kept with it (binaryMode "combined").
		const tail = ctx.getWorkflowSettings().binaryMode === 'combined' ? '.json' : '';
		// Only the fields n8n's resolver reads: its `vm` bridge accepts no others.
		const record = { previousNode: source.previousNode, previousNodeOutput: source.previousNodeOutput, previousNodeRun: source.previousNodeRun };
		return [
			`const __source = JSON.parse(${textLiteral(JSON.stringify(record))});`,
			...nodes.map((node, n) => `const __paired${n} = (__i) => $getPairedItem(${textLiteral(node)}, __source, { item: __i })${tail};`),
		].join(' ');
	} catch {
		return null;
	}
}

/**
 * n8n's `$('Node').itemMatching` for `node`: item k → the Node item paired with input item k, the
 * function n8n answers `.item` with. Throws where n8n refuses: the node is not connected, or has not
 * run. Each lookup costs n8n a whole expression evaluation for a node whose outputs depend on its
 * settings, so callers look it up once per execution.
 */
export function itemMatching(proxy: IWorkflowDataProxyData, node: string): (itemIndex: number) => unknown {
	const match = (proxy.$(node) as { itemMatching?: unknown }).itemMatching;
	if (typeof match !== 'function') throw new Error(`n8n has no itemMatching for ${node}`);
	return match as (itemIndex: number) => unknown;
}

function pairedWithOwnIndex(paired: INodeExecutionData['pairedItem'], k: number): boolean {
	if (typeof paired === 'number') return paired === k;
	return !!paired && !Array.isArray(paired) && paired.item === k && !paired.input && !paired.sourceOverwrite;
}

/** `text` as a JavaScript text literal with no brace in it, so that it cannot end the `{{ }}` around it. */
function textLiteral(text: string): string {
	return JSON.stringify(text).replace(/[{}]/g, (c) => (c === '{' ? '\\u007b' : '\\u007d'));
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
