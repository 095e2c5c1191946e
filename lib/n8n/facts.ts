import type { IDataObject, INodeExecutionData } from 'n8n-workflow';
import { types } from 'util';

import type { LedgerRecord } from '../ledger/types';
import { isTestNamespace } from './testRuns';

/** Every node adds its ledger facts to an output item under this one field. */
export const FACTS_FIELD = 'idempotency';

const { isProxy } = types;

const hasOwn = Object.prototype.hasOwnProperty;

/**
 * A copy of an item's JSON with the facts under FACTS_FIELD. Object.assign onto a new object
 * copies an item about eight times faster than `{ ...json, [FACTS_FIELD]: facts }`, which shows at
 * 10,000 items; only JSON with an own "__proto__" member (JSON.parse makes those) is spread, as
 * assigning that member would set the copy's prototype instead of copying it.
 *
 * JSON behind a proxy is copied with the fewest reads of the proxy: its member names once, then
 * each member's value. n8n 1.x with task runners off (its default) runs the Code node in vm2 in its
 * own process, and the items it returns reach the next node as vm2 proxies, where every read
 * costs a trip through vm2's bridge. Object.assign also asks the proxy for each member's
 * descriptor (and the "__proto__" check for one more); leaving those out takes about 40% off the
 * copy there (12 to 7 µs of CPU an item, docs/benchmarks.md). JSON members are all
 * enumerable strings, so the names are the keys Object.assign would copy.
 */
export function withFactsField(json: IDataObject, facts: IDataObject): IDataObject {
	if (isProxy(json)) return proxiedWithFacts(json, facts);
	if (hasOwn.call(json, '__proto__')) return { ...json, [FACTS_FIELD]: facts };
	const copy = Object.assign({}, json);
	copy[FACTS_FIELD] = facts;
	return copy;
}

/**
 * True when the item's JSON is behind a proxy, as items from a Code node in n8n 1.x's vm2 sandbox
 * (task runners off) are: every node after it reads them several times slower than plain items.
 */
export const isProxiedJson = (json: IDataObject): boolean => isProxy(json);

function proxiedWithFacts(json: IDataObject, facts: IDataObject): IDataObject {
	const names = Object.getOwnPropertyNames(json);
	const copy: IDataObject = {};
	for (let k = 0; k < names.length; k++) {
		const name = names[k];
		if (name === '__proto__') Object.defineProperty(copy, name, { value: json[name], enumerable: true, writable: true, configurable: true });
		else copy[name] = json[name];
	}
	copy[FACTS_FIELD] = facts;
	return copy;
}

/** An input item passed on with its facts: its binary data kept, paired with input item `index`. */
export const itemWithFacts = (item: INodeExecutionData, index: number, facts: IDataObject): INodeExecutionData =>
	item.binary
		? { json: withFactsField(item.json, facts), binary: item.binary, pairedItem: { item: index } }
		: { json: withFactsField(item.json, facts), pairedItem: { item: index } };

export type Outcome = 'new' | 'duplicate' | 'in_progress' | 'mismatch' | 'unverified';

// Rows claimed by one statement share their timestamps; formatting each instant once keeps
// 10,000-item batches cheap. The last few instants are checked first: a row's four timestamps
// (first seen, updated, expires, lease end) repeat row after row in a batch, and a comparison is
// cheaper than a map lookup.
const isoCache = new Map<number, string>();
const RECENT = 4;
const recentMs = new Array<number>(RECENT).fill(NaN);
const recentText = new Array<string>(RECENT).fill('');
let recentNext = 0;
function iso(d: Date | null | undefined): string | null {
	if (!d) return null;
	const ms = d.getTime();
	for (let i = 0; i < RECENT; i++) if (recentMs[i] === ms) return recentText[i];
	let text = isoCache.get(ms);
	if (text === undefined) {
		if (isoCache.size > 10_000) isoCache.clear();
		text = d.toISOString();
		isoCache.set(ms, text);
	}
	recentMs[recentNext] = ms;
	recentText[recentNext] = text;
	recentNext = (recentNext + 1) % RECENT;
	return text;
}

export function factsOf(outcome: Outcome, namespace: string, key: string, step: string, record: LedgerRecord | null): IDataObject {
	const facts = rowFacts(outcome, namespace, key, step, record);
	facts.externalId = record?.externalId ?? null;
	facts.result = (record?.result ?? null) as IDataObject | null;
	facts.version = record?.version ?? null;
	// Only on items of editor test runs that used their test namespace.
	if (isTestNamespace(namespace)) facts.testRun = true;
	return facts;
}

