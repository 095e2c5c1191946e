import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

import { fingerprint, sha256, normalize } from '../../lib/ledger/fingerprint';
import type { ClaimMode, ClaimOutcome, ClaimRequest } from '../../lib/ledger/types';
import { LedgerInputError } from '../../lib/ledger/errors';
import { assertKey, assertStep } from '../../lib/ledger/validate';
import { failedItem, toNodeError } from '../../lib/n8n/errors';
import { FACTS_FIELD, factsOf, type Outcome } from '../../lib/n8n/facts';
import {
	fieldSource,
	formatPath,
	parameterSource,
	parseFieldPath,
	readPath,
	toKeyText,
	type PathSegment,
	type ValueSource,
} from '../../lib/n8n/keySource';
import { openLedger } from '../../lib/n8n/ledgerAccess';
import { namespaceReader, readDuration } from '../../lib/n8n/scope';
import { skippedLedgerHint, testRunPolicy } from '../../lib/n8n/testRuns';

const NEW = 0;
const DUPLICATE = 1;
const IN_PROGRESS = 2;
const MISMATCH = 3;

type KeyReader = (itemIndex: number, item: INodeExecutionData) => string;

interface GateConfig {
	mode: ClaimMode;
	namespace: (itemIndex: number, item: INodeExecutionData) => string;
	key: KeyReader;
	keyKind: ValueSource['kind'] | 'hash';
	version: ((item: INodeExecutionData) => string) | null;
	payload: (item: INodeExecutionData) => string;
	step: string;
	leaseMs: number;
	ttlMs: number;
	onMismatch: 'duplicate' | 'route' | 'error';
	failOpen: boolean;
	/** An editor test run set to "Skip the Ledger". */
	skipLedger: boolean;
}

const splitFields = (text: unknown, what: string): PathSegment[][] => {
	const names = String(text ?? '')
		.split(',')
		.map((s) => s.trim())
		.filter(Boolean);
	if (names.length === 0) {
		throw new LedgerInputError(`No ${what} were given`, `Enter one or more field names separated by commas, e.g. "email, order.id".`);
	}
	return names.map((name) => parseFieldPath(name, `field name in ${what}`));
};

function keyReader(ctx: IExecuteFunctions): { read: KeyReader; kind: GateConfig['keyKind'] } {
	const source = ctx.getNodeParameter('keySource', 0) as string;
	if (source === 'field') {
		const path = parseFieldPath(ctx.getNodeParameter('keyField', 0), 'key field');
		const name = formatPath(path);
		const field = fieldSource(path);
		const what = `key (field "${name}")`;
		return { kind: 'field', read: (i, item) => assertKey(toKeyText(field.read(i, item), what), what) };
	}
	if (source === 'expression') {
		const expression = parameterSource(ctx, 'keyExpression');
		return {
			kind: expression.kind,
			read: (i, item) => assertKey(toKeyText(expression.read(i, item))),
		};
	}
	if (source === 'fields') {
		const paths = splitFields(ctx.getNodeParameter('keyFields', 0), 'fields to hash');
		return {
			kind: 'hash',
			read: (_i, item) => {
				const values = paths.map((path) => {
					const value = readPath(item.json, path);
					if (value === undefined) {
						throw new LedgerInputError(
							`The field "${formatPath(path)}" is missing on this item, so no key can be built`,
							'Every field listed in "Fields to Hash" must exist on every item.',
						);
					}
					return value;
				});
				return sha256(normalize(values));
			},
		};
	}
	if (source === 'item') return { kind: 'hash', read: (_i, item) => fingerprint(item.json) };
	throw new LedgerInputError(`Unknown key source "${source}"`);
}

/** What is compared on a repeat: chosen fields, the body of a Webhook item, or the whole item. */
function payloadReader(compareFields: string): (item: INodeExecutionData) => string {
	if (compareFields.trim()) {
		const paths = splitFields(compareFields, 'compare fields');
		return (item) => sha256(normalize(paths.map((path) => readPath(item.json, path) ?? null)));
	}
	return (item) => {
		const json = item.json;
		const isWebhook = 'body' in json && 'headers' in json;
		return fingerprint(isWebhook ? json.body : json);
	};
}

function readConfig(ctx: IExecuteFunctions): GateConfig {
	const mode = ctx.getNodeParameter('mode', 0) as ClaimMode;
	const options = ctx.getNodeParameter('options', 0, {}) as IDataObject;
	const key = keyReader(ctx);
	let version: GateConfig['version'] = null;
	if (mode === 'newer') {
		const path = parseFieldPath(ctx.getNodeParameter('versionField', 0), 'version field');
		version = (item) => {
			const value = readPath(item.json, path);
			return toKeyText(value, `version (field "${formatPath(path)}")`);
		};
	}
	return {
		mode,
		namespace: namespaceReader(ctx),
		key: key.read,
		keyKind: key.kind,
		version,
		payload: payloadReader(String(options.compareFields ?? '')),
		step: assertStep(String(options.step ?? '')),
		leaseMs: mode === 'lease' ? readDuration(ctx, 'lease', 'lease') : 0,
		ttlMs: readDuration(ctx, 'retention', 'retention ("Keep Keys For")'),
		onMismatch: ctx.getNodeParameter('onMismatch', 0) as GateConfig['onMismatch'],
		failOpen: options.failOpen === true,
		skipLedger: testRunPolicy(ctx).choice === 'skip',
	};
}

