import type { IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

import { LedgerInputError } from '../../lib/ledger/errors';
import { expressionSource } from '../../lib/n8n/keySource';

/**
 * A per-item parameter without paying for n8n's expression engine when it is not needed: a value
 * with no expression anywhere is read once, a plain `={{ $json.a.b }}` or text built only from
 * such paths (`=Order {{ $json.id }} paid`) is read from the item, and only anything else is
 * evaluated by n8n for each item.
 */
export type ItemParam<T = unknown> = (itemIndex: number, item: INodeExecutionData) => T;

function hasExpression(value: unknown): boolean {
	if (typeof value === 'string') return value.startsWith('=');
	if (Array.isArray(value)) return value.some(hasExpression);
	if (value && typeof value === 'object') return Object.values(value).some(hasExpression);
	return false;
}

export function itemParam(ctx: IExecuteFunctions, name: string, fallback: unknown = undefined): ItemParam {
	const raw = ctx.getNodeParameter(name, 0, fallback, { rawExpressions: true });
	if (!hasExpression(raw)) {
		const value = ctx.getNodeParameter(name, 0, fallback);
		return () => value;
	}
	return expressionSource(ctx, name, raw, fallback).read;
}

/** Text: numbers print as numbers; missing is '' (or an error when required). */
export function textParam(ctx: IExecuteFunctions, name: string, label: string, required: boolean): ItemParam<string> {
	const read = itemParam(ctx, name, '');
	return (i, item) => {
		const value = read(i, item);
		if (value === undefined || value === null || value === '') {
			if (required) throw new LedgerInputError(`${label} is empty on this item`, `Fill in ${label}, or check that the field it points at exists on every item.`);
			return '';
		}
		if (typeof value === 'string') return value;
		if (typeof value === 'number' || typeof value === 'boolean') return String(value);
		throw new LedgerInputError(
			`${label} must be text, but on this item it is ${Array.isArray(value) ? 'a list' : value && typeof value === 'object' ? 'an object' : `a ${typeof value}`}`,
			`Point ${label} at a text field, or build the text with an expression.`,
		);
	};
}

/** A `json` parameter: an object as it is, text parsed, empty as undefined. */
export function jsonParam(ctx: IExecuteFunctions, name: string, label: string): ItemParam<unknown> {
	const read = itemParam(ctx, name, '');
	return (i, item) => {
		const value = read(i, item);
		if (value === undefined || value === null) return undefined;
		if (typeof value !== 'string') return value;
		if (value.trim() === '') return undefined;
		const parsed = parseJson(value);
		if (parsed.ok) return parsed.value;
		throw new LedgerInputError(`${label} is not valid JSON: ${parsed.problem}`, `Check ${label}: it must be JSON, such as {"name": "value"}.`);
	};
}

export function parseJson(text: string): { ok: true; value: unknown } | { ok: false; problem: string } {
	try {
		return { ok: true, value: JSON.parse(text) };
	} catch (error) {
		return { ok: false, problem: (error as Error).message };
	}
}

/** A name/value list (fixedCollection with a `parameters` list) as a plain object. */
export function pairsParam(ctx: IExecuteFunctions, name: string, label: string): ItemParam<Record<string, string>> {
	const read = itemParam(ctx, name, {});
	return (i, item) => {
		const value = read(i, item) as { parameters?: Array<{ name?: unknown; value?: unknown }> } | undefined;
		const out: Record<string, string> = {};
		for (const p of value?.parameters ?? []) {
			const key = typeof p.name === 'string' ? p.name.trim() : '';
			if (!key) throw new LedgerInputError(`A ${label} entry has no name`, `Give every ${label} entry a name, or remove it.`);
			const v = p.value;
			if (v !== undefined && v !== null && typeof v === 'object') {
				throw new LedgerInputError(`The ${label} "${key}" must be text, but on this item it is an object`, 'Use a text value, or JSON.stringify() it in an expression.');
			}
			out[key] = v === undefined || v === null ? '' : String(v);
		}
		return out;
	};
}

export function numberOption(value: unknown, label: string, min: number, max: number, fallback: number): number {
	if (value === undefined || value === null || value === '') return fallback;
	const n = typeof value === 'string' ? Number(value) : value;
	if (typeof n !== 'number' || !Number.isFinite(n) || n < min || n > max) {
		throw new LedgerInputError(`${label} must be a number from ${min} to ${max}, not ${JSON.stringify(value)}`, `Set ${label} to a number such as ${fallback}.`);
	}
	return n;
}