/** The facts every item of a row starts with, in the order items show them. */
function rowFacts(outcome: string, namespace: string, key: string, step: string, record: LedgerRecord | null): IDataObject {
	return {
		outcome,
		namespace,
		key,
		step,
		status: record?.status ?? null,
		firstSeenAt: iso(record?.firstSeenAt),
		updatedAt: iso(record?.updatedAt),
		expiresAt: iso(record?.expiresAt),
		attempts: record?.attempts ?? null,
		leaseHolder: record?.leaseHolder ?? null,
		leaseExpiresAt: iso(record?.leaseExpiresAt),
		fence: record?.fence ?? null,
		previousStatus: record?.previousStatus ?? null,
	};
}

/**
 * A Prompt Cache item's facts: factsOf's but the stored result, version and external id (the item
 * carries the response itself), then the prompt hash, then `extra`. Built up in that order rather
 * than as factsOf's with three `delete`s and two spreads, which cost a cache hit more than its
 * own hashing.
 */
export function cacheFactsOf(outcome: string, namespace: string, hash: string, step: string, record: LedgerRecord | null, extra: IDataObject): IDataObject {
	const facts = rowFacts(outcome, namespace, hash, step, record);
	if (isTestNamespace(namespace)) facts.testRun = true;
	facts.promptHash = hash;
	for (const name in extra) facts[name] = extra[name];
	return facts;
}

/**
 * Under FACTS_FIELD on a Dedupe Gate item, the facts our own nodes read and a flow builder does
 * not: the scope, the claim's fence and lease, the row's times. Mark Step Done, Guarded Send and
 * Start Step find the gate's claim here (lineage.ts factsKey), on the item itself or on the gate's
 * output item they trace it back to, so it survives Set, Merge and Code nodes as the flat facts did.
 */
export const LEDGER_DETAILS = '_ledger';

/** What a Dedupe Gate item carries beside its facts: when a New key is marked done, or why an item is In Progress. */
export type GateNote = { doneWhen: string } | { reason: string };

/**
 * A Dedupe Gate item's facts: on top what a flow builder reads in expressions and IFs (what the
 * gate decided, the key, the row's status, when it was first seen, and what a Mark Step Done or
 * Guarded Send stored for it), then the `note`, then the rest under LEDGER_DETAILS.
 *
 * Each shape is one object literal. V8 builds a literal with room for every field it names; a
 * field added afterwards goes into a second, separate store. The gate keeps 10,000 of these alive
 * until it returns, and garbage collection copies every live object: two objects per item instead
 * of three made the facts and items of 10,000 items 2 to 8 times cheaper (docs/benchmarks.md).
 */
export function gateFactsOf(
	outcome: Outcome,
	namespace: string,
	key: string,
	step: string,
	record: LedgerRecord | null,
	note?: GateNote,
): IDataObject {
	const status = record?.status ?? null;
	const firstSeenAt = iso(record?.firstSeenAt);
	const externalId = record?.externalId ?? null;
	const result = (record?.result ?? null) as IDataObject | null;
	const details = ledgerDetails(namespace, step, record);
	// Only on items of editor test runs that used their test namespace, before the details.
	if (isTestNamespace(namespace)) {
		return { outcome, key, status, firstSeenAt, externalId, result, ...note, testRun: true, [LEDGER_DETAILS]: details };
	}
	if (note === undefined) return { outcome, key, status, firstSeenAt, externalId, result, _ledger: details };
	if ('doneWhen' in note) return { outcome, key, status, firstSeenAt, externalId, result, doneWhen: note.doneWhen, _ledger: details };
	return { outcome, key, status, firstSeenAt, externalId, result, reason: note.reason, _ledger: details };
}

/**
 * The facts our own nodes read and a flow builder does not, under LEDGER_DETAILS ("_ledger",
 * written out above for the literals' sake).
 *
 * Rows claimed by one statement, or blocked by the rows of one earlier claim, have the same
 * details: the same namespace, step, fence, attempts, lease and times (their records share their
 * Dates). Their items then share one details object instead of 10,000 equal copies kept alive
 * until the gate returns: that took the gate's allocation for 10,000 items from about 11.0 to
 * 9.6 MB per execution (docs/benchmarks.md). Our nodes only read facts (lineage.ts); the docs ask
 * a flow builder to leave `_ledger` as it is, and say that items share it.
 */
function ledgerDetails(namespace: string, step: string, record: LedgerRecord | null): IDataObject {
	const last = lastDetails;
	if (record !== null && last !== null && last.namespace === namespace && last.step === step && sameDetails(last.record, record)) {
		return last.details;
	}
	const details = {
		namespace,
		step,
		fence: record?.fence ?? null,
		attempts: record?.attempts ?? null,
		previousStatus: record?.previousStatus ?? null,
		updatedAt: iso(record?.updatedAt),
		expiresAt: iso(record?.expiresAt),
		leaseHolder: record?.leaseHolder ?? null,
		leaseExpiresAt: iso(record?.leaseExpiresAt),
		version: record?.version ?? null,
	};
	lastDetails = record === null ? null : { namespace, step, record, details };
	return details;
}

