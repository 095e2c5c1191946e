import type { IDataObject, IExecuteFunctions, INodeExecutionData, INodeProperties } from 'n8n-workflow';

import { DURATION_UNITS, toMilliseconds, type DurationUnit } from '../ledger/duration';
import { assertNamespace } from '../ledger/validate';
import { parameterSource } from './keySource';
import { namedNamespaceCheck, testNamespace, testRunPolicy } from './testRuns';

const unitName = (unit: string) => unit[0].toUpperCase() + unit.slice(1);
const unitOptions = Object.keys(DURATION_UNITS).map((unit) => ({ name: unitName(unit), value: unit }));

/** Namespace selector: this workflow, or a shared scope several workflows dedupe in together. */
export const scopeProperties: INodeProperties[] = [
	{
		displayName: 'Scope',
		name: 'scope',
		type: 'options',
		noDataExpression: true,
		options: [
			{ name: 'This Workflow', value: 'workflow', description: 'Keys are only compared with keys seen by this workflow' },
			{ name: 'Shared Namespace', value: 'shared', description: 'Keys are compared across every workflow that uses the same namespace' },
		],
		default: 'workflow',
	},
	{
		displayName: 'Namespace',
		name: 'namespace',
		type: 'string',
		default: '',
		required: true,
		placeholder: 'e.g. stripe-events',
		description: 'Name of the shared scope. Workflows that use the same name share their keys.',
		displayOptions: { show: { scope: ['shared'] } },
	},
];

/** A duration a node keeps under Options: one spec serves the panel and the reader. */
export interface DurationSpec {
	name: string;
	displayName: string;
	amount: number;
	unit: DurationUnit;
	description: string;
	/** How messages name it, e.g. 'retention ("Keep Keys For")'. */
	what: string;
}

/** "Hold Step For": how long a run keeps a step to itself (Guarded Send, Start Step). */
export const holdStepFor = (minutes: number, description: string): DurationSpec => ({
	name: 'lease',
	displayName: 'Hold Step For',
	amount: minutes,
	unit: 'minutes',
	description,
	what: 'hold time ("Hold Step For")',
});

/** "Keep Records For" (or "Keep Record For"): how long `what` is remembered, 30 days by default. */
export const keepRecordsFor = (what: string, displayName = 'Keep Records For'): DurationSpec => ({
	name: 'retention',
	displayName,
	amount: 30,
	unit: 'days',
	description: `How long ${what} is remembered. After that the key counts as new again.`,
	what: `retention ("${displayName}")`,
});

/**
 * A duration under Options: the amount, and its unit as a second option that may be left out
 * (then the spec's unit applies, and the amount's description says which).
 */
export const durationOptions = (spec: DurationSpec): INodeProperties[] => [
	{
		displayName: spec.displayName,
		name: spec.name,
		type: 'number',
		typeOptions: { minValue: 0, numberPrecision: 2 },
		default: spec.amount,
		description: `${spec.description} In ${spec.unit}, unless you also add "${spec.displayName} Unit".`,
	},
	{
		displayName: `${spec.displayName} Unit`,
		name: `${spec.name}Unit`,
		type: 'options',
		options: unitOptions,
		default: spec.unit,
		description: `The unit of "${spec.displayName}" (${unitName(spec.unit)} when left out)`,
	},
];

/**
 * The duration a node keeps in an options collection, in milliseconds: the spec's default where
 * it is left out. `collection` names the collection ('options' unless the node has another, such
 * as one per operation), or is the collection itself when the caller has read it already.
 */
export function readDurationOption(ctx: IExecuteFunctions, spec: DurationSpec, collection: string | IDataObject = 'options'): number {
	const options = typeof collection === 'string' ? (ctx.getNodeParameter(collection, 0, {}) as IDataObject) : collection;
	const amount = options[spec.name] ?? spec.amount;
	const unit = (options[`${spec.name}Unit`] ?? spec.unit) as DurationUnit;
	return toMilliseconds(amount, unit, spec.what);
}

/**
 * The scope as one option: a shared namespace when it is set, this workflow's own keys when it
 * is left out. Nodes that keep Scope under Options read it with `namespaceReader(ctx, 'options')`.
 */
export const sharedNamespaceOption: INodeProperties = {
	displayName: 'Shared Namespace',
	name: 'namespace',
	type: 'string',
	default: '',
	placeholder: 'e.g. stripe-events',
	description: 'Compare keys with every workflow that uses this same name. Leave it out to compare only with the keys this workflow has seen.',
};

/**
 * Namespace per item: constant in the usual case, read per item only when it holds an expression.
 * An editor test run gets its test namespace instead (see testRuns.ts), unless the node is set to
 * use the production namespace; the Idempotency Ledger node always gets the production one.
 */
export function namespaceReader(
	ctx: IExecuteFunctions,
	where: ScopeParameters = 'top',
): (itemIndex: number, item: INodeExecutionData) => string {
	const production = productionNamespaceReader(ctx, where);
	if (testRunPolicy(ctx).choice === 'production') return production;
	let last: string | undefined;
	let test = '';
	return (i, item) => {
		const namespace = production(i, item);
		if (namespace !== last) {
			test = testNamespace(namespace);
			last = namespace;
		}
		return test;
	};
}

/** Where a node keeps its scope: Scope and Namespace at the top, or Shared Namespace under Options. */
export type ScopeParameters = 'top' | 'options';

/** The namespace the node's scope parameters name, whatever the execution mode. */
function productionNamespaceReader(
	ctx: IExecuteFunctions,
	where: ScopeParameters,
): (itemIndex: number, item: INodeExecutionData) => string {
	const shared =
		where === 'top'
			? ctx.getNodeParameter('scope', 0) === 'shared'
			: (ctx.getNodeParameter('options.namespace', 0, '', { rawExpressions: true }) as string) !== '';
	if (!shared) {
		const id = ctx.getWorkflow().id ?? 'unsaved';
		const namespace = `workflow:${id}`;
		return () => namespace;
	}
	const source = parameterSource(ctx, where === 'top' ? 'namespace' : 'options.namespace');
	const named = namedNamespaceCheck(ctx);
	if (source.kind === 'constant') {
		// A valid namespace is checked once; a bad one fails every item, so "continue on fail"
		// still applies.
		const value = source.read(0, { json: {} });
		const namespace = typeof value === 'string' ? value.trim() : value;
		let checked: string | undefined;
		return () => (checked ??= named(assertNamespace(namespace)));
	}
	return (i, item) => {
		const value = source.read(i, item);
		return named(assertNamespace(typeof value === 'string' ? value.trim() : typeof value === 'number' ? String(value) : value));
	};
}
