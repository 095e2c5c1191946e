import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

import { LedgerError, LedgerInputError } from '../../lib/ledger/errors';
import type { RecordOutcome, RecordRequest, Status } from '../../lib/ledger/types';
import { UNIT_STEP } from '../../lib/ledger/types';
import { assertStep } from '../../lib/ledger/validate';
import { failedItem, toNodeError } from '../../lib/n8n/errors';
import { FACTS_FIELD, factsOf, itemWithFacts, type Outcome } from '../../lib/n8n/facts';
import { parameterSource, type ValueSource } from '../../lib/n8n/keySource';
import { parseJson } from '../GuardedSend/params';
import { openLedger } from '../../lib/n8n/ledgerAccess';
import { authorityFor, START_STEP_TYPE_SUFFIX, unitKeyReader, type UnitKey, type UnitKeyReader } from '../../lib/n8n/lineage';
import { endRegions, leaveItemsOpen } from '../../lib/n8n/openUnits';
import { lostKeyError } from '../../lib/n8n/lostKey';
import { readDurationOption } from '../../lib/n8n/scope';
import { KEEP_RECORD } from './options';

type Final = Exclude<Status, 'in_progress'>;
const FINAL: Final[] = ['completed', 'failed_retryable', 'needs_review'];

interface Config {
	key: UnitKeyReader;
	step: string;
	status: Final;
	/** "Also Record the Unit of Work": applies to items whose step is not the unit itself. */
	completeUnit: boolean;
	externalId: ValueSource;
	result: (itemIndex: number, item: INodeExecutionData) => unknown;
	ttlMs: number;
	/**
	 * Undefined when "Record Even if Another Run Holds the Key" is on: a row another execution has
	 * in progress is then written too. The gate's claim still goes with every write (authorityFor).
	 */
	holder: string | undefined;
	/** What an item that ends a region and carries n8n's error (On Error: Continue) is recorded as. */
	onErrorItem: 'failed' | 'status';
	/** The Start Steps upstream, by the step each begins (to tell an item that never passed its start). */
	starts: Map<string, string>;
}

/** The largest result stored per step, as JSON text (the HTTP response body cap of Guarded Send). */
export const MAX_RESULT_CHARS = 64 * 1024;

/** A result as stored: as it is, or, when its JSON is too long, its start with a truncation note. */
function storedResult(value: unknown): unknown {
	if (value === null || value === undefined) return null;
	const text = JSON.stringify(value);
	if (text === undefined || text.length <= MAX_RESULT_CHARS) return value;
	return { truncated: true, originalLength: text.length, text: text.slice(0, MAX_RESULT_CHARS) };
}

/** Why an item's record was refused, and what to do, in words for the person who built the flow. */
function refusedError(key: string, refused: string[], claimed: boolean): LedgerError {
	const what = `Another run has the key "${key}" now (it holds it, or took it over after this run's claim ran out), so ${refused.join(' and ')} ${refused.length > 1 ? 'were' : 'was'} not recorded`;
	if (claimed) {
		return new LedgerError(
			what,
			'Nothing was overwritten. This run\'s claim from the Dedupe Gate ran out (its Lease) or was released, and another run took the key over: that run records it. Check the key with the Idempotency Ledger node (Get) to see what it recorded; if this happens often, make the Dedupe Gate\'s Lease longer. Only the Idempotency Ledger node (Release) can change what another run recorded.',
		);
	}
	return new LedgerError(
		what,
		'Nothing was overwritten. This run\'s claim ran out or was released, and another run claimed the key. Check the key with the Idempotency Ledger node (Get); turn on "Record Even if Another Run Holds the Key" only if this run\'s result must win.',
	);
}

/** The incoming item as a result, without the ledger facts a gate added to it. */
function itemResult(item: INodeExecutionData): unknown {
	if (!(FACTS_FIELD in item.json)) return item.json;
	const { [FACTS_FIELD]: _facts, ...rest } = item.json;
	return rest;
}

