/**
 * The margin added to a configured time limit when a test checks that a wait was bounded. It is
 * an upper bound only (a guard against hangs and against the old 10 s and 62 s waits), generous
 * enough for a machine whose cores are all busy; a test never asserts that something was fast.
 */
export const LOADED_MACHINE_MARGIN_MS = 5_000;

