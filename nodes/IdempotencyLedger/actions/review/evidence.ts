import { createHash } from 'node:crypto';

import type { IDataObject } from 'n8n-workflow';

import { LedgerInputError } from '../../../../lib/ledger/errors';
import type { LedgerRecord, Resolution } from '../../../../lib/ledger/types';
import { FACTS_FIELD } from '../../../../lib/n8n/facts';
import { NEEDS_REVIEW_REASONS } from '../../../GuardedSend/reasons';
import { checkEvidence, iso } from '../common';

/** The three answers a person gives, as the review form lists them, and what each tells the ledger. */
export const ANSWERS = [
	{ label: 'It was sent', resolution: 'sent', decision: 'sent' },
	{ label: 'Send it again', resolution: 'not_sent', decision: 'send_again' },
	{ label: 'Drop it', resolution: 'dropped', decision: 'drop' },
] as const satisfies ReadonlyArray<{ label: string; resolution: Resolution; decision: string }>;

export type Answer = (typeof ANSWERS)[number];

/** The row a person is asked about: where it is, and which incarnation of it (its fencing token). */
export interface ReviewRef {
	namespace: string;
	key: string;
	step: string;
	fence: number | null;
}

/** Where the "asked once" marks live: beside, never among, the rows of the namespace. */
const ASKED_PREFIX = 'review:';
export const askedNamespace = (namespace: string) => `${ASKED_PREFIX}${namespace}`;
export const isAskedNamespace = (namespace: string) => namespace.startsWith(ASKED_PREFIX);

/** One mark per step and incarnation; a step that lands on Needs Review again later is asked again. */
export const askedStep = (ref: ReviewRef) => `asked:${createHash('sha256').update(ref.step).digest('hex').slice(0, 16)}:${ref.fence ?? 'none'}`;

/** The row a Needs Review item is about, from the facts Guarded Send and Start Step put on it. */
export function heldRow(json: IDataObject): { namespace: string; key: string; step: string; reason: string | null; detail: string | null } {
	const facts = json[FACTS_FIELD] as IDataObject | undefined;
	const text = (v: unknown) => (typeof v === 'string' ? v : null);
	const namespace = text(facts?.namespace);
	const key = text(facts?.key);
	const step = text(facts?.step);
	if (!facts || typeof facts !== 'object' || namespace === null || key === null || step === null) {
		throw new LedgerInputError(
			`This item is not from a Needs Review output: it has no "${FACTS_FIELD}" field with the namespace, key and step`,
			'Connect this node to the Needs Review output of a Guarded Send or a Start Step, and keep the item as it comes out (a Set node before it may have dropped the field).',
		);
	}
	return { namespace, key, step, reason: text(facts.reason), detail: text(facts.detail) };
}

/** Field names whose values are never shown to a reviewer. */
const SECRET = /pass(word)?|secret|token|api[-_]?key|auth|cookie|session|card|cvc|cvv|iban|ssn/i;
const MAX_FIELDS = 8;
const MAX_VALUE = 80;

/** A Webhook node's item carries the request; what was sent is its body. */
const sentPart = (json: IDataObject): IDataObject =>
	typeof json.body === 'object' && json.body !== null && !Array.isArray(json.body) && typeof json.headers === 'object' ? (json.body as IDataObject) : json;

/**
 * What the step was sending, as a few short `name: value` lines (nested fields one level deep, as
 * `parent.name`): no secrets, no whole documents.
 */
export function payloadSummary(json: IDataObject): string[] {
	const fields: Array<[string, unknown]> = [];
	for (const [name, value] of Object.entries(sentPart(json))) {
		if (name === FACTS_FIELD) continue;
		if (typeof value === 'object' && value !== null && !Array.isArray(value) && !SECRET.test(name)) {
			for (const [inner, v] of Object.entries(value)) fields.push([`${name}.${inner}`, v]);
		} else fields.push([name, value]);
	}
	const lines = fields.slice(0, MAX_FIELDS).map(([name, value]) => {
		let shown: string;
		if (SECRET.test(name)) shown = '(hidden)';
		else if (value === null || ['string', 'number', 'boolean'].includes(typeof value)) shown = String(value);
		else shown = Array.isArray(value) ? `(a list of ${value.length})` : `(${Object.keys(value as object).length} fields)`;
		return `${name}: ${shown.length > MAX_VALUE ? `${shown.slice(0, MAX_VALUE - 1)}…` : shown}`;
	});
	if (fields.length > MAX_FIELDS) lines.push(`(and ${fields.length - MAX_FIELDS} more fields)`);
	return lines;
}

