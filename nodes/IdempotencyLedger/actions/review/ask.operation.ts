import { updateDisplayOptions, type INodeProperties } from 'n8n-workflow';

import { actorProperty, type Execute, readActor, runPerItem } from '../common';
import { askedNamespace, askedStep, heldRow, reviewOf } from './evidence';

const properties: INodeProperties[] = [
	{
		displayName:
			'Connect this to a Needs Review output of Guarded Send or Start Step. Each step is asked about once, however often this runs, and one per run (Send and Wait sends one message per run). Then send "review.message" with a Send and Wait node and pass its answer to Review → Settle.',
		name: 'askNotice',
		type: 'notice',
		default: '',
	},
	actorProperty('askedBy', 'Asked By', 'Who asks, kept on the mark that says the step was asked about.'),
];

export const description = updateDisplayOptions({ show: { resource: ['review'], operation: ['ask'] } }, properties);

/** How long the "asked" mark is kept: a review left unanswered longer is asked again. */
const ASKED_TTL_MS = 90 * 86_400_000;

/**
 * Ask Once: the first Needs Review item whose step still waits for a person, and that nobody asked
 * about yet, with the evidence under `review`. One per run, because Send and Wait sends one
 * message per run (about its first item): another item is neither marked nor put out, and stays
 * on Needs Review for a later run. The "asked" mark is a ledger claim, so two runs (or two n8n
 * processes in queue mode) ask once between them. Items not asked are left out, and a hint says
 * how many and why.
 */
export const execute: Execute = async function (items) {
	const notAsked = { asked: 0, settled: 0, later: 0 };
	let askedOne = false;
	const out = await runPerItem(
		this,
		items,
		(i, item) => ({ held: heldRow(item.json), json: item.json, by: readActor(this, 'askedBy', i, 'asked by') }),
		async (ledger, { held, json, by }) => {
			const row = (await ledger.get(held.namespace, held.key)).find((r) => r.step === held.step);
			if (!row || row.status !== 'needs_review') {
				notAsked.settled++;
				return [];
			}
			if (askedOne) {
				notAsked.later++;
				return [];
			}
			const ref = { namespace: row.namespace, key: row.key, step: row.step, fence: row.fence };
			const [mark] = await ledger.claim([{ namespace: askedNamespace(ref.namespace), key: ref.key, step: askedStep(ref), fingerprint: null }], {
				mode: 'seen',
				holder: by,
				leaseMs: 60_000,
				ttlMs: ASKED_TTL_MS,
			});
			if (mark.kind !== 'claimed') {
				notAsked.asked++;
				return [];
			}
			askedOne = true;
			return { ...json, review: reviewOf(json, row, held) };
		},
	);
	if (notAsked.asked + notAsked.settled + notAsked.later > 0) {
		this.addExecutionHints({
			message: [
				notAsked.asked > 0 ? `${notAsked.asked} item(s) were asked about before and are not asked again.` : '',
				notAsked.settled > 0 ? `${notAsked.settled} item(s) do not wait for a person (any more): settled already, or the next run tries them again.` : '',
				notAsked.later > 0
					? `${notAsked.later} more item(s) wait for a person: Send and Wait asks about one item per run, so they are asked about on later runs (put Loop Over Items with a batch size of 1 before this node to ask about each in turn).`
					: '',
			]
				.filter(Boolean)
				.join(' '),
			type: 'info',
			location: 'outputPane',
		});
	}
	return out;
};
