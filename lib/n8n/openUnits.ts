import type { IExecuteFunctions } from 'n8n-workflow';

import { executionOf } from './executionEnd';

/**
 * Units of work that a node of this execution left not done: a Guarded Send whose send did not go
 * out (failed, retry later; Needs Review; another run sending it) or a Mark Step Done that recorded
 * a step as failed or for review. A Dedupe Gate that marks its keys done when the execution
 * succeeds (its default) lets these keys through again instead, so that the next delivery takes
 * the send or step up again rather than meeting a completed unit.
 *
 * Kept in memory per execution (keyed by the execution's hooks object, see executionEnd.ts): the
 * nodes and the gate's end handler run in the same process, a queue-mode worker included. On an
 * n8n without execution hooks nothing is kept, and nothing reads it either.
 */
export interface UnitId {
	namespace: string;
	key: string;
}

const openByExecution = new WeakMap<object, Set<string>>();

const idOf = (unit: UnitId) => `${unit.namespace}\u0000${unit.key}`;

/** Marks these units as left not done by this execution. */
export function leaveUnitsOpen(ctx: IExecuteFunctions, units: Iterable<UnitId>): void {
	const execution = executionOf(ctx);
	if (!execution) return;
	let open = openByExecution.get(execution);
	for (const unit of units) {
		if (!open) openByExecution.set(execution, (open = new Set()));
		open.add(idOf(unit));
	}
}

/** Asks, at any later time (the end of the execution), whether a node of this execution left the unit open. */
export function openUnitsOf(ctx: IExecuteFunctions): (unit: UnitId) => boolean {
	const execution = executionOf(ctx);
	return (unit) => (execution ? (openByExecution.get(execution)?.has(idOf(unit)) ?? false) : false);
}
