import { updateDisplayOptions, type IDataObject, type INodeProperties } from 'n8n-workflow';

import { type Execute, readActor, RESOLVED_TTL_MS, runPerItem } from '../common';
import { ANSWERS, answerOf, reviewRefOf } from './evidence';

const properties: INodeProperties[] = [
	{
		displayName: 'Asked Item',
		name: 'askedItem',
		type: 'json',
		default: "={{ $('Ask a Person Once').item.json }}",
		required: true,
		description: 'The item Ask Once put out for this answer. Use the name of your Ask Once node.',
	},
	{
		displayName: 'Answer',
		name: 'answer',
		type: 'string',
		default: '={{ $json.data["What happened?"] }}',
		required: true,
		description: `The person's answer: ${ANSWERS.map((a) => `"${a.label}"`).join(', ')}. By default the "What happened?" field of Send and Wait's form.`,
	},
	{
		displayName: 'Answered By',
		name: 'answeredBy',
		type: 'string',
		default: '={{ $json.data["Your name"] }}',
		description: 'Who answered, written to the audit table with the time. By default the "Your name" field of the form. Leave empty to record this workflow and execution.',
	},
];

export const description = updateDisplayOptions({ show: { resource: ['review'], operation: ['settle'] } }, properties);

/** When the person answered, as Send and Wait says (`data.respondedAt`); the audit row keeps the ledger's time. */
const respondedAt = (json: IDataObject) => ((json.data as IDataObject | undefined)?.respondedAt as string | undefined) ?? null;


const OUTCOME = {
	sent: 'Recorded as sent: it will not be sent again.',
	send_again: 'Freed: it goes out once more, with a new Idempotency-Key, when this item reaches the step again.',
	drop: 'Recorded as dropped: it will not be sent.',
} as const;

/**
 * Settle: a person's answer becomes the ledger's decision on the step they were asked about, only
 * if the step is still as they saw it (waiting for a person, the same incarnation). A second answer,
 * or one after the step was settled another way, changes nothing and says so. Puts out the held
 * item again, with the decision under `review`, so the flow can take it back to its step.
 */
export const execute: Execute = async function (items) {
	return await runPerItem(
		this,
		items,
		(i) => ({
			ref: reviewRefOf(this.getNodeParameter('askedItem', i) as unknown),
			answer: answerOf(this.getNodeParameter('answer', i, '') as unknown),
			by: readActor(this, 'answeredBy', i, 'answered by'),
		}),
		async (ledger, { ref, answer, by }, i) => {
			const steps = await ledger.release({
				namespace: ref.namespace,
				key: ref.key,
				step: ref.step,
				releasedBy: by,
				resolution: answer.resolution,
				onlyIf: { status: 'needs_review', fence: ref.fence },
				ttlMs: RESOLVED_TTL_MS,
			});
			const applied = steps.length === 1 && steps[0].action !== 'refused';
			let outcome: string = OUTCOME[answer.decision];
			if (!applied) {
				const now = (await ledger.get(ref.namespace, ref.key)).find((r) => r.step === ref.step);
				const settledBy = (now?.result as IDataObject | null)?.resolvedBy;
				outcome = now
					? `Nothing changed: the step was settled already (it is ${now.status.replace('_', ' ')}${typeof settledBy === 'string' ? `, by ${settledBy}` : ''}).`
					: 'Nothing changed: the step was settled already (released, or its record has expired).';
			}
			const { review: _asked, ...held } = ref.item;
			void _asked;
			return {
				...held,
				review: { ...ref.review, decision: answer.decision, answer: answer.label, answeredBy: by, answeredAt: respondedAt(items[i].json), applied, outcome },
			};
		},
	);
};
