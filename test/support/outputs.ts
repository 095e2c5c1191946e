/**
 * The output indexes of our nodes, as the engine tests read a run's outputs. Written here, not
 * imported from the nodes, so that a node whose outputs moved fails the tests.
 */

/** Dedupe Gate. */
export const GATE_OUTPUT = { NEW: 0, DUPLICATE: 1, IN_PROGRESS: 2 } as const;

/** Guarded Send. */
export const SEND_OUTPUT = { SENT: 0, SKIPPED: 1, REVIEW: 2, IN_PROGRESS: 3 } as const;

/** Start Step. */
export const START_OUTPUT = { RUN: 0, SKIPPED: 1, REVIEW: 2, IN_PROGRESS: 3, CHECK_FIRST: 4 } as const;
