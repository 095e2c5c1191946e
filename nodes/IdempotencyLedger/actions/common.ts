import type { IDataObject, IExecuteFunctions, INodeExecutionData, INodeProperties } from 'n8n-workflow';

import { rowCheck } from '../../../lib/dashboard/read';
import { DURATION_UNITS, toMilliseconds, type DurationUnit } from '../../../lib/ledger/duration';
import { LedgerInputError } from '../../../lib/ledger/errors';
import type { Checkpoint, Ledger, LedgerRecord } from '../../../lib/ledger/types';
import { assertKey } from '../../../lib/ledger/validate';
import { failedItem, toNodeError } from '../../../lib/n8n/errors';
import { toKeyText } from '../../../lib/n8n/keySource';
import { openLedger } from '../../../lib/n8n/ledgerAccess';
import { namespaceReader, scopeProperties } from '../../../lib/n8n/scope';

/* ------------------------------------------------------------------------------------------ */
/* Shared parameters                                                                           */
/* ------------------------------------------------------------------------------------------ */

const [scopeProperty, namespaceProperty] = scopeProperties;

const scopeNotice: INodeProperties = {
	displayName:
		'"This Workflow" is the namespace of the workflow this node is in. To look at the keys of another workflow, choose "Shared Namespace" and enter "workflow:" followed by its ID, e.g. workflow:Xy12AbCd34.',
	name: 'scopeNotice',
	type: 'notice',
	default: '',
	displayOptions: { show: { scope: ['workflow'] } },
};

/**
 * Scope and namespace, the same selector as Dedupe Gate's. `withAll` adds "All Namespaces" (List
 * only). `keysNotice`: the notice on how to look at another workflow's keys (not for checkpoints).
 */
export function namespaceProperties(withAll = false, keysNotice = true): INodeProperties[] {
	const scope: INodeProperties = withAll
		? {
				...scopeProperty,
				options: [
					...(scopeProperty.options ?? []),
					{ name: 'All Namespaces', value: 'all', description: 'Rows of every workflow and every shared namespace' },
				],
			}
		: scopeProperty;
	return keysNotice ? [scope, scopeNotice, namespaceProperty] : [scope, namespaceProperty];
}

/** "Who did it" for the audit trail: typed, or this workflow and execution when left empty. */
export function actorProperty(name: string, displayName: string, description: string): INodeProperties {
	return {
		displayName,
		name,
		type: 'string',
		default: '',
		placeholder: 'e.g. jane@example.com (ticket OPS-123)',
		description: `${description} Leave empty to record this workflow and execution`,
	};
}

export const keyProperty: INodeProperties = {
	displayName: 'Key',
	name: 'key',
	type: 'string',
	default: '',
	required: true,
	placeholder: 'e.g. evt_1NqX2b or {{ $json.eventId }}',
	description: 'The idempotency key, exactly as the gate stored it (an event or order ID, or a hash)',
};

/** Retention of a step a person settled: recorded as sent or dropped (Key → Release, Review → Settle). */
export const RESOLVED_TTL_MS = 30 * 86_400_000;

export const unitOptions = Object.keys(DURATION_UNITS).map((unit) => ({
	name: unit[0].toUpperCase() + unit.slice(1),
	value: unit,
}));

/* ------------------------------------------------------------------------------------------ */
/* Reading and validating one item's parameters                                                */
/* ------------------------------------------------------------------------------------------ */

const shown = (value: unknown): string =>
	value === undefined
		? 'nothing'
		: value === null
			? 'null'
			: Array.isArray(value)
				? 'a list'
				: typeof value === 'object'
					? 'an object'
					: `${typeof value} ${JSON.stringify(value)}`;

/** A text parameter: numbers become text; anything else that is not text is refused. */
export function readText(
	ctx: IExecuteFunctions,
	name: string,
	itemIndex: number,
	what: string,
	options: { max: number; allowEmpty?: boolean; trim?: boolean },
): string {
	const raw = ctx.getNodeParameter(name, itemIndex, '') as unknown;
	let value: string;
	if (typeof raw === 'string') value = options.trim ? raw.trim() : raw;
	else if (typeof raw === 'number' && Number.isFinite(raw)) value = String(raw);
	else {
		throw new LedgerInputError(
			`The ${what} must be text, but on this item it is ${shown(raw)}`,
			`Check the "${what}" parameter: it should resolve to a single text value.`,
		);
	}
	if (!options.allowEmpty && value.trim() === '') {
		throw new LedgerInputError(
			`The ${what} is empty`,
			`Enter the ${what}, or check that the field the expression points at exists on this item.`,
		);
	}
	if (value.length > options.max) {
		throw new LedgerInputError(
			`The ${what} is ${value.length} characters long; the limit is ${options.max}`,
			`Check the "${what}" parameter: it should not be a whole document.`,
		);
	}
	return value;
}

