import type { DurationSpec } from '../../lib/n8n/scope';

/** How long Mark Step Done's record is kept, under Options: one spec for the panel and the reader. */
export const KEEP_RECORD: DurationSpec = {
	name: 'retention',
	displayName: 'Keep Record For',
	amount: 30,
	unit: 'days',
	description: 'How long the record is remembered. After that the key counts as new again.',
	what: 'retention ("Keep Record For")',
};
