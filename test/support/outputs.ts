/**
 * The output indexes of our nodes, as the engine tests read a run's outputs. Written here, not
 * imported from the nodes, so that a node whose outputs moved fails the tests.
 */
import type { INodeExecutionData } from 'n8n-workflow';

import type { EngineRunResult } from './engine';

/** Dedupe Gate. */
export const GATE_OUTPUT = { NEW: 0, DUPLICATE: 1, IN_PROGRESS: 2 } as const;

/** Guarded Send. */
export const SEND_OUTPUT = { SENT: 0, SKIPPED: 1, REVIEW: 2, IN_PROGRESS: 3 } as const;

/** Start Step. */
export const START_OUTPUT = { RUN: 0, SKIPPED: 1, REVIEW: 2, IN_PROGRESS: 3, CHECK_FIRST: 4 } as const;

/**
 * Which of `node`'s outputs (named `names`, in their order) the run's one item left on, and its
 * facts; throws, saying what came out of `what`, unless exactly one item did.
 */
export function onlyOutcome<N extends string, F = Record<string, unknown>>(result: EngineRunResult, node: string, names: readonly N[], what = node): { output: N; facts: F } {
	const outputs = result.outputs(node);
	const hits = names.flatMap((name, i) => (outputs[i] ?? []).map((item: INodeExecutionData) => ({ output: name, facts: item.json.idempotency as F })));
	if (hits.length !== 1) throw new Error(`expected one item out of ${what}, got ${JSON.stringify(hits)} (error: ${result.error?.message})`);
	return hits[0];
}
