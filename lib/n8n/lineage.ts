/**
 * Which unit of work an item belongs to, found without the user typing a key: the namespace and
 * key the nearest upstream Dedupe Gate gave the item this one descends from.
 *
 * Cheapest first:
 * 1. The item still carries the gate's facts (`json.idempotency`): read them.
 * 2. Otherwise follow the item's pairedItem lineage back through the execution's run data, even
 *    through nodes that replaced the JSON (HTTP Request, Slack, Set), to the gate's output item,
 *    and read the facts there. This uses n8n's own paired-item resolution (`$getPairedItem` of
 *    one data proxy built once per execution), the same walk `$('Gate').item` does, without
 *    building a proxy or evaluating an expression per item.
 *
 * When neither works, the error names the node to point an explicit key at.
 */
import type {
	IDataObject,
	IExecuteFunctions,
	INodeExecutionData,
	INodeProperties,
	IPairedItemData,
	ISourceData,
	IWorkflowDataProxyData,
} from 'n8n-workflow';

import { LedgerInputError } from '../ledger/errors';
import type { RecordRequest } from '../ledger/types';
import { assertKey, assertNamespace } from '../ledger/validate';
import { FACTS_FIELD, LEDGER_DETAILS, PROMPT_CACHE_STEP } from './facts';
import { lineageFence } from './lineageCheck';
import type { FactsKey, UnitKey } from './unitKey';
import { parameterSource, toKeyText, type ValueSource } from './keySource';
import { namespaceReader, sharedNamespaceOption } from './scope';
import { testNamespace } from './testRuns';

export type { UnitKey } from './unitKey';

export const GATE_TYPE_SUFFIX = '.dedupeGate';
/** A Start Step begins a guarded region: the items it lets through carry its claim of the region's step. */
export const START_STEP_TYPE_SUFFIX = '.startStep';
/** The nodes whose output items carry a claim that later nodes take by lineage. */
const KEY_SOURCE_SUFFIXES = [GATE_TYPE_SUFFIX, START_STEP_TYPE_SUFFIX];
/** The nodes that take a gate's unit of work from it and record it (its key comes to them by lineage). */
const RECORDER_TYPE_SUFFIXES = ['.markStepDone', '.guardedSend'];

/**
 * Whether a node that records the unit of work follows this gate anywhere downstream (enabled): a
 * Mark Step Done, or a Guarded Send. Asked only on an n8n without execution hooks, where the gate
 * cannot close its keys when the execution ends: it then leaves them to these nodes rather than
 * marking them done as they pass, which would hide a send that failed from the next delivery.
 */
export function recorderFollows(ctx: IExecuteFunctions): boolean {
	return ctx
		.getChildNodes(ctx.getNode().name)
		.some((node) => !node.disabled && RECORDER_TYPE_SUFFIXES.some((suffix) => node.type.endsWith(suffix)));
}

/**
 * What a write for this unit carries so that the ledger can tell whether its claim still holds: the
 * gate's fence for the very row the gate took, the gate's claim for any other step of the unit.
 * Once another run took the key over (or it was released), the ledger refuses either, whatever
 * the node's options say: only the Idempotency Ledger node changes what another run recorded. A
 * key given as an expression names no claim.
 */
export function authorityFor(unit: UnitKey, step: string): Pick<RecordRequest, 'fence' | 'claim'> {
	if (!unit.claim) return {};
	return unit.claim.step === step ? { fence: unit.claim.fence } : { claim: unit.claim };
}

/** The namespace, key and claim in a facts object, or null when it is not one. */
export function factsKey(value: unknown): FactsKey | null {
	if (!value || typeof value !== 'object' || Array.isArray(value)) return null;
	const top = value as IDataObject;
	// A Dedupe Gate keeps the claim under `_ledger` (facts.ts gateFactsOf) and the key on top; the
	// other nodes keep all of it on top.
	const details = top[LEDGER_DETAILS];
	const facts: IDataObject =
		details && typeof details === 'object' && !Array.isArray(details) ? { ...(details as IDataObject), key: top.key } : top;
	if (typeof facts.namespace !== 'string' || typeof facts.key !== 'string' || facts.key === '' || facts.namespace === '') return null;
	// A Prompt Cache replaces the field with facts about the prompt's hash: not this unit's key.
	if (facts.step === PROMPT_CACHE_STEP) return null;
	const claim =
		typeof facts.fence === 'number' && Number.isSafeInteger(facts.fence) && typeof facts.step === 'string'
			? { step: facts.step, fence: facts.fence }
			: undefined;
	const region = claim && typeof facts.region === 'string' ? { start: facts.region, step: claim.step } : undefined;
	return { namespace: facts.namespace, key: facts.key, ...(claim ? { claim } : {}), ...(region ? { region } : {}) };
}

