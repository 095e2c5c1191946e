import type { DurationSpec } from '../../lib/n8n/scope';

/**
 * Guarded Send's durations, kept under Options: one spec each serves the panel
 * (`durationOptions`) and the reader (`readDurationOption`).
 */
export const HOLD_STEP: DurationSpec = {
	name: 'lease',
	displayName: 'Hold Step For',
	amount: 5,
	unit: 'minutes',
	description:
		'The longest this run may keep the step to itself while it sends. While it runs it keeps the step, up to this long; if n8n stops it without finishing (a crash), another run may take the step over within 30 seconds (or this, if shorter).',
	what: 'hold time ("Hold Step For")',
};

export const KEEP_RECORDS: DurationSpec = {
	name: 'retention',
	displayName: 'Keep Records For',
	amount: 30,
	unit: 'days',
	description: 'How long a send is remembered. After that the key counts as new again.',
	what: 'retention ("Keep Records For")',
};
