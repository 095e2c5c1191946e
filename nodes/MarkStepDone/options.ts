import { keepRecordsFor } from '../../lib/n8n/scope';

/** How long Mark Step Done's record is kept, under Options: one spec for the panel and the reader. */
export const KEEP_RECORD = keepRecordsFor('the record', 'Keep Record For');