function resultReader(ctx: IExecuteFunctions): Config['result'] {
	const from = ctx.getNodeParameter('resultFrom', 0) as string;
	if (from === 'none') return () => null;
	if (from === 'item') return (_i, item) => itemResult(item);
	if (from !== 'json') throw new LedgerInputError(`Unknown "Store Result" value "${from}"`);
	return (i) => {
		const value = ctx.getNodeParameter('resultJson', i);
		if (typeof value !== 'string') return value ?? null;
		if (value.trim() === '') return null;
		const parsed = parseJson(value);
		if (parsed.ok) return parsed.value;
		throw new LedgerInputError(`The result is not valid JSON: ${parsed.problem}`, 'Check the Result field: it must be JSON, such as {"invoiceId": "in_123"}.');
	};
}

function externalIdText(value: unknown): string | null {
	if (value === undefined || value === null || value === '') return null;
	if (typeof value === 'string') {
		if (value.length > 1000) throw new LedgerInputError(`The external ID is ${value.length} characters long; the limit is 1000`, 'Point External ID at the id field only.');
		return value;
	}
	if (typeof value === 'number' || typeof value === 'bigint') return String(value);
	throw new LedgerInputError(
		`The external ID must be text or a number, but on this item it is ${Array.isArray(value) ? 'a list' : value && typeof value === 'object' ? 'an object' : `a ${typeof value}`}`,
		'Point External ID at a single id field, e.g. {{ $json.id }}.',
	);
}

function readConfig(ctx: IExecuteFunctions): Config {
	const status = ctx.getNodeParameter('status', 0) as Final;
	if (!FINAL.includes(status)) throw new LedgerInputError(`Unknown status "${String(status)}"`, `Use one of: ${FINAL.join(', ')}.`);
	const options = ctx.getNodeParameter('options', 0, {}) as IDataObject;
	const step = assertStep((ctx.getNodeParameter('step', 0, '') as string).trim());
	return {
		key: unitKeyReader(ctx),
		step,
		status,
		completeUnit: options.completeUnit === true,
		externalId: parameterSource(ctx, 'externalId'),
		result: resultReader(ctx),
		ttlMs: readDurationOption(ctx, KEEP_RECORD),
		holder: options.overrideClaim === true ? undefined : `execution:${ctx.getExecutionId() ?? 'unknown'}`,
		onErrorItem: options.errorItems === 'status' ? 'status' : 'failed',
		starts: upstreamStarts(ctx),
	};
}

/** Enabled Start Steps upstream of this node, by the step each begins. */
function upstreamStarts(ctx: IExecuteFunctions): Map<string, string> {
	const starts = new Map<string, string>();
	for (const parent of ctx.getParentNodes(ctx.getNode().name, { includeNodeParameters: true })) {
		if (parent.disabled || !parent.type.endsWith(START_STEP_TYPE_SUFFIX)) continue;
		const step = String((parent as { parameters?: IDataObject }).parameters?.step ?? '').trim();
		if (step !== '' && !starts.has(step)) starts.set(step, parent.name);
	}
	return starts;
}

/**
 * The step an item's record is for. Inside a region (the item came through a Start Step's Run or
 * Check First output), an empty Step means the region's step, and any other name is a mistake.
 * A named step that a Start Step upstream begins needs an item that passed through that start.
 */
function stepFor(config: Config, unit: UnitKey, itemIndex: number, self: string): string {
	const region = unit.region;
	if (region) {
		if (config.step === UNIT_STEP || config.step === region.step) return region.step;
		throw new LedgerInputError(
			`Item ${itemIndex} is inside the region "${region.step}" that "${region.start}" started, but this node records the step "${config.step}"`,
			`Leave Step empty: "${self}" then records the step its Start Step started. Or give both nodes the same Step.`,
		);
	}
	const start = config.starts.get(config.step);
	if (config.step !== UNIT_STEP && start) {
		throw new LedgerInputError(
			`Item ${itemIndex} did not come through "${start}", which starts the step "${config.step}", so there is no start of that step to end here; nothing was recorded`,
			`Connect "${self}" after the nodes of the region that follow the Run (or Check First) output of "${start}". Items from its other outputs are not inside the region.`,
		);
	}
	return config.step;
}

/** Whether n8n handed on this item after its node failed (On Error: Continue): its JSON carries the error. */
const carriesNodeError = (item: INodeExecutionData): boolean =>
	item.error !== undefined || (item.json !== null && typeof item.json === 'object' && item.json.error !== undefined && item.json.error !== null);

