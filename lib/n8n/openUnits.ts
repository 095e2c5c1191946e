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
/** Regions a Start Step of this execution began: unit id → the steps not yet ended by Mark Step Done. */
const regionsByExecution = new WeakMap<object, Map<string, Set<string>>>();

const idOf = (unit: UnitId) => `${unit.namespace}\u0000${unit.key}`;

/** A guarded region of one unit: the step a Start Step claimed for it. */
export interface RegionId extends UnitId {
	step: string;
}

/**
 * A Start Step began these regions: their units are not done until a Mark Step Done ends each
 * region (records its step, whatever the status). An execution that succeeds with a region still
 * open (the item never reached the end: a filter dropped it, a branch was not wired) leaves its
 * unit open, so that the next delivery reaches the Start Step, which then finds the step it
 * cannot vouch for (Check First or Needs Review) instead of a unit marked done over it.
 */
export function startRegions(ctx: IExecuteFunctions, regions: Iterable<RegionId>): void {
	const execution = executionOf(ctx);
	if (!execution) return;
	let started = regionsByExecution.get(execution);
	for (const region of regions) {
		if (!started) regionsByExecution.set(execution, (started = new Map()));
		const id = idOf(region);
		let steps = started.get(id);
		if (!steps) started.set(id, (steps = new Set()));
		steps.add(region.step);
	}
}

/** A Mark Step Done recorded these steps: their regions are ended. */
export function endRegions(ctx: IExecuteFunctions, regions: Iterable<RegionId>): void {
	const execution = executionOf(ctx);
	const started = execution ? regionsByExecution.get(execution) : undefined;
	if (!started) return;
	for (const region of regions) {
		const id = idOf(region);
		const steps = started.get(id);
		if (!steps) continue;
		steps.delete(region.step);
		if (steps.size === 0) started.delete(id);
	}
}

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

/**
 * Asks, at any later time (the end of the execution), whether a node of this execution left the
 * unit open, or began a region of it that no Mark Step Done ended.
 */
export function openUnitsOf(ctx: IExecuteFunctions): (unit: UnitId) => boolean {
	const execution = executionOf(ctx);
	return (unit) => {
		if (!execution) return false;
		const id = idOf(unit);
		return (openByExecution.get(execution)?.has(id) ?? false) || (regionsByExecution.get(execution)?.has(id) ?? false);
	};
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