/** Whether two records give the same details (Dates compared as objects: the same instant in another Date just misses). */
const sameDetails = (a: LedgerRecord, b: LedgerRecord) =>
	a.fence === b.fence &&
	a.attempts === b.attempts &&
	a.previousStatus === b.previousStatus &&
	a.updatedAt === b.updatedAt &&
	a.expiresAt === b.expiresAt &&
	a.leaseHolder === b.leaseHolder &&
	a.leaseExpiresAt === b.leaseExpiresAt &&
	a.version === b.version;

/** The details made last, and of what: the next item of the same claim usually has the same. */
let lastDetails: { namespace: string; step: string; record: LedgerRecord; details: IDataObject } | null = null;

/**
 * Ledger step of a Prompt Cache entry. Its facts name a prompt hash, not a unit of work, so
 * nodes that look for the unit's key on an item skip them (see lineage.ts).
 */
export const PROMPT_CACHE_STEP = 'prompt-cache';

const formatters = new Map<string, Intl.DateTimeFormat>();
// The In Progress items of a batch that another run holds share its claim's instants: each is
// formatted once, not once per item.
const localCache = new Map<string, string>();
/** "2026-11-24 10:02:11" in the workflow's time zone (UTC when n8n names none it knows). */
function localTime(date: Date, timeZone: string): string {
	const id = `${timeZone}\u0000${date.getTime()}`;
	const known = localCache.get(id);
	if (known !== undefined) return known;
	const text = formatLocal(date, timeZone);
	if (localCache.size > 10_000) localCache.clear();
	localCache.set(id, text);
	return text;
}

function formatLocal(date: Date, timeZone: string): string {
	let format = formatters.get(timeZone);
	if (!format) {
		try {
			format = new Intl.DateTimeFormat('sv-SE', { timeZone, dateStyle: 'short', timeStyle: 'medium' });
		} catch {
			format = new Intl.DateTimeFormat('sv-SE', { timeZone: 'UTC', dateStyle: 'short', timeStyle: 'medium' });
		}
		formatters.set(timeZone, format);
	}
	return format.format(date);
}

/** "execution:12" → "execution 12"; any other holder as it is. */
const holderName = (holder: string | null) => (holder ? holder.replace(/^execution:/, 'execution ') : 'another run');

/**
 * Why an item went to In Progress, in words a person can act on: who holds the key since when,
 * and how soon it is free again if that run stops. Times are the ledger's, shown in the
 * workflow's time zone.
 *
 * The lease end is not a promise: a run that is alive renews its lease (lib/n8n/leaseKeeper.ts),
 * so the end moves on while it runs, up to its configured maximum. What stays true is that the
 * key is free again once the lease the ledger answered with runs out without a renewal, that is
 * within its remaining time (by the ledger's clock) if that run stops now.
 */
export function inProgressReason(record: LedgerRecord | null, ownHolder: string, timeZone: string): string {
	if (!record) return 'Another item of this batch with the same key went first.';
	if (record.leaseHolder === ownHolder) {
		return 'This execution let the same key through earlier (for example in a loop) and has not marked it done yet.';
	}
	// The rows another run claimed together answer alike, item after item: the same words.
	const said = lastReason;
	const updated = record.updatedAt.getTime();
	const leaseEnd = record.leaseExpiresAt ? record.leaseExpiresAt.getTime() : null;
	if (
		said !== null &&
		said.updated === updated &&
		said.leaseEnd === leaseEnd &&
		said.remaining === record.leaseRemainingMs &&
		said.holder === record.leaseHolder &&
		said.timeZone === timeZone
	) {
		return said.text;
	}
	const since = localTime(record.updatedAt, timeZone);
	let free = '';
	if (record.leaseExpiresAt && record.leaseRemainingMs !== null) {
		const seconds = Math.max(1, Math.ceil(record.leaseRemainingMs / 1000));
		free = ` If that run stops, the key is free again within ${seconds} second${seconds === 1 ? '' : 's'} (by ${localTime(record.leaseExpiresAt, timeZone)}, ${timeZone}).`;
	}
	const text = `Let through to ${holderName(record.leaseHolder)} at ${since} and not marked done yet.${free}`;
	lastReason = { updated, leaseEnd, remaining: record.leaseRemainingMs, holder: record.leaseHolder, timeZone, text };
	return text;
}

let lastReason: {
	updated: number;
	leaseEnd: number | null;
	remaining: number | null;
	holder: string | null;
	timeZone: string;
	text: string;
} | null = null;