/** The idempotency key of this item: text or a number, not empty, at most 512 characters. */
export function readKey(ctx: IExecuteFunctions, itemIndex: number): string {
	return assertKey(toKeyText(ctx.getNodeParameter('key', itemIndex, '') as unknown));
}

/** A whole number in [min, max]; numeric text from an expression is accepted. */
export function readWholeNumber(
	ctx: IExecuteFunctions,
	name: string,
	itemIndex: number,
	what: string,
	min: number,
	max: number,
	fallback: number,
): number {
	const raw = ctx.getNodeParameter(name, itemIndex, fallback) as unknown;
	const n = typeof raw === 'string' && raw.trim() !== '' ? Number(raw) : raw;
	if (typeof n !== 'number' || !Number.isInteger(n) || n < min || n > max) {
		throw new LedgerInputError(
			`The ${what} must be a whole number from ${min} to ${max}, not ${shown(raw)}`,
			`Set "${what}" to a number such as ${fallback}.`,
		);
	}
	return n;
}

/** One of a fixed set of values (options parameters can still be set by an expression). */
export function readChoice<T extends string>(
	ctx: IExecuteFunctions,
	name: string,
	itemIndex: number,
	what: string,
	allowed: readonly T[],
): T {
	const raw = ctx.getNodeParameter(name, itemIndex) as unknown;
	if (typeof raw !== 'string' || !(allowed as readonly string[]).includes(raw)) {
		throw new LedgerInputError(
			`The ${what} ${typeof raw === 'string' ? JSON.stringify(raw) : shown(raw)} is not one of: ${allowed.join(', ')}`,
			`Pick one of the listed values for "${what}".`,
		);
	}
	return raw as T;
}

export function readBoolean(ctx: IExecuteFunctions, name: string, itemIndex: number, what: string): boolean {
	const raw = ctx.getNodeParameter(name, itemIndex, false) as unknown;
	if (typeof raw === 'boolean') return raw;
	if (raw === 'true' || raw === 'false') return raw === 'true';
	throw new LedgerInputError(`"${what}" must be true or false, not ${shown(raw)}`);
}

/** A duration that may be 0 ("any age"); otherwise as the other nodes read durations. */
export function readOptionalDuration(ctx: IExecuteFunctions, name: string, itemIndex: number, what: string): number {
	const amount = ctx.getNodeParameter(name, itemIndex, 0) as unknown;
	const unit = readChoice(ctx, `${name}Unit`, itemIndex, `${what} unit`, Object.keys(DURATION_UNITS) as DurationUnit[]);
	if (amount === 0 || amount === '0' || amount === '' || amount === null || amount === undefined) return 0;
	return toMilliseconds(amount, unit, what);
}

const CURSOR = /^[A-Za-z0-9_-]+$/;
export const MAX_CURSOR_LENGTH = 4096;

/** An optional page cursor: empty means the first page. Only the ledger can tell a stale one. */
export function readCursor(ctx: IExecuteFunctions, itemIndex: number): string | null {
	const raw = ctx.getNodeParameter('cursor', itemIndex, '') as unknown;
	if (raw === undefined || raw === null) return null;
	if (typeof raw !== 'string') {
		throw new LedgerInputError(
			`The cursor must be text, but on this item it is ${shown(raw)}`,
			'Use the "nextCursor" of the previous page as it is, or leave the cursor empty to start from the first page.',
		);
	}
	const cursor = raw.trim();
	if (cursor === '') return null;
	if (cursor.length > MAX_CURSOR_LENGTH || !CURSOR.test(cursor)) {
		throw new LedgerInputError(
			'The page cursor is not one this ledger made',
			'Use the "nextCursor" of the previous page as it is, or leave the cursor empty to start from the first page.',
		);
	}
	return cursor;
}

/** Who did it: the typed name, or this workflow and execution. */
export function readActor(ctx: IExecuteFunctions, name: string, itemIndex: number, what: string): string {
	const typed = readText(ctx, name, itemIndex, what, { max: 200, allowEmpty: true, trim: true });
	if (typed !== '') return typed;
	return `workflow:${ctx.getWorkflow().id ?? 'unsaved'} execution:${ctx.getExecutionId() ?? 'unknown'}`;
}

/**
 * The namespace of this item. Reads "Scope" and "Namespace" as Dedupe Gate does; a scope value the
 * operation does not offer (e.g. "All Namespaces" carried over from List) is refused instead of
 * silently meaning "this workflow".
 */
export function namespaceOf(ctx: IExecuteFunctions): (itemIndex: number, item: INodeExecutionData) => string {
	const scope = ctx.getNodeParameter('scope', 0) as unknown;
	if (scope !== 'workflow' && scope !== 'shared') {
		const error = new LedgerInputError(
			`The scope ${JSON.stringify(scope)} cannot be used with this operation`,
			'Choose "This Workflow" or "Shared Namespace".',
		);
		return () => {
			throw error;
		};
	}
	return namespaceReader(ctx);
}