const withFacts = (item: INodeExecutionData, index: number, facts: IDataObject): INodeExecutionData => ({
	json: { ...item.json, [FACTS_FIELD]: facts },
	...(item.binary ? { binary: item.binary } : {}),
	pairedItem: { item: index },
});

export async function executeDedupeGate(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	const items = this.getInputData();
	const node = this.getNode();
	const continueOnFail = this.continueOnFail();
	let config: GateConfig;
	try {
		config = readConfig(this);
	} catch (error) {
		throw toNodeError(node, error);
	}
	const outputs: INodeExecutionData[][] = [[], [], []];
	if (config.onMismatch === 'route') outputs.push([]);
	// Items that cannot be keyed never reach New: with "continue", they leave on Duplicate
	// (or the error output) carrying their error, so the gate still fails closed.
	const failItem = (index: number, error: unknown) => {
		const nodeError = toNodeError(node, error, index);
		if (!continueOnFail) throw nodeError;
		outputs[DUPLICATE].push(failedItem(node, items[index], index, nodeError));
	};

	const requests: ClaimRequest[] = [];
	const requestItem: number[] = [];
	for (let i = 0; i < items.length; i++) {
		try {
			const item = items[i];
			requests.push({
				namespace: config.namespace(i, item),
				key: config.key(i, item),
				step: config.step,
				fingerprint: config.payload(item),
				version: config.version ? config.version(item) : null,
			});
			requestItem.push(i);
		} catch (error) {
			failItem(i, error);
		}
	}
	if (config.keyKind === 'engine' && items.length >= 1000) {
		this.addExecutionHints({
			message: `The key expression is evaluated by n8n for each of ${items.length} items, which is slow. Use "Key From: Field Name", a plain field such as {{ $json.id }} or {{ $('Webhook').item.json.id }}, or an expression that reads the item only through $json, $('Node').item and $itemIndex (no $input, arrow functions or template literals): those are read directly or evaluated for many items at once.`,
			location: 'outputPane',
		});
	}
	if (requests.length === 0) return outputs;

	if (config.skipLedger) {
		this.addExecutionHints(skippedLedgerHint('every item went to New without a duplicate check'));
		requestItem.forEach((index, r) => {
			const q = requests[r];
			outputs[NEW].push(withFacts(items[index], index, factsOf('unverified', q.namespace, q.key, q.step, null)));
		});
		return outputs;
	}

	let outcomes: ClaimOutcome[];
	try {
		const ledger = await openLedger(this);
		outcomes = await ledger.claim(requests, {
			mode: config.mode,
			holder: `execution:${this.getExecutionId() ?? 'unknown'}`,
			leaseMs: config.leaseMs,
			ttlMs: config.ttlMs,
		});
	} catch (error) {
		if (config.failOpen) {
			this.addExecutionHints({
				message: 'The ledger could not be reached, and "Let Items Through if the Ledger Is Down" is on: every item went to New without a duplicate check.',
				type: 'warning',
				location: 'outputPane',
			});
			requestItem.forEach((index, r) => {
				const q = requests[r];
				outputs[NEW].push(withFacts(items[index], index, factsOf('unverified', q.namespace, q.key, q.step, null)));
			});
			return outputs;
		}
		if (!continueOnFail) throw toNodeError(node, error);
		for (const index of requestItem) failItem(index, error);
		return outputs;
	}

	const route = (r: number, outcome: Outcome, output: number, record: Parameters<typeof factsOf>[4]) => {
		const q = requests[r];
		const index = requestItem[r];
		if (outcome === 'mismatch') {
			if (config.onMismatch === 'error') {
				return failItem(
					index,
					new LedgerInputError(
						`The key "${q.key}" was seen before with different content`,
						'The same key must always describe the same thing. Check the key field, or set "When the Payload Differs" to route these items.',
					),
				);
			}
			output = config.onMismatch === 'route' ? MISMATCH : DUPLICATE;
		}
		outputs[output].push(withFacts(items[index], index, factsOf(outcome, q.namespace, q.key, q.step, record)));
	};

	for (let r = 0; r < outcomes.length; r++) {
		const outcome = outcomes[r];
		if (outcome.kind === 'batch_duplicate') {
			const first = outcomes[outcome.firstIndex];
			const record = first.kind === 'batch_duplicate' ? null : first.record;
			const differs = requests[r].fingerprint !== requests[outcome.firstIndex].fingerprint;
			const sameVersion = (requests[r].version ?? null) === (requests[outcome.firstIndex].version ?? null);
			if (differs && (config.mode !== 'newer' || sameVersion)) route(r, 'mismatch', DUPLICATE, record);
			else if (first.kind === 'in_progress') route(r, 'in_progress', IN_PROGRESS, record);
			else route(r, 'duplicate', DUPLICATE, record);
			continue;
		}
		switch (outcome.kind) {
			case 'claimed':
				route(r, 'new', NEW, outcome.record);
				break;
			case 'duplicate':
				route(r, 'duplicate', DUPLICATE, outcome.record);
				break;
			case 'in_progress':
				route(r, 'in_progress', IN_PROGRESS, outcome.record);
				break;
			case 'mismatch':
				route(r, 'mismatch', MISMATCH, outcome.record);
				break;
		}
	}
	return outputs;
}