export async function executeMarkStepDone(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	const items = this.getInputData();
	const node = this.getNode();
	const continueOnFail = this.continueOnFail();
	let config: Config;
	try {
		config = readConfig(this);
	} catch (error) {
		throw toNodeError(node, error);
	}
	const out: Array<INodeExecutionData | undefined> = new Array(items.length);
	const fail = (index: number, error: unknown) => {
		const nodeError = toNodeError(node, error, index);
		if (!continueOnFail) throw nodeError;
		out[index] = failedItem(node, items[index], index, nodeError);
	};

	// One request (two with "Also Record the Unit of Work") per valid item; bad items write nothing.
	const requests: RecordRequest[] = [];
	const valid: Array<{ index: number; at: number; claimed: boolean; withUnit: boolean; region: boolean }> = [];
	for (let i = 0; i < items.length; i++) {
		try {
			const item = items[i];
			const unit = config.key.read(i, item);
			const { namespace, key } = unit;
			const step = stepFor(config, unit, i, node.name);
			// Inside a region, an item that carries its node's error (On Error: Continue) did not
			// happen, unless the builder said such errors mean it did.
			const failedInside = unit.region !== undefined && config.onErrorItem === 'failed' && carriesNodeError(item);
			const status: Final = failedInside ? 'failed_retryable' : config.status;
			const externalId = externalIdText(config.externalId.read(i, item));
			const result = storedResult(config.result(i, item));
			const withUnit = config.completeUnit && step !== UNIT_STEP;
			valid.push({ index: i, at: requests.length, claimed: unit.claim !== undefined, withUnit, region: unit.region !== undefined });
			requests.push({ namespace, key, step, status, externalId, result, ...authorityFor(unit, step) });
			if (withUnit) {
				requests.push({ namespace, key, step: UNIT_STEP, status, externalId, result, ...authorityFor(unit, UNIT_STEP) });
			}
		} catch (error) {
			fail(i, error);
		}
	}
	if (requests.length === 0) return [out.filter((x): x is INodeExecutionData => x !== undefined)];

	let written: RecordOutcome[];
	try {
		const ledger = await openLedger(this);
		written = await ledger.record(requests, { ttlMs: config.ttlMs, holder: config.holder });
	} catch (error) {
		if (!continueOnFail) throw toNodeError(node, error);
		for (const { index } of valid) fail(index, error);
		return [out.filter((x): x is INodeExecutionData => x !== undefined)];
	}
	// A step recorded as failed or for review is not done, so its unit is not either (lib/n8n/openUnits.ts).
	const notDone = valid.filter(({ at }) => requests[at].status !== 'completed');
	leaveItemsOpen(this, notDone.map(({ index, at }) => ({ index, item: items[index], unit: requests[at] })), config.key.kind === 'lineage');
	// The regions these items were inside are ended, whatever they were recorded as.
	endRegions(this, valid.filter(({ at, region }) => region && written[at].kind === 'written').map(({ at }) => requests[at]));
	for (const { index, at, claimed, withUnit } of valid) {
		const q = requests[at];
		const record = written[at];
		const unit = withUnit ? written[at + 1] : undefined;
		const refused = [
			record.kind === 'lost_lease' ? `the step "${q.step || '(unit)'}"` : null,
			unit?.kind === 'lost_lease' ? 'the unit of work' : null,
		].filter((x): x is string => x !== null);
		if (refused.length > 0 || record.kind !== 'written') {
			const gone = (record.kind === 'lost_lease' && record.missing) || (unit?.kind === 'lost_lease' && unit.missing);
			fail(index, gone ? lostKeyError(this, `the key "${q.key}"`, `so ${refused.join(' and ')} ${refused.length > 1 ? 'were' : 'was'} not recorded`) : refusedError(q.key, refused, claimed));
			continue;
		}
		const facts: IDataObject = { ...factsOf('recorded' as Outcome, q.namespace, q.key, q.step, record.record) };
		delete facts.result;
		if (unit?.kind === 'written') facts.unitStatus = unit.record.status;
		if (q.status !== config.status) {
			facts.detail = 'The item carries the error of the node before it (On Error: Continue), so the step was recorded as failed, retry later: the next run does it again. Set "Items With an Error" to "Record With the Status Above" if such an error means it happened.';
		}
		out[index] = itemWithFacts(items[index], index, facts);
	}
	return [out.filter((x): x is INodeExecutionData => x !== undefined)];
}

