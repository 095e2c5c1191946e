import type { IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

import { LedgerInputError } from '../ledger/errors';
import { batchedReader, batchMode, itemLocalExpression, itemMatching, PAIRED_ITEM_SOURCE, WHOLE_INPUT_BYTES } from './batchedExpression';
import { checkedShortcut, judged, type Shortcut } from './shortcutCheck';

/**
 * Reading per-item values without paying for n8n's expression engine where it is not needed.
 * Evaluating one expression per item costs 0.2–0.7 ms in n8n, far more than a batched ledger
 * claim, so a field path, a plain `={{ $json.a.b }}` or `={{ $('Node').item.json.a }}`, or text
 * built only from such paths (`=order-{{ $json.id }}`) is read straight from the item, or from the
 * item n8n pairs with it.
 */

export type PathSegment = string | number;

const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*/;

/**
 * Parses `data.object.id`, `items[0].id`, `["order id"]`, `a['odd.name'].b`.
 * Returns null for anything else.
 */
export function parsePath(text: string): PathSegment[] | null {
	const segments: PathSegment[] = [];
	let rest = text.trim();
	let first = true;
	while (rest.length > 0) {
		if (rest.startsWith('[')) {
			const m = /^\[\s*(?:(\d+)|"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)')\s*\]/.exec(rest);
			if (!m) return null;
			segments.push(m[1] !== undefined ? Number(m[1]) : unescape(m[2] ?? m[3]));
			rest = rest.slice(m[0].length);
		} else {
			if (!first) {
				if (!rest.startsWith('.')) return null;
				rest = rest.slice(1);
			}
			const m = IDENT.exec(rest);
			if (!m) return null;
			segments.push(m[0]);
			rest = rest.slice(m[0].length);
		}
		first = false;
	}
	return segments.length > 0 ? segments : null;
}

const unescape = (s: string) => s.replace(/\\(.)/g, '$1');

/** A field path typed by a person: also accepts a leading `$json.` or `json.`. */
export function parseFieldPath(text: unknown, what: string): PathSegment[] {
	const raw = typeof text === 'string' ? text.trim().replace(/^\$?json(?=[.[])\.?/, '') : '';
	const path = raw ? parsePath(raw) : null;
	if (!path) {
		throw new LedgerInputError(
			`The ${what} ${JSON.stringify(text ?? '')} is not a field name`,
			'Use a field name such as "id", a dotted path such as "data.object.id", or brackets for odd names: ["order id"].',
		);
	}
	return path;
}

/**
 * A plain path an expression reads: from the item's own data (`$json.a.b`, node null), or from the
 * item of an earlier node paired with it (`$('Node').item.json.a.b`: node 'Node', path
 * ['json', 'a', 'b']), the form n8n's editor writes when a field of an earlier node is dragged in.
 */
export interface PlainPath {
	node: string | null;
	path: PathSegment[];
}

const PLAIN_PATH = new RegExp(String.raw`^\s*(\$json|${PAIRED_ITEM_SOURCE})((?:\s*(?:\.[A-Za-z_$][A-Za-z0-9_$]*|\[[^\]]*\]))+)\s*$`);

/** The path of an expression that is exactly `={{ $json.a.b }}` or `={{ $('Node').item.json.a }}` (or with brackets), else null. */
export function plainPath(raw: unknown): PlainPath | null {
	if (typeof raw !== 'string') return null;
	const m = /^=\{\{([\s\S]*)\}\}$/.exec(raw);
	return m && !m[1].includes('}}') ? plainPathInside(m[1]) : null;
}

function plainPathInside(expression: string): PlainPath | null {
	const m = PLAIN_PATH.exec(expression);
	if (!m) return null;
	const path = parsePath(m[4].replace(/^\s*\./, '').replace(/\s+(?=[.[])/g, ''));
	if (!path) return null;
	return { node: m[1] === '$json' ? null : (m[2] ?? m[3]), path };
}

export type TemplatePart = { text: string } | PlainPath;

/**
 * The parts of a text template whose every `{{ }}` is a plain path, such as
 * `=order-{{ $json.id }}`, `={{ $json.shop }}/{{ $json["order id"] }}` or
 * `=k-{{ $('Webhook').item.json.body.id }}`, else null. Literal text with a brace in it is left to
 * the engine.
 */
export function pathTemplate(raw: unknown): TemplatePart[] | null {
	if (typeof raw !== 'string' || !raw.startsWith('=')) return null;
	const parts: TemplatePart[] = [];
	let rest = raw.slice(1);
	let paths = 0;
	while (rest.length > 0) {
		const open = rest.indexOf('{{');
		const text = open === -1 ? rest : rest.slice(0, open);
		if (/[{}]/.test(text)) return null;
		if (text) parts.push({ text });
		if (open === -1) break;
		const close = rest.indexOf('}}', open + 2);
		if (close === -1) return null;
		const path = plainPathInside(rest.slice(open + 2, close));
		if (!path) return null;
		parts.push(path);
		paths++;
		rest = rest.slice(close + 2);
	}
	// A lone path is not text: plainPath returns its value as it is.
	return paths > 0 && parts.length > 1 ? parts : null;
}

/**
 * Fills a template as n8n's expression engine does for text, or returns undefined when a value
 * is an object or a list (left to the engine). Missing and null print as nothing, like the engine.
 * `root` gives what a path starts from: `$json`, or the paired item of its node.
 */
export function fillTemplate(parts: TemplatePart[], root: (node: string | null) => unknown): string | undefined {
	let out = '';
	for (const part of parts) {
		if ('text' in part) {
			out += part.text;
			continue;
		}
		const value = readPath(root(part.node), part.path);
		if (value === undefined || value === null) continue;
		if (typeof value === 'object') return undefined;
		out += String(value);
	}
	return out;
}

/** Reads a path; undefined as soon as a step is missing (no throw). */
export function readPath(value: unknown, path: PathSegment[]): unknown {
	let current = value;
	for (const segment of path) {
		if (current === null || current === undefined) return undefined;
		if (typeof current !== 'object' && typeof current !== 'string') return undefined;
		current = (current as Record<string, unknown>)[segment as string];
	}
	return current;
}

export const formatPath = (path: PathSegment[]) =>
	path.map((s, i) => (typeof s === 'number' ? `[${s}]` : IDENT.test(s) && IDENT.exec(s)![0] === s ? (i ? `.${s}` : s) : `[${JSON.stringify(s)}]`)).join('');

export interface ValueSource {
	/**
	 * How the value is read: a constant, a field of the item, a plain path of the item or of its
	 * paired item (or text built from them), the expression engine for many items per call
	 * (`batched`), or the expression engine per item.
	 */
	kind: 'constant' | 'field' | 'fast' | 'batched' | 'engine';
	read(itemIndex: number, item: INodeExecutionData): unknown;
}

export function fieldSource(path: PathSegment[]): ValueSource {
	return { kind: 'field', read: (_i, item) => readPath(item.json, path) };
}

/**
 * A node parameter that may hold an expression: constant when it has none, otherwise read as
 * expressionSource says (`fallback` as in getNodeParameter, for a parameter that may be absent).
 */
export function parameterSource(ctx: IExecuteFunctions, name: string, fallback?: unknown): ValueSource {
	const raw = ctx.getNodeParameter(name, 0, fallback, { rawExpressions: true });
	if (typeof raw !== 'string' || !raw.startsWith('=')) {
		return { kind: 'constant', read: () => raw };
	}
	return expressionSource(ctx, name, raw, fallback);
}

/**
 * A parameter whose raw value `raw` holds an expression: read from the item (or from the earlier
 * node's item paired with it) when it is a plain path or text built from plain paths; evaluated by
 * n8n for many items per call when itemLocalExpression accepts it (`$json`, `$('Node').item`,
 * `$itemIndex`); evaluated by n8n per item otherwise (`fallback` as in getNodeParameter).
 * Whatever cannot be read directly, such as a pairing n8n refuses, is left to getNodeParameter
 * for that item, so its error is n8n's.
 */
export function expressionSource(ctx: IExecuteFunctions, name: string, raw: unknown, fallback?: unknown): ValueSource {
	const perItem = (i: number) => ctx.getNodeParameter(name, i, fallback);
	const plain = plainPath(raw);
	if (plain?.node === null) return { kind: 'fast', read: (_i, item) => readPath(item.json, plain.path) };
	const template = plain ? null : pathTemplate(raw);
	if (plain || template) {
		const paired = pairedItems(ctx);
		const root = (node: string | null, i: number, item: INodeExecutionData) => (node === null ? item.json : paired(node, i));
		const read = plain
			? (i: number, item: INodeExecutionData) => readPath(root(plain.node, i, item), plain.path)
			: (i: number, item: INodeExecutionData) => fillTemplate(template!, (node) => root(node, i, item));
		const fast: ValueSource = {
			kind: 'fast',
			read: (i, item) => {
				let value: unknown;
				try {
					value = read(i, item);
				} catch {
					return perItem(i); // n8n refused the pairing: its own error
				}
				// A template with an object or a list in it is left to n8n, which prints those.
				return template && value === undefined ? perItem(i) : value;
			},
		};
		const nodes = pairedNodes(plain ? [plain] : template!);
		return nodes.length === 0 ? fast : checked(ctx, 'paired item reader', fast, perItem, nodes);
	}
	const expression = itemLocalExpression(raw);
	if (expression) {
		const items = ctx.getInputData();
		if (items.length > 1) {
			const batched = (wholeInputBytes: number): ValueSource => ({ kind: 'batched', read: batchedReader(ctx, name, expression, items, fallback, wholeInputBytes) });
			const mode = batchMode(expression, items);
			// An n8n whose $input.all() fails the check (n8n 1.123's vm engine answers it with
			// nothing) can still be read in chunks through $item(k).
			if (mode === 'whole input') {
				const whole = batched(WHOLE_INPUT_BYTES);
				const verdict = judged(ctx, { kind: mode, items, read: whole.read, perItem });
				if (verdict.trusted) return whole;
				if ('undecided' in verdict) return { kind: 'engine', read: perItem };
				return checked(ctx, 'chunks', batched(0), perItem);
			}
			return checked(ctx, mode, batched(WHOLE_INPUT_BYTES), perItem);
		}
	}
	return { kind: 'engine', read: perItem };
}

/** `source`, or n8n's per-item evaluation where this process does not trust the shortcut (shortcutCheck). */
function checked(ctx: IExecuteFunctions, shortcut: Shortcut, source: ValueSource, perItem: (i: number) => unknown, nodes: string[] = []): ValueSource {
	const read = checkedShortcut(ctx, { kind: shortcut, items: ctx.getInputData(), read: source.read, perItem, nodes });
	return read === source.read ? source : { kind: 'engine', read };
}

function pairedNodes(parts: TemplatePart[]): string[] {
	return [...new Set(parts.flatMap((part) => ('path' in part && part.node !== null ? [part.node] : [])))];
}

/**
 * `$('Node').item` for item `i`, from n8n's own data proxy: itemMatching, looked up once per node
 * and execution, then asked per item. Throws where n8n refuses: the node is not connected, or the
 * item has no pairing.
 */
function pairedItems(ctx: IExecuteFunctions): (node: string, i: number) => unknown {
	const found = new Map<string, ((i: number) => unknown) | Error>();
	let proxy: ReturnType<IExecuteFunctions['getWorkflowDataProxy']> | undefined;
	return (node, i) => {
		let match = found.get(node);
		if (match === undefined) {
			try {
				proxy ??= ctx.getWorkflowDataProxy(0);
				match = itemMatching(proxy, node);
			} catch (error) {
				match = error instanceof Error ? error : new Error(String(error));
			}
			found.set(node, match);
		}
		if (match instanceof Error) throw match;
		return match(i);
	};
}

/** How to build one key from several values with an expression: true on every node that takes a key. */
export const SEVERAL_VALUES_HINT = 'build one text from several values in the expression, e.g. {{ $json.orderId }}-{{ $json.lineId }}';

/**
 * A key as text: strings as they are, numbers as JavaScript prints them (as the expression
 * engine does when it builds text). Anything else is refused with a readable reason.
 * `severalValues` ends the hint; it must name only what the node showing it has (a node with
 * its own "hash of fields" choice may name that instead).
 */
export function toKeyText(value: unknown, what = 'key', severalValues = SEVERAL_VALUES_HINT): string {
	if (typeof value === 'string') return value;
	if (typeof value === 'number' && Number.isFinite(value)) return String(value);
	if (typeof value === 'bigint') return value.toString();
	if (value === undefined || value === null) {
		throw new LedgerInputError(
			`The ${what} is missing on this item`,
			`Check that the field the ${what} points at exists on every incoming item.`,
		);
	}
	const kind = Array.isArray(value) ? 'a list' : typeof value === 'object' ? 'an object' : `a ${typeof value}`;
	throw new LedgerInputError(
		`The ${what} must be text or a number, but on this item it is ${kind}`,
		`Point the ${what} at a single value such as an ID, or ${severalValues}.`,
	);
}
