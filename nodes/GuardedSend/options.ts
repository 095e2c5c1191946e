import { holdStepFor, keepRecordsFor } from '../../lib/n8n/scope';

/**
 * Guarded Send's durations, kept under Options: one spec each serves the panel
 * (`durationOptions`) and the reader (`readDurationOption`).
 */
export const HOLD_STEP = holdStepFor(
	5,
	'The longest this run may keep the step to itself while it sends. While it runs it keeps the step, up to this long; if n8n stops it without finishing (a crash), another run may take the step over within 30 seconds (or this, if shorter).',
);

export const KEEP_RECORDS = keepRecordsFor('a send');