const when = (d: Date) => `${d.toISOString().slice(0, 19).replace('T', ' ')} UTC`;

/**
 * Everything a person needs to say what happened, as fields and as one plain-text message for Send
 * and Wait: the step, the key, when it started, why it is waiting, what the destination check said
 * (or that there was none), and a summary of what was being sent.
 */
export function reviewOf(json: IDataObject, row: LedgerRecord, held: ReturnType<typeof heldRow>): IDataObject {
	const check = checkEvidence(row);
	const why =
		(held.reason && (NEEDS_REVIEW_REASONS as Record<string, string>)[held.reason]) ||
		(held.reason === 'may_have_run' ? 'An earlier run may have done this step and then stopped before it was recorded. Nothing was done again.' : null) ||
		held.detail ||
		'It may have gone out and nobody could tell.';
	const checked = check
		? `${String(check.outcome).replace('_', ' ')}: ${String(check.detail)}`
		: 'none was set up, so nobody looked at the destination';
	const payload = payloadSummary(json);
	const message = [
		`Was "${row.step}" done for ${row.key}? Nothing was done again; it waits for your answer.`,
		'',
		`Step: ${row.step}`,
		`Key: ${row.key}`,
		`Where: ${row.namespace}`,
		`Started: ${when(row.firstSeenAt)}`,
		`Why it waits: ${why}`,
		`Destination check: ${checked}`,
		...(payload.length > 0 ? ['', 'What it was sending:', ...payload] : []),
		'',
		`Answer "${ANSWERS[0].label}" if it is there, "${ANSWERS[1].label}" if it is not, or "${ANSWERS[2].label}" if it must not go out.`,
	].join('\n');
	return {
		namespace: row.namespace,
		key: row.key,
		step: row.step,
		fence: row.fence,
		startedAt: iso(row.firstSeenAt),
		reason: held.reason,
		why,
		check,
		payload,
		title: `Was "${row.step}" done for ${row.key}?`,
		message,
		choices: ANSWERS.map((a) => a.label),
	};
}

const normal = (text: string) => text.toLowerCase().replace(/[^a-z]+/g, ' ').trim();

/** A person's answer, from the review form's dropdown (or the words of it). */
export function answerOf(raw: unknown): Answer {
	const said = typeof raw === 'string' ? normal(raw) : '';
	const answer = ANSWERS.find((a) => normal(a.label) === said || a.decision.replace('_', ' ') === said);
	if (!answer) {
		throw new LedgerInputError(
			`The answer ${typeof raw === 'string' ? JSON.stringify(raw) : 'is missing: it'} is not one of ${ANSWERS.map((a) => `"${a.label}"`).join(', ')}`,
			'Give the review form a dropdown with exactly these three choices, and point "Answer" at that field of the reply (for example {{ $json.data["What happened?"] }}).',
		);
	}
	return answer;
}

/** The row an asked item is about, as Ask Once put it under `review`. */
export function reviewRefOf(given: unknown): ReviewRef & { review: IDataObject; item: IDataObject } {
	let asked = given;
	// A JSON parameter typed (or pasted) as text rather than set by an expression.
	if (typeof asked === 'string') {
		try {
			asked = JSON.parse(asked);
		} catch {
			asked = null;
		}
	}
	const item = typeof asked === 'object' && asked !== null && !Array.isArray(asked) ? (asked as IDataObject) : null;
	const review = item?.review as IDataObject | undefined;
	const ok =
		review &&
		typeof review === 'object' &&
		typeof review.namespace === 'string' &&
		typeof review.key === 'string' &&
		typeof review.step === 'string' &&
		(review.fence === null || typeof review.fence === 'number');
	if (!item || !ok) {
		throw new LedgerInputError(
			'The asked item has no "review" field from Ask Once',
			'Set "Asked Item" to the item Ask Once put out, for example {{ $(\'Ask a Person Once\').item.json }} (use the name of your Ask Once node).',
		);
	}
	return { namespace: review.namespace as string, key: review.key as string, step: review.step as string, fence: review.fence as number | null, review, item };
}
