import { holdStepFor, keepRecordsFor } from '../../lib/n8n/scope';

/** Start Step's durations, under Options: one spec each for the panel and the reader. */
export const HOLD_STEP = holdStepFor(
	10,
	'The longest one run may take inside the region. While the run is alive it keeps the step (another run gets In Progress); if it dies, the step is free for a check within about 30 seconds. A run still inside after this time loses the step: the next run goes to Check First or Needs Review, never straight to Run.',
);

export const KEEP_RECORDS = keepRecordsFor('a done step');
