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
import { authorityFor, unitKeyReader, type UnitKeyReader } from '../../lib/n8n/lineage';
import { leaveItemsOpen } from '../../lib/n8n/openUnits';
import { readDurationOption } from '../../lib/n8n/scope';
import { KEEP_RECORD } from './options';

type Final = Exclude<Status, 'in_progress'>;
const FINAL: Final[] = ['completed', 'failed_retryable', 'needs_review'];

interface Config {
	key: UnitKeyReader;
	step: string;
	status: Final;
	alsoUnit: boolean;
	externalId: ValueSource;
	result: (itemIndex: number, item: INodeExecutionData) => unknown;
	ttlMs: number;
	/**
	 * Undefined when "Record Even if Another Run Holds the Key" is on: a row another execution has
	 * in progress is then written too. The gate's claim still goes with every write (authorityFor).
	 */
	holder: string | undefined;
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
		alsoUnit: step !== UNIT_STEP && options.completeUnit === true,
		externalId: parameterSource(ctx, 'externalId'),
		result: resultReader(ctx),
		ttlMs: readDurationOption(ctx, KEEP_RECORD),
		holder: options.overrideClaim === true ? undefined : `execution:${ctx.getExecutionId() ?? 'unknown'}`,
	};
}

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
	const valid: Array<{ index: number; at: number; claimed: boolean }> = [];
	for (let i = 0; i < items.length; i++) {
		try {
			const item = items[i];
			const unit = config.key.read(i, item);
			const { namespace, key } = unit;
			const externalId = externalIdText(config.externalId.read(i, item));
			const result = storedResult(config.result(i, item));
			valid.push({ index: i, at: requests.length, claimed: unit.claim !== undefined });
			requests.push({ namespace, key, step: config.step, status: config.status, externalId, result, ...authorityFor(unit, config.step) });
			if (config.alsoUnit) {
				requests.push({ namespace, key, step: UNIT_STEP, status: config.status, externalId, result, ...authorityFor(unit, UNIT_STEP) });
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
	if (config.status !== 'completed') {
		leaveItemsOpen(this, valid.map(({ index, at }) => ({ index, item: items[index], unit: requests[at] })), config.key.kind === 'lineage');
	}
	for (const { index, at, claimed } of valid) {
		const q = requests[at];
		const record = written[at];
		const unit = config.alsoUnit ? written[at + 1] : undefined;
		const refused = [
			record.kind === 'lost_lease' ? `the step "${q.step || '(unit)'}"` : null,
			unit?.kind === 'lost_lease' ? 'the unit of work' : null,
		].filter((x): x is string => x !== null);
		if (refused.length > 0 || record.kind !== 'written') {
			fail(index, refusedError(q.key, refused, claimed));
			continue;
		}
		const facts: IDataObject = { ...factsOf('recorded' as Outcome, q.namespace, q.key, q.step, record.record) };
		delete facts.result;
		if (unit?.kind === 'written') facts.unitStatus = unit.record.status;
		out[index] = itemWithFacts(items[index], index, facts);
	}
	return [out.filter((x): x is INodeExecutionData => x !== undefined)];
}

