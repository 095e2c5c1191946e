import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

import { LedgerInputError } from '../../lib/ledger/errors';
import type { LedgerRecord, RecordRequest, Status } from '../../lib/ledger/types';
import { UNIT_STEP } from '../../lib/ledger/types';
import { assertStep } from '../../lib/ledger/validate';
import { failedItem, toNodeError } from '../../lib/n8n/errors';
import { FACTS_FIELD, factsOf, type Outcome } from '../../lib/n8n/facts';
import { parameterSource, type ValueSource } from '../../lib/n8n/keySource';
import { parseJson } from '../GuardedSend/params';
import { openLedger } from '../../lib/n8n/ledgerAccess';
import { unitKeyReader, type UnitKeyReader } from '../../lib/n8n/lineage';
import { readDuration } from '../../lib/n8n/scope';

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
	holder: string | undefined;
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
		alsoUnit: step !== UNIT_STEP && ctx.getNodeParameter('completeUnit', 0, false) === true,
		externalId: parameterSource(ctx, 'externalId'),
		result: resultReader(ctx),
		ttlMs: readDuration(ctx, 'retention', 'retention ("Keep Record For")'),
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
	const valid: Array<{ index: number; at: number }> = [];
	for (let i = 0; i < items.length; i++) {
		try {
			const item = items[i];
			const { namespace, key } = config.key.read(i, item);
			const externalId = externalIdText(config.externalId.read(i, item));
			const result = config.result(i, item);
			valid.push({ index: i, at: requests.length });
			requests.push({ namespace, key, step: config.step, status: config.status, externalId, result });
			if (config.alsoUnit) requests.push({ namespace, key, step: UNIT_STEP, status: config.status, externalId, result });
		} catch (error) {
			fail(i, error);
		}
	}
	if (requests.length === 0) return [out.filter((x): x is INodeExecutionData => x !== undefined)];

	let written: Array<LedgerRecord | null>;
	try {
		const ledger = await openLedger(this);
		written = await ledger.record(requests, { ttlMs: config.ttlMs, holder: config.holder });
	} catch (error) {
		if (!continueOnFail) throw toNodeError(node, error);
		for (const { index } of valid) fail(index, error);
		return [out.filter((x): x is INodeExecutionData => x !== undefined)];
	}
	for (const { index, at } of valid) {
		const q = requests[at];
		const record = written[at];
		const unit = config.alsoUnit ? written[at + 1] : undefined;
		const refused = [record === null ? `step "${q.step || '(unit)'}"` : null, unit === null ? 'the unit of work' : null].filter(Boolean);
		if (refused.length > 0) {
			fail(
				index,
				new LedgerInputError(
					`Another run holds the key "${q.key}" in progress, so ${refused.join(' and ')} ${refused.length > 1 ? 'were' : 'was'} not recorded`,
					'Let that run finish (or its lease run out) and try again, or turn on "Record Even if Another Run Holds the Key".',
				),
			);
			continue;
		}
		const facts: IDataObject = { ...factsOf('recorded' as Outcome, q.namespace, q.key, q.step, record) };
		delete facts.result;
		if (unit) facts.unitStatus = unit.status;
		out[index] = {
			json: { ...items[index].json, [FACTS_FIELD]: facts },
			...(items[index].binary ? { binary: items[index].binary } : {}),
			pairedItem: { item: index },
		};
	}
	return [out.filter((x): x is INodeExecutionData => x !== undefined)];
}

