import type { IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

import { executionOf } from './executionEnd';
import { lineageResolver, type LineageResolver } from './lineage';

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

/** An item a node did not finish, with the unit it acted on (when its key could be read). */
export interface UnfinishedItem {
	index: number;
	item: INodeExecutionData;
	unit: UnitId | undefined;
}

/**
 * Leaves open the units of these items: the one the node acted on, and, when the node was given a
 * key of its own ("Key From: Expression"), also the key of the Dedupe Gate the item came through
 * (by lineage, where it can be traced), so that a gate keyed on something else does not close its
 * key behind a send that did not go out.
 */
export function leaveItemsOpen(ctx: IExecuteFunctions, items: UnfinishedItem[], keyFromGate: boolean): void {
	if (items.length === 0 || !executionOf(ctx)) return;
	const units: UnitId[] = [];
	let lineage: LineageResolver | null = null;
	for (const { index, item, unit } of items) {
		if (unit) units.push(unit);
		if (keyFromGate) continue;
		try {
			lineage ??= lineageResolver(ctx);
			units.push(lineage.resolve(index, item));
		} catch {
			// No Dedupe Gate upstream, or the trail to it breaks: there is no gate key to leave open.
		}
	}
	leaveUnitsOpen(ctx, units);
}
