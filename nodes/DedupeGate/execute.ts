import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

import { fingerprint, sha256, normalize } from '../../lib/ledger/fingerprint';
import type { ClaimMode, ClaimOutcome, ClaimRequest, FencedRow, Ledger } from '../../lib/ledger/types';
import { LedgerInputError, LedgerSettingError } from '../../lib/ledger/errors';
import { assertKey, assertStep } from '../../lib/ledger/validate';
import { failedItem, toNodeError } from '../../lib/n8n/errors';
import { deferBlocked } from '../../lib/n8n/countBuffer';
import { atExecutionEnd, canActAtExecutionEnd } from '../../lib/n8n/executionEnd';
import { gateFactsOf, inProgressReason, isProxiedJson, itemWithFacts, type GateNote, type Outcome } from '../../lib/n8n/facts';
import {
	fieldSource,
	formatPath,
	parameterSource,
	parseFieldPath,
	plainPath,
	readPath,
	toKeyText,
	type PathSegment,
	type ValueSource,
} from '../../lib/n8n/keySource';
import { keepLeases, leasePlan } from '../../lib/n8n/leaseKeeper';
import { openLedger } from '../../lib/n8n/ledgerAccess';
import { recorderFollows } from '../../lib/n8n/lineage';
import { openUnitsOf } from '../../lib/n8n/openUnits';
import { OutputLists } from '../../lib/n8n/outputLists';
import { namespaceReader, readDurationOption, type DurationSpec } from '../../lib/n8n/scope';
import { skippedLedgerHint, testRunPolicy } from '../../lib/n8n/testRuns';

const NEW = 0;
const DUPLICATE = 1;
const IN_PROGRESS = 2;
const MISMATCH = 3;

export const LEASE: DurationSpec = {
	name: 'lease',
	displayName: 'Lease',
	amount: 10,
	unit: 'minutes',
	description: 'The longest an execution may hold a key it let through. While it runs it keeps the key, up to this long; if n8n stops it without finishing (a crash), the key is free again within 30 seconds (or this, if shorter).',
	what: 'lease (Options → Lease)',
};

export const RETENTION: DurationSpec = {
	name: 'retention',
	displayName: 'Keep Keys For',
	amount: 30,
	unit: 'days',
	description: 'How long a key is remembered. After that it counts as new again.',
	what: 'retention (Options → Keep Keys For)',
};

/** The "Mark Keys Done" choices; `auto` claims like `lease` and closes the claim itself. */
type GateMode = 'auto' | ClaimMode;

/** Who marks a key that went to New as done. */
type Closer =
	/**
	 * The gate, when the execution ends: done if it succeeded, free again if it failed or a node
	 * of it left the unit open (lib/n8n/openUnits.ts); what a later node recorded stands.
	 */
	| 'execution'
	/** A Mark Step Done (or Guarded Send with "Also Complete the Unit of Work") later in the flow. */
	| 'node'
	/** Nobody: the claim was done at once ("As Soon As It Passes", "Only Newer Versions"). */
	| 'none';

/** Words on each New item, under `idempotency.doneWhen`. */
const DONE_WHEN: Record<Closer, string> = {
	execution: 'when this execution succeeds',
	node: 'when a Mark Step Done (or Guarded Send) after the gate records it',
	none: 'already',
};

type KeyReader = (itemIndex: number, item: INodeExecutionData) => string;

/** The gate's own way to key an item by several values, for the "not a single value" hint. */
const HASH_HINT = 'set "Key From" to "Hash of Chosen Fields" to build the key from several fields';