/**
 * Namespaces a gate of this workflow gives its items when it keys by workflow (its default):
 * facts on an item that name one of these can be taken as they are. Any other namespace (a
 * shared one, or one an upstream item's own data made up) is checked against the gate's real
 * output through the item's lineage, so data cannot choose a key in another workflow's scope.
 */
function ownNamespaces(ctx: IExecuteFunctions): Set<string> {
	const namespace = `workflow:${ctx.getWorkflow().id ?? 'unsaved'}`;
	return new Set([namespace, testNamespace(namespace)]);
}

interface Gate {
	name: string;
	depth: number;
}

export interface LineageResolver {
	/** Throws LedgerInputError (with a hint naming the node to point at) when no key can be found. */
	resolve(itemIndex: number, item: INodeExecutionData): UnitKey;
}

const normalizePaired = (p: INodeExecutionData['pairedItem']): IPairedItemData[] =>
	p === undefined || p === null ? [] : (Array.isArray(p) ? p : [p]).map((x) => (typeof x === 'number' ? { item: x } : x));

export function lineageResolver(ctx: IExecuteFunctions): LineageResolver {
	const self = ctx.getNode().name;
	let gates: Gate[] | null = null;
	let trusted: Set<string> | null = null;
	let proxy: IWorkflowDataProxyData | null = null;
	let source: ISourceData[] | null = null;
	// The walk below calls an n8n internal: checked against n8n's own $('Gate').item (lineageCheck.ts).
	const fence = lineageFence(ctx, factsKey);

	/** Dedupe Gates and Start Steps upstream, nearest first (graph distance). Computed once, on first need. */
	const upstreamGates = (): Gate[] => {
		if (gates) return gates;
		const all = ctx.getParentNodes(self).filter((n) => !n.disabled && KEY_SOURCE_SUFFIXES.some((suffix) => n.type.endsWith(suffix)));
		const found: Gate[] = [];
		const remaining = new Set(all.map((n) => n.name));
		for (let depth = 1; remaining.size > 0 && depth <= 1000; depth++) {
			for (const n of ctx.getParentNodes(self, { depth })) {
				if (remaining.delete(n.name)) found.push({ name: n.name, depth });
			}
		}
		gates = found;
		return gates;
	};

	const previousNode = (): string | null => {
		const main = ctx.getExecuteData()?.source?.main;
		return main?.[0]?.previousNode ?? null;
	};

	const howToFix = (node: string | null) =>
		node
			? `Set "Key From" to "Expression" and point it at the field of "${node}" that holds the key (for example the event or order id), or add a Dedupe Gate upstream.`
			: 'Set "Key From" to "Expression" and point it at the field that holds the key, or add a Dedupe Gate upstream.';

	return {
		resolve(itemIndex, item) {
			const own = factsKey(item.json?.[FACTS_FIELD]);
			trusted ??= ownNamespaces(ctx);
			if (own && trusted.has(own.namespace)) return { ...own, via: 'item' };

			const candidates = upstreamGates();
			if (own && candidates.length === 0) {
				throw new LedgerInputError(
					`Item ${itemIndex} carries an idempotency key of the namespace "${own.namespace}", but no Dedupe Gate upstream of "${self}" gave it`,
					'A key in another scope is only taken from a Dedupe Gate of this workflow. Add the gate upstream, or set "Key From" to "Expression".',
				);
			}
			if (candidates.length === 0) {
				throw new LedgerInputError(
					`Item ${itemIndex} carries no idempotency key, and no Dedupe Gate is upstream of "${self}" to trace it to`,
					howToFix(previousNode()),
				);
			}
			const paired = normalizePaired(item.pairedItem);
			if (paired.length === 0) {
				throw new LedgerInputError(
					`Item ${itemIndex} cannot be traced back to "${candidates[0].name}": "${previousNode() ?? 'the previous node'}" did not say which input item it came from`,
					howToFix(previousNode()),
				);
			}
			if (!fence.walkTrusted()) return fence.fromN8n(itemIndex, candidates.map((g) => g.name));
			proxy ??= ctx.getWorkflowDataProxy(0);
			source ??= ctx.getExecuteData()?.source?.main?.filter((s): s is ISourceData => !!s) ?? [];
			let lastError: unknown = null;
			for (const gate of candidates) {
				const keys = new Map<string, UnitKey>();
				for (const p of paired) {
					const from = p.sourceOverwrite ?? source[p.input ?? 0] ?? source[0] ?? null;
					try {
						const origin = proxy.$getPairedItem(gate.name, from, p);
						const key = factsKey(origin?.json?.[FACTS_FIELD]);
						if (!key) {
							lastError = new LedgerInputError(
								`Item ${itemIndex} traces back to an item of "${gate.name}" that has no key (it left the gate with an error)`,
								`Check the gate's output for this item, or set "Key From" to "Expression".`,
							);
							continue;
						}
						keys.set(`${key.namespace}\u0000${key.key}`, { ...key, via: gate.name });
					} catch (error) {
						lastError = error;
					}
				}
				if (keys.size === 1) return fence.checked(itemIndex, [...keys.values()][0]);
				if (keys.size > 1) {
					throw new LedgerInputError(
						`Item ${itemIndex} descends from ${keys.size} different items of "${gate.name}", so it has no single key`,
						'Split the items before this node so that each one comes from one gate item, or set "Key From" to "Expression".',
					);
				}
			}
			const traced = fence.afterFailedWalk(itemIndex, candidates.map((g) => g.name));
			if (traced) return traced;
			if (lastError instanceof LedgerInputError) throw lastError;
			const cause = (lastError as { context?: { nodeCause?: unknown } } | null)?.context?.nodeCause;
			const culprit = typeof cause === 'string' && cause !== candidates[0].name ? cause : previousNode();
			throw new LedgerInputError(
				`Item ${itemIndex} cannot be traced back to "${candidates[0].name}"${culprit ? `: the trail breaks at "${culprit}"` : ''}`,
				`${culprit ? `"${culprit}" does not say which input item each of its outputs came from. ` : ''}${howToFix(culprit)}`,
			);
		},
	};
}

