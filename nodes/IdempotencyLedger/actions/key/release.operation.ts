import {
	updateDisplayOptions,
	type IExecuteFunctions,
	type INodeExecutionData,
	type INodeProperties,
} from 'n8n-workflow';

import { assertStep } from '../../../../lib/ledger/validate';
import {
	actorProperty,
	keyProperty,
	namespaceOf,
	namespaceProperties,
	readActor,
	readChoice,
	readKey,
	readText,
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
	actorProperty('releasedBy', 'Released By', 'Who released the key, written to the audit table with the time.'),
];

export const description = updateDisplayOptions({ show: { resource: ['key'], operation: ['release'] } }, properties);

/**
 * Release (reset): deletes the key's live rows, or one step's, so the next run is let through.
 * The ledger writes one audit row per released row with who and when, in the same statement.
 */
export async function execute(this: IExecuteFunctions, items: INodeExecutionData[]): Promise<INodeExecutionData[]> {
	const namespace = namespaceOf(this);
	return await runPerItem(
		this,
		items,
		(i, item) => {
			const ns = namespace(i, item);
			const key = readKey(this, i);
			const scope = readChoice(this, 'releaseScope', i, 'release', ['key', 'step'] as const);
			const step = scope === 'step' ? assertStep(readText(this, 'step', i, 'step', { max: 200, allowEmpty: true })) : null;
			return { namespace: ns, key, step, releasedBy: readActor(this, 'releasedBy', i, 'released by') };
		},
		async (ledger, { namespace, key, step, releasedBy }) => {
			const released = await ledger.release(namespace, key, step, releasedBy);
			return { namespace, key, step, released, releasedBy, releasedAt: new Date().toISOString() };
		},
	);
}