interface GateConfig {
	mode: ClaimMode;
	closer: Closer;
	namespace: (itemIndex: number, item: INodeExecutionData) => string;
	key: KeyReader;
	keyKind: ValueSource['kind'] | 'hash';
	version: ((item: INodeExecutionData) => string) | null;
	/**
	 * The content fingerprint a repeat is compared by; null with "When the Content Differs" set to
	 * "Treat as Duplicate", where a repeat goes to Duplicate whatever its content. Then no item is
	 * fingerprinted (half of the gate's own time on 10,000 small items, and a 64-character value
	 * per row in the statement), and the rows it claims carry none (docs/nodes/dedupe-gate.md).
	 */
	payload: ((item: INodeExecutionData) => string) | null;
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
		return { kind: 'field', read: (i, item) => assertKey(toKeyText(field.read(i, item), what, HASH_HINT), what) };
	}
	if (source === 'expression') {
		const expression = parameterSource(ctx, 'keyExpression');
		const plain = plainPath(ctx.getNodeParameter('keyExpression', 0, '', { rawExpressions: true }));
		// The default {{ $json.id }} names its field as Field Name does; anything else is "the key",
		// the same words whichever way n8n's expression is read (batched, paired, per item).
		const what = plain && plain.node === null ? `key (field "${formatPath(plain.path)}")` : 'key';
		return {
			kind: expression.kind,
			read: (i, item) => assertKey(toKeyText(expression.read(i, item), what, HASH_HINT), what),
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

/**
 * How the chosen mode claims, and who closes the claim. "When the Execution Succeeds" closes it
 * at the end of the execution, whatever follows the gate. Only an n8n that lets no node act at
 * the end leaves it to a Mark Step Done or Guarded Send that follows, and without one gets the
 * claim closed at once (an execution hint says so).
 */
function claimPlan(ctx: IExecuteFunctions, mode: GateMode): { mode: ClaimMode; closer: Closer } {
	if (mode === 'lease') return { mode, closer: 'node' };
	if (mode !== 'auto') return { mode, closer: 'none' };
	if (canActAtExecutionEnd(ctx)) return { mode: 'lease', closer: 'execution' };
	if (recorderFollows(ctx)) return { mode: 'lease', closer: 'node' };
	ctx.addExecutionHints({
		message:
			'This n8n does not let the gate see when the execution ends, so keys are marked done as they pass. To retry an action after a crash, add a Mark Step Done node after it and set "Mark Keys Done" to "When Mark Step Done Records It".',
		type: 'warning',
		location: 'outputPane',
	});
	return { mode: 'seen', closer: 'none' };
}

function readConfig(ctx: IExecuteFunctions): GateConfig {
	const plan = claimPlan(ctx, ctx.getNodeParameter('mode', 0, 'auto') as GateMode);
	const mode = plan.mode;
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
	const onMismatch = (options.onMismatch ?? 'duplicate') as GateConfig['onMismatch'];
	return {
		mode,
		closer: plan.closer,
		namespace: namespaceReader(ctx, 'options'),
		key: key.read,
		keyKind: key.kind,
		version,
		payload: onMismatch === 'duplicate' ? null : payloadReader(String(options.compareFields ?? '')),
		step: assertStep(String(options.step ?? '')),
		leaseMs: mode === 'lease' ? readDurationOption(ctx, LEASE, options) : 0,
		ttlMs: readDurationOption(ctx, RETENTION, options),
		onMismatch,
		failOpen: options.failOpen === true,
		skipLedger: testRunPolicy(ctx).choice === 'skip',
	};
}

export async function executeDedupeGate(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	const started = performance.now();
	const items = this.getInputData();
	const node = this.getNode();
	const continueOnFail = this.continueOnFail();
	let config: GateConfig;
	try {
		config = readConfig(this);
	} catch (error) {
		throw toNodeError(node, error);
	}
	const outputs = new OutputLists(config.onMismatch === 'route' ? 4 : 3, items.length);
	// Items that cannot be keyed never reach New: with "continue", they leave on Duplicate
	// (or the error output) carrying their error, so the gate still fails closed.
	const failItem = (index: number, error: unknown) => {
		const nodeError = toNodeError(node, error, index);
		if (!continueOnFail) throw nodeError;
		outputs.add(DUPLICATE, failedItem(node, items[index], index, nodeError));
	};

	// Made at full size and cut to what they hold, as OutputLists: not grown item by item.
	const requests = new Array<ClaimRequest>(items.length);
	const requestItem = new Array<number>(items.length);
	let requested = 0;
	for (let i = 0; i < items.length; i++) {
		try {
			const item = items[i];
			requests[requested] = {
				namespace: config.namespace(i, item),
				key: config.key(i, item),
				step: config.step,
				fingerprint: config.payload ? config.payload(item) : null,
				version: config.version ? config.version(item) : null,
			};
			requestItem[requested++] = i;
		} catch (error) {
			failItem(i, error);
		}
	}
	requests.length = requested;
	requestItem.length = requested;
	if (config.keyKind === 'engine' && items.length >= 1000) {
		this.addExecutionHints({
			message: `The key expression is evaluated by n8n for each of ${items.length} items, which is slow. Use "Key From: Field Name", a plain field such as {{ $json.id }} or {{ $('Webhook').item.json.id }}, or an expression that reads the item only through $json, $('Node').item and $itemIndex (no $input, arrow functions or template literals): those are read directly or evaluated for many items at once.`,
			location: 'outputPane',
		});
	}
	if (items.length >= 1000 && isProxiedJson(items[0].json)) {
		this.addExecutionHints({
			message: `These ${items.length} items come from a Code node (or another node that runs JavaScript) in n8n's built-in sandbox (task runners off, the default on n8n 1.x). Every node after it reads such items several times slower than plain ones, this gate and Remove Duplicates alike. To make them plain, set N8N_RUNNERS_ENABLED=true where n8n runs: Code nodes then run in task runners.`,
			location: 'outputPane',
		});
	}
	if (requests.length === 0) return outputs.done();

	if (config.skipLedger) {
		this.addExecutionHints(skippedLedgerHint('every item went to New without a duplicate check'));
		requestItem.forEach((index, r) => {
			const q = requests[r];
			outputs.add(NEW, itemWithFacts(items[index], index, gateFactsOf('unverified', q.namespace, q.key, q.step, null)));
		});
		return outputs.done();
	}

	let outcomes: ClaimOutcome[];
	const holder = `execution:${this.getExecutionId() ?? 'unknown'}`;
	const keyed = performance.now();
	let opened = keyed;
	try {
		const ledger = await openLedger(this);
		opened = performance.now();
		// A lease longer than the short one is claimed short and kept alive while this run lives,
		// up to the configured lease (lib/n8n/leaseKeeper.ts): a crash frees the keys within ~30 s.
		const lease = leasePlan(config.leaseMs);
		outcomes = await ledger.claim(requests, {
			mode: config.mode,
			holder,
			leaseMs: lease.claimMs,
			ttlMs: config.ttlMs,
		});
		deferBlocked(this, ledger, requests, outcomes);
		if (config.mode === 'lease') {
			const rows = claimedRows(outcomes);
			if (config.closer === 'execution') closeAtExecutionEnd(this, ledger, rows, config.ttlMs);
			keepLeases(this, ledger, rows, lease, opened);
		}
	} catch (error) {
		// A ledger refused by a setting (a Redis that can lose keys, Built-in in queue mode) is not down: it fails closed.
		if (config.failOpen && !(error instanceof LedgerSettingError)) {
			this.addExecutionHints({
				message: 'The ledger could not be reached, and "Let Items Through if the Ledger Is Down" is on: every item went to New without a duplicate check.',
				type: 'warning',
				location: 'outputPane',
			});
			requestItem.forEach((index, r) => {
				const q = requests[r];
				outputs.add(NEW, itemWithFacts(items[index], index, gateFactsOf('unverified', q.namespace, q.key, q.step, null)));
			});
			return outputs.done();
		}
		if (!continueOnFail) throw toNodeError(node, error);
		for (const index of requestItem) failItem(index, error);
		return outputs.done();
	}

	const claimed = performance.now();
	// One note object for every New item, and one per reason for In Progress items (the items of
	// one holder's claim share their reason): not one per item.
	const newNote = { doneWhen: DONE_WHEN[config.closer] };
	let reasonNote = { reason: '' };
	const timeZone = this.getTimezone();
	const route = (r: number, outcome: Outcome, output: number, record: Parameters<typeof gateFactsOf>[4]) => {
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
		let note: GateNote | undefined;
		if (outcome === 'new') note = newNote;
		else if (outcome === 'in_progress') {
			const reason = inProgressReason(record, holder, timeZone);
			if (reason !== reasonNote.reason) reasonNote = { reason };
			note = reasonNote;
		}
		outputs.add(output, itemWithFacts(items[index], index, gateFactsOf(outcome, q.namespace, q.key, q.step, record, note)));
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
	// Where the time went, for an operator (N8N_LOG_LEVEL=debug) and for bench:n8n.
	const ms = (from: number, to: number) => (to - from).toFixed(1);
	const done = performance.now();
	this.logger.debug(
		`Dedupe Gate "${node.name}": ${items.length} items in ${ms(started, done)} ms: keys and fingerprints ${ms(started, keyed)} ms, ledger open ${ms(keyed, opened)} ms, claim ${ms(opened, claimed)} ms, routing ${ms(claimed, done)} ms`,
	);
	return outputs.done();
}

/**
 * The rows this claim took, with their fences: their records themselves, which name the row and
 * carry its fence (no second object per row for the lease keeper and the execution's end to hold).
 */
function claimedRows(outcomes: ClaimOutcome[]): FencedRow[] {
	// Made at full size and cut, as OutputLists; a counted loop, as resolveBatch's.
	const rows = new Array<FencedRow>(outcomes.length);
	let n = 0;
	for (let i = 0; i < outcomes.length; i++) {
		const outcome = outcomes[i];
		if (outcome.kind === 'claimed' && outcome.record.fence !== null) rows[n++] = outcome.record as FencedRow;
	}
	rows.length = n;
	return rows;
}

/**
 * "When the Execution Succeeds": when this execution ends, its claims that nothing settled are
 * recorded as completed (it succeeded) or as failed, retry later (it failed: the next delivery
 * may take the key at once). A key whose send or step a node of this execution left not done
 * (lib/n8n/openUnits.ts: a Guarded Send that did not send, a step recorded as failed or for
 * review) is recorded as failed, retry later too, so that the next delivery takes it up again.
 * A paused execution (Wait node) leaves them to the lease. A claim another run took over, or that
 * a later node settled, is left alone (fence, onlyInProgress).
 */
function closeAtExecutionEnd(ctx: IExecuteFunctions, ledger: Ledger, rows: FencedRow[], ttlMs: number): void {
	if (rows.length === 0) return;
	const leftOpen = openUnitsOf(ctx);
	atExecutionEnd(ctx, async (end) => {
		if (end === 'waiting') return;
		// Named fields: the rows are the claim's records.
		const requests = rows.map((row) => ({
			namespace: row.namespace,
			key: row.key,
			step: row.step,
			fence: row.fence,
			status: end === 'succeeded' && !leftOpen(row) ? ('completed' as const) : ('failed_retryable' as const),
		}));
		try {
			await ledger.record(requests, { ttlMs, onlyInProgress: true });
		} catch (error) {
			ctx.logger.warn(
				`Dedupe Gate "${ctx.getNode().name}": could not mark ${rows.length} key(s) as done or free when the execution ended; they are let through again after the lease. ${(error as Error).message}`,
			);
		}
	});
}
