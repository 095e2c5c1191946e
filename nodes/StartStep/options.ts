import type { DurationSpec } from '../../lib/n8n/scope';

/** Start Step's durations, under Options: one spec each for the panel and the reader. */
export const HOLD_STEP: DurationSpec = {
	name: 'lease',
	displayName: 'Hold Step For',
	amount: 10,
	unit: 'minutes',
	description:
		'The longest one run may take inside the region. While the run is alive it keeps the step (another run gets In Progress); if it dies, the step is free for a check within about 30 seconds. A run still inside after this time loses the step: the next run goes to Check First or Needs Review, never straight to Run.',
	what: 'hold time ("Hold Step For")',
};

export const KEEP_RECORDS: DurationSpec = {
	name: 'retention',
	displayName: 'Keep Records For',
	amount: 30,
	unit: 'days',
	description: 'How long a done step is remembered. After that the key counts as new again.',
	what: 'retention ("Keep Records For")',
};
