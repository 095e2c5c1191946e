/**
 * Start Step: the start of a guarded region. The nodes after it (any n8n node: HubSpot, Gmail, HTTP
 * Request, Postgres…) run once per key, and Mark Step Done ends the region by recording the step.
 *
 *   claim (namespace, key, step) ──► markPhase('sending') ──► Run ──► [the region's nodes] ──► Mark Step Done
 *
 * The claim takes a short lease that the lease keeper renews while this run lives, up to "Hold Step
 * For" (lib/n8n/leaseKeeper.ts), and the step is marked `sending` before any item leaves on Run: from
 * then on the ledger knows the region may have acted. A later run that meets the step:
 *   - completed: Skipped, with the stored result;
 *   - held by a live run: In Progress (nothing runs twice at once, however long the region takes);
 *   - left `sending` by a run that died inside the region: never Run. It goes to Check First, where
 *     the builder looks the action up at the destination and records it (found) or runs the region
 *     (not found), or, without a check, to Needs Review, recorded for a person with the evidence;
 *   - never started, or recorded as failed, retry later: Run.
 */
import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';
import { performance } from 'perf_hooks';

import { LedgerError, LedgerInputError } from '../../lib/ledger/errors';
import type { ClaimOutcome, FencedRow, Ledger, LedgerRecord, RecordRequest, RowId } from '../../lib/ledger/types';
import { assertStep } from '../../lib/ledger/validate';
import { deferBlocked } from '../../lib/n8n/countBuffer';
import { failedItem, toNodeError } from '../../lib/n8n/errors';
import { factsOf, inProgressReason, itemWithFacts, type Outcome } from '../../lib/n8n/facts';
import { keepLeases, leasePlan } from '../../lib/n8n/leaseKeeper';
import { openLedger } from '../../lib/n8n/ledgerAccess';
import { unitKeyReader, type UnitKey } from '../../lib/n8n/lineage';
import { leaveItemsOpen, startRegions } from '../../lib/n8n/openUnits';
import { readDurationOption } from '../../lib/n8n/scope';
import { HOLD_STEP, KEEP_RECORDS } from './options';

/** The recovery point: the region may have acted (the same phase Guarded Send marks before sending). */
export const PHASE_SENDING = 'sending';

export const RUN = 0;
export const SKIPPED = 1;
export const REVIEW = 2;
export const IN_PROGRESS = 3;
/** Only when "If a Run Died Inside the Region" is "Send to Check First". */
export const CHECK_FIRST = 4;

/** Claims per ledger call. */
const CHUNK = 500;

interface Config {
	step: string;
	leaseMs: number;
	ttlMs: number;
	onUncertain: 'check' | 'review';
}

interface Prepared {
	index: number;
	row: RowId;
	unit: UnitKey;
}

interface Routed {
	output: number;
	facts: IDataObject;
	error?: NodeOperationError;
}

const MARK_STEP_DONE_SUFFIX = '.markStepDone';

function readConfig(ctx: IExecuteFunctions): Config {
	const stepText = String(ctx.getNodeParameter('step', 0, '') ?? '').trim();
	if (stepText === '') {
		throw new LedgerInputError(
			'"Step" is empty',
			'Give the step a name that says what the region does, e.g. "create contact". The Mark Step Done at the end of the region records that step.',
		);
	}
	const onUncertain = ctx.getNodeParameter('onUncertain', 0, 'review') as string;
	if (onUncertain !== 'check' && onUncertain !== 'review') throw new LedgerInputError(`Unknown "If a Run Died Inside the Region" value "${onUncertain}"`);
	return { step: assertStep(stepText), leaseMs: readDurationOption(ctx, HOLD_STEP), ttlMs: readDurationOption(ctx, KEEP_RECORDS), onUncertain };
}

/**
 * A region must end: without a Mark Step Done after this node, nothing records the step, and every
 * later run would find it "may have acted". Refused before anything is claimed.
 */
function assertRegionEnds(ctx: IExecuteFunctions): void {
	const self = ctx.getNode().name;
	const ends = ctx.getChildNodes(self).some((node) => !node.disabled && node.type.endsWith(MARK_STEP_DONE_SUFFIX));
	if (!ends) {
		throw new LedgerInputError(
			`"${self}" starts a region that never ends: no Mark Step Done comes after it`,
			'Add a Mark Step Done after the last node of the region (for example after the HubSpot or HTTP Request node), and leave its Step empty: it records the step this node started. Without it, every later run would find the step "may have run" and stop for a check.',
		);
	}
}

const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);

/** The ledger facts added to an output item. Only items that hold the claim (Run, Check First) carry its fence and region. */
function facts(outcome: string, node: string, row: RowId, record: LedgerRecord | null, holdsClaim: boolean, extra: IDataObject = {}): IDataObject {
	const base = factsOf(outcome as Outcome, row.namespace, row.key, row.step, record);
	delete base.result;
	if (holdsClaim) base.region = node;
	else base.fence = null;
	return { ...base, ...extra };
}