/** "Key From" for nodes that act on a unit a Dedupe Gate claimed: automatic by lineage, or an explicit key. */
export const unitKeyProperties: INodeProperties[] = [
	{
		displayName: 'Key From',
		name: 'keyFrom',
		type: 'options',
		noDataExpression: true,
		options: [
			{
				name: 'Dedupe Gate (Automatic)',
				value: 'lineage',
				description: 'Use the key of the Dedupe Gate each item came through, even when nodes in between replaced its data',
			},
			{
				name: 'Expression',
				value: 'expression',
				description: 'Give the key yourself; it overrides the automatic lookup',
			},
		],
		default: 'lineage',
	},
	{
		displayName: 'Key',
		name: 'keyExpression',
		type: 'string',
		default: '',
		required: true,
		placeholder: 'e.g. {{ $json.orderId }}',
		description: 'The idempotency key of the unit of work, the same one the Dedupe Gate used (an event ID or order ID)',
		displayOptions: { show: { keyFrom: ['expression'] } },
	},
];

/**
 * The scope of an explicit key, for the node's Options: "Shared Namespace". A key from the Dedupe
 * Gate always keeps the gate's own scope, so this matters only with "Key From" set to "Expression".
 */
export const unitKeyNamespaceOption: INodeProperties = {
	...sharedNamespaceOption,
	description:
		'Only for a key given as an expression: the shared name the Dedupe Gate used, so both find the same record. Leave it out when the gate kept its keys for this workflow. A key from the Dedupe Gate (automatic) always uses the gate\'s setting.',
};

export interface UnitKeyReader {
	kind: 'lineage' | ValueSource['kind'];
	read(itemIndex: number, item: INodeExecutionData): UnitKey;
}

export function unitKeyReader(ctx: IExecuteFunctions): UnitKeyReader {
	const from = ctx.getNodeParameter('keyFrom', 0) as string;
	if (from === 'lineage') {
		const lineage = lineageResolver(ctx);
		return {
			kind: 'lineage',
			read(i, item) {
				const found = lineage.resolve(i, item);
				return { ...found, namespace: assertNamespace(found.namespace), key: assertKey(found.key) };
			},
		};
	}
	if (from !== 'expression') throw new LedgerInputError(`Unknown "Key From" value "${from}"`);
	const key = parameterSource(ctx, 'keyExpression');
	const namespace = namespaceReader(ctx, 'options');
	return {
		kind: key.kind,
		read: (i, item) => ({ namespace: namespace(i, item), key: assertKey(toKeyText(key.read(i, item))), via: 'expression' }),
	};
}