/* ------------------------------------------------------------------------------------------ */
/* Output                                                                                      */
/* ------------------------------------------------------------------------------------------ */

export const iso = (d: Date | null | undefined): string | null => (d ? d.toISOString() : null);

/**
 * A ledger row as output JSON, dates as ISO strings. `stuck`: in progress with a lapsed lease, by
 * the ledger's clock. `mayHaveBeenSent`: it reached `sending`, so releasing it needs a decision.
 */
/**
 * What Guarded Send's check found when it asked the destination about this step ("was it
 * delivered?"), as kept in the row's result: `{ outcome: found | not_found | unknown, detail,
 * checkedAt }`. Null where no check ran (a step still stuck mid-send is checked by the next delivery).
 */
export function checkEvidence(r: LedgerRecord): IDataObject | null {
	return rowCheck(r.result) as IDataObject | null;
}

export function recordJson(r: LedgerRecord): IDataObject {
	return {
		namespace: r.namespace,
		key: r.key,
		step: r.step,
		status: r.status,
		stuck: r.status === 'in_progress' && r.leaseRemainingMs === 0,
		mayHaveBeenSent: r.phase === 'sending',
		leaseHolder: r.leaseHolder,
		leaseExpiresAt: iso(r.leaseExpiresAt),
		leaseRemainingSeconds: r.leaseRemainingMs === null ? null : Math.ceil(r.leaseRemainingMs / 1000),
		fence: r.fence,
		phase: r.phase,
		attempts: r.attempts,
		previousStatus: r.previousStatus,
		externalId: r.externalId,
		result: (r.result ?? null) as IDataObject | null,
		check: checkEvidence(r),
		fingerprint: r.fingerprint,
		version: r.version,
		firstSeenAt: iso(r.firstSeenAt),
		updatedAt: iso(r.updatedAt),
		expiresAt: iso(r.expiresAt),
	};
}

export function checkpointJson(namespace: string, name: string, c: Checkpoint | null): IDataObject {
	return {
		namespace,
		name,
		found: c !== null,
		value: c?.value ?? null,
		updatedAt: iso(c?.updatedAt),
		updatedBy: c?.updatedBy ?? null,
	};
}

/* ------------------------------------------------------------------------------------------ */
/* The per-item loop                                                                           */
/* ------------------------------------------------------------------------------------------ */

/**
 * Runs an operation once per input item. `parse` reads and validates the item's parameters and
 * touches nothing; only when it succeeds is the ledger opened (once per execution) and `run`
 * called. A failure is that item's error: thrown, or with "continue on fail" an output item that
 * carries it. The ledger being unreachable fails every item that needed it (fail closed).
 */
export async function runPerItem<P>(
	ctx: IExecuteFunctions,
	items: INodeExecutionData[],
	parse: (itemIndex: number, item: INodeExecutionData) => P,
	run: (ledger: Ledger, params: P, itemIndex: number) => Promise<IDataObject | IDataObject[]>,
): Promise<INodeExecutionData[]> {
	const node = ctx.getNode();
	const continueOnFail = ctx.continueOnFail();
	let opened: Promise<Ledger> | undefined;
	const out: INodeExecutionData[] = [];
	for (let i = 0; i < items.length; i++) {
		try {
			const params = parse(i, items[i]);
			opened ??= openLedger(ctx);
			const ledger = await opened;
			const result = await run(ledger, params, i);
			for (const json of Array.isArray(result) ? result : [result]) out.push({ json, pairedItem: { item: i } });
		} catch (error) {
			const nodeError = toNodeError(node, error, i);
			if (!continueOnFail) throw nodeError;
			out.push(failedItem(node, items[i], i, nodeError));
		}
	}
	return out;
}

/** An operation's execute, as the router calls it. */
export type Execute = (this: IExecuteFunctions, items: INodeExecutionData[]) => Promise<INodeExecutionData[]>;

/**
 * The execute of an operation that only reads each item's parameters and acts on the ledger for
 * it (runPerItem). `parse` gets the item's namespace, as "Scope" and "Namespace" name it, from
 * `namespace()`, read only when asked for.
 */
export function perItem<P>(
	parse: (ctx: IExecuteFunctions, itemIndex: number, namespace: () => string) => P,
	run: (ledger: Ledger, params: P) => Promise<IDataObject | IDataObject[]>,
): Execute {
	return async function (this: IExecuteFunctions, items: INodeExecutionData[]) {
		let namespaceFor: ReturnType<typeof namespaceOf> | undefined;
		return await runPerItem(this, items, (i, item) => parse(this, i, () => (namespaceFor ??= namespaceOf(this))(i, item)), run);
	};
}
