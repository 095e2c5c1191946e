import { updateDisplayOptions, type IDataObject, type INodeProperties } from 'n8n-workflow';

import { assertStep } from '../../../../lib/ledger/validate';
import {
	actorProperty,
	checkEvidence,
	type Execute,
	keyProperty,
	namespaceOf,
	namespaceProperties,
	readActor,
	readChoice,
	readKey,
	readText,
	RESOLVED_TTL_MS,
	runPerItem,
} from '../common';

const properties: INodeProperties[] = [
	...namespaceProperties(),
	keyProperty,
	{
		displayName: 'Release',
		name: 'releaseScope',
		type: 'options',
		options: [
			{ name: 'Every Step of the Key', value: 'key', description: 'The whole unit of work may run again' },
			{ name: 'One Step', value: 'step', description: 'Only this side effect may run again, e.g. the email' },
		],
		default: 'key',
		description: 'What to forget, so that a deliberate replay is let through',
	},
	{
		displayName: 'Step',
		name: 'step',
		type: 'string',
		default: '',
		placeholder: 'e.g. emailSend',
		description: 'The step to release. Leave empty for the unit of work itself.',
		displayOptions: { show: { releaseScope: ['step'] } },
	},
	{
		displayName: 'What Happened',
		name: 'resolution',
		type: 'options',
		options: [
			{
				name: 'Nothing Was Sent (Release Only What Did Not Start Sending)',
				value: 'none',
				description:
					'Frees steps that never started sending. A step that stopped while sending is left as it is and listed, because the message may have gone out.',
			},
			{
				name: 'It Was Sent: Record It as Done',
				value: 'sent',
				description: 'You checked the destination and the message is there. The steps are recorded as completed and will not be sent again.',
			},
			{
				name: 'It Was Not Sent: Send It Again',
				value: 'not_sent',
				description: 'You checked the destination and the message is not there. The steps are freed and the next run sends them, with a new Idempotency-Key.',
			},
			{
				name: 'It Must Not Go Out: Drop It',
				value: 'dropped',
				description: 'Whatever happened, the message must not be sent (any more). The steps are recorded as completed, dropped, and will not be sent.',
			},
		],
		default: 'none',
		description: 'What you know about the steps. A step that may have been sent is never freed without your answer.',
	},
	{
		displayName: 'Release Even if a Run Holds It',
		name: 'evenIfHeld',
		type: 'boolean',
		default: false,
		description:
			'Whether to release a step that a run is working on right now (its lease has not run out). That run can then no longer record anything for it. Leave off unless the run is known to be dead.',
	},
	actorProperty('releasedBy', 'Released By', 'Who released the key, written to the audit table with the time.'),
];

export const description = updateDisplayOptions({ show: { resource: ['key'], operation: ['release'] } }, properties);


/**
 * Release (reset): frees the key's live steps, or one step, so the next run is let through; or
 * records steps that may have been sent as sent. The ledger decides per step (a run holding it, a
 * step that may have gone out) and writes one audit row per step it acted on, in one statement.
 */
export const execute: Execute = async function (items) {
	const namespace = namespaceOf(this);
	let hinted = false;
	return await runPerItem(
		this,
		items,
		(i, item) => {
			const ns = namespace(i, item);
			const key = readKey(this, i);
			const scope = readChoice(this, 'releaseScope', i, 'release', ['key', 'step'] as const);
			const step = scope === 'step' ? assertStep(readText(this, 'step', i, 'step', { max: 200, allowEmpty: true })) : null;
			const resolution = readChoice(this, 'resolution', i, 'what happened', ['none', 'sent', 'not_sent', 'dropped'] as const);
			return {
				namespace: ns,
				key,
				step,
				resolution: resolution === 'none' ? undefined : resolution,
				evenIfHeld: this.getNodeParameter('evenIfHeld', i, false) === true,
				releasedBy: readActor(this, 'releasedBy', i, 'released by'),
			};
		},
		async (ledger, request) => {
			// The evidence a person decides on: what Guarded Send's check found at the destination, per step.
			const before = new Map((await ledger.get(request.namespace, request.key)).map((r) => [r.step, checkEvidence(r)]));
			const steps = await ledger.release({ ...request, ttlMs: RESOLVED_TTL_MS });
			const count = (action: string) => steps.filter((s) => s.action === action).length;
			const refused = steps.filter((s) => s.action === 'refused');
			if (refused.length > 0 && !hinted) {
				hinted = true;
				this.addExecutionHints({
					message: refused.some((s) => s.reason === 'may_have_sent')
						? 'Some steps were not released because they stopped while sending: the message may have gone out. Check the destination, then release them again with "What Happened" set to "It Was Sent" or "It Was Not Sent".'
						: 'Some steps were not released because a run is working on them right now. Wait for its lease to run out, or turn on "Release Even if a Run Holds It" if that run is dead.',
					type: 'warning',
					location: 'outputPane',
				});
			}
			return {
				namespace: request.namespace,
				key: request.key,
				step: request.step,
				released: count('released'),
				recordedSent: count('recorded_sent'),
				recordedDropped: count('recorded_dropped'),
				refused: refused.length,
				steps: steps.map((s): IDataObject => ({ step: s.step, status: s.status, phase: s.phase, action: s.action, reason: s.reason ?? null, check: before.get(s.step) ?? null })),
				releasedBy: request.releasedBy,
				releasedAt: new Date().toISOString(),
			};
		},
	);
};