export async function executeStartStep(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	const items = this.getInputData();
	const node = this.getNode();
	const continueOnFail = this.continueOnFail();
	const knownExecution = this.getExecutionId();
	const holder = `execution:${knownExecution ?? 'unknown'}`;
	// n8n's Retry On Fail runs this node again in the same execution: a step this execution still
	// holds was claimed by the failed try; the phase it reached decides (Check First if it marked).
	const reclaimOwnLease = knownExecution !== undefined && knownExecution !== '';
	const timeZone = this.getTimezone?.() ?? 'UTC';

	let config: Config;
	let keys: ReturnType<typeof unitKeyReader>;
	try {
		config = readConfig(this);
		assertRegionEnds(this);
		keys = unitKeyReader(this);
	} catch (error) {
		throw toNodeError(node, error);
	}
	const outputCount = config.onUncertain === 'check' ? 5 : 4;
	const routed: Array<Routed | undefined> = new Array(items.length);
	const units: Array<UnitKey | undefined> = new Array(items.length);
	const route = (index: number, output: number, f: IDataObject) => {
		routed[index] = { output, facts: f };
	};
	const fail = (index: number, error: unknown) => {
		const nodeError = toNodeError(node, error, index);
		if (!continueOnFail) throw nodeError;
		routed[index] = { output: REVIEW, facts: { outcome: 'error' }, error: nodeError };
	};

	// 1. Every item's key first: bad input fails its item before anything is claimed.
	const prepared: Prepared[] = [];
	for (let i = 0; i < items.length; i++) {
		try {
			const unit = keys.read(i, items[i]);
			if (unit.region && unit.region.step === config.step) {
				throw new LedgerInputError(
					`Item ${i} is already inside the region "${config.step}" that "${unit.region.start}" started, so "${node.name}" would start the same step twice`,
					`A step is started once per key. Remove one of the two Start Step nodes, or give this one a different Step.`,
				);
			}
			units[i] = unit;
			prepared.push({ index: i, unit, row: { namespace: unit.namespace, key: unit.key, step: config.step } });
		} catch (error) {
			fail(i, error);
		}
	}

	if (prepared.length > 0) {
		let ledger: Ledger | null = null;
		try {
			ledger = await openLedger(this);
		} catch (error) {
			if (!continueOnFail) throw toNodeError(node, error);
			for (const p of prepared) fail(p.index, error);
		}
		if (ledger) {
			try {
				for (let start = 0; start < prepared.length; start += CHUNK) await runChunk(this, ledger, prepared.slice(start, start + CHUNK));
			} catch (error) {
				// The ledger failed mid-run (fail closed: nothing more leaves on Run).
				if (!continueOnFail) throw toNodeError(node, error);
				for (const p of prepared) if (!routed[p.index] || routed[p.index]!.output === RUN) fail(p.index, error);
			}
		}
	}
	return collect(this);

	async function runChunk(ctx: IExecuteFunctions, ledger: Ledger, chunk: Prepared[]): Promise<void> {
		const plan = leasePlan(config.leaseMs);
		const claimedFrom = performance.now();
		const outcomes: ClaimOutcome[] = await ledger.claim(
			chunk.map((p) => ({ ...p.row, fingerprint: null })),
			{ mode: 'lease', holder, leaseMs: plan.claimMs, ttlMs: config.ttlMs, reclaimOwnLease },
		);
		deferBlocked(ctx, ledger, chunk.map((p) => p.row), outcomes);
		const toRun: Array<{ p: Prepared; record: LedgerRecord }> = [];
		const uncertain: Array<{ p: Prepared; record: LedgerRecord }> = [];
		const reviews: Array<{ p: Prepared; record: LedgerRecord; request: RecordRequest; detail: string }> = [];
		const deferred: Array<{ p: Prepared; error: LedgerError }> = [];

		chunk.forEach((p, r) => {
			const outcome = outcomes[r];
			switch (outcome.kind) {
				case 'claimed': {
					const diedInside = outcome.previousStatus === 'in_progress' && outcome.previousPhase === PHASE_SENDING;
					if (diedInside) uncertain.push({ p, record: outcome.record });
					else toRun.push({ p, record: outcome.record });
					break;
				}
				case 'duplicate': {
					const record = outcome.record;
					if (record.status === 'needs_review') {
						route(p.index, REVIEW, facts('needs_review', node.name, p.row, record, false, {
							reason: 'marked_for_review',
							detail: 'An earlier run put this step on Needs Review. Find out whether it happened, then release the key with the Idempotency Ledger node (Release, saying whether it happened).',
							previousResult: (record.result ?? null) as IDataObject | null,
						}));
					} else {
						route(p.index, SKIPPED, facts('skipped', node.name, p.row, record, false, {
							reason: 'already_done',
							detail: `This step was done ${iso(record.updatedAt) ?? 'earlier'}; its nodes were not run again`,
							result: (record.result ?? null) as IDataObject | null,
						}));
					}
					break;
				}
				case 'in_progress':
					route(p.index, IN_PROGRESS, facts('in_progress', node.name, p.row, outcome.record, false, {
						reason: 'in_progress',
						detail: `Another run is inside this step right now; its nodes were not run here. ${inProgressReason(outcome.record, holder, timeZone)}`,
					}));
					break;
				case 'batch_duplicate':
					// Same key earlier in this input: that item runs the step; this one must not.
					route(p.index, IN_PROGRESS, facts('in_progress', node.name, p.row, null, false, {
						reason: 'same_key_earlier_in_input',
						detail: `Item ${chunk[outcome.firstIndex].index} of this input has the same key and runs the step; this item's copy was not run`,
						firstItem: chunk[outcome.firstIndex].index,
					}));
					break;
				case 'mismatch':
					// Claims carry no fingerprint, so the ledger never answers this; kept for the contract's sake.
					route(p.index, REVIEW, facts('needs_review', node.name, p.row, outcome.record, false, { reason: 'mismatch' }));
					break;
			}
		});

		// A run died inside the region: it may have acted. Never Run; check, or a person decides.
		for (const { p, record } of uncertain) {
			const since = iso(record.firstSeenAt);
			const detail = `A run started this step at ${since} and stopped before Mark Step Done recorded it, so its nodes may have acted`;
			if (config.onUncertain === 'check') {
				route(p.index, CHECK_FIRST, facts('check_first', node.name, p.row, record, true, {
					reason: 'may_have_run',
					detail: `${detail}. Look it up at the destination: if it is there, record it with Mark Step Done (Completed); if not, run the region's nodes.`,
					startedAt: since,
				}));
			} else {
				const evidence = { reason: 'may_have_run', detail: `${detail}. Find out whether it happened, then release the key with the Idempotency Ledger node (Release, saying whether it happened).`, startedAt: since };
				reviews.push({ p, record, detail: evidence.detail, request: { ...p.row, status: 'needs_review', fence: record.fence, result: { ...evidence, executionId: knownExecution ?? null } } });
			}
		}

		// The recovery point before anything leaves on Run, in one call.
		if (toRun.length > 0) {
			const marked = await ledger.markPhase(toRun.map((s) => ({ ...s.p.row, fence: s.record.fence as number })), PHASE_SENDING);
			toRun.forEach((s, n) => {
				if (marked[n]) {
					route(s.p.index, RUN, facts('run', node.name, s.p.row, s.record, true, { reason: s.record.previousStatus === 'failed_retryable' ? 'retry' : 'new' }));
				} else {
					deferred.push({ p: s.p, error: lostClaim(s.p) });
				}
			});
		}
		if (reviews.length > 0) {
			const written = await ledger.record(reviews.map((x) => x.request), { ttlMs: config.ttlMs, holder });
			reviews.forEach((x, n) => {
				const outcome = written[n];
				if (outcome.kind !== 'written') deferred.push({ p: x.p, error: lostClaim(x.p) });
				else route(x.p.index, REVIEW, facts('needs_review', node.name, x.p.row, outcome.record, false, { reason: 'may_have_run', detail: x.detail, startedAt: iso(x.record.firstSeenAt) }));
			});
		}
		// Run and Check First keep the step while this run lives; a crash frees it within about 30 s.
		const inside = [...toRun, ...uncertain].filter((s) => routed[s.p.index]?.output === RUN || routed[s.p.index]?.output === CHECK_FIRST);
		keepLeases(ctx, ledger, inside.map((s): FencedRow => ({ ...s.p.row, fence: s.record.fence as number })), plan, claimedFrom);
		startRegions(ctx, inside.map((s) => s.p.row));
		for (const { p, error } of deferred) fail(p.index, error);
	}

	function lostClaim(p: Prepared): LedgerError {
		return new LedgerError(
			`Another run took the step "${p.row.step}" of the key "${p.row.key}" before this run could start it, so its nodes were not run`,
			'Nothing was run twice. Check the key with the Idempotency Ledger node (Get) to see what the other run recorded.',
		);
	}

	function collect(ctx: IExecuteFunctions): INodeExecutionData[][] {
		// Not Run and not Skipped: the step is not done, so the unit is not either (lib/n8n/openUnits.ts).
		const open = items.flatMap((item, index) => {
			const output = routed[index]?.output;
			return output === RUN || output === SKIPPED || output === CHECK_FIRST ? [] : [{ index, item, unit: units[index] }];
		});
		leaveItemsOpen(ctx, open, keys.kind === 'lineage');
		const outputs: INodeExecutionData[][] = Array.from({ length: outputCount }, () => []);
		for (let i = 0; i < items.length; i++) {
			const r = routed[i];
			if (!r) continue;
			outputs[r.output].push(r.error ? failedItem(node, items[i], i, r.error) : itemWithFacts(items[i], i, r.facts));
		}
		return outputs;
	}
}
