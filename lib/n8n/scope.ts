import type { IExecuteFunctions, INodeExecutionData, INodeProperties } from 'n8n-workflow';

import { DURATION_UNITS, toMilliseconds, type DurationUnit } from '../ledger/duration';
import { assertNamespace } from '../ledger/validate';
import { parameterSource } from './keySource';
import { testNamespace, testRunPolicy } from './testRuns';

const unitOptions = Object.keys(DURATION_UNITS).map((unit) => ({
	name: unit[0].toUpperCase() + unit.slice(1),
	value: unit,
}));

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

/** "Keep for 30 days" style retention; rows then count as absent and are purged in bounded batches. */
export const durationProperties = (name: string, displayName: string, amount: number, unit: DurationUnit, description: string, show?: Record<string, string[]>): INodeProperties[] => [
	{
		displayName,
		name,
		type: 'number',
		typeOptions: { minValue: 0 },
		default: amount,
		description,
		...(show ? { displayOptions: { show } } : {}),
	},
	{
		displayName: `${displayName} Unit`,
		name: `${name}Unit`,
		type: 'options',
		options: unitOptions,
		default: unit,
		...(show ? { displayOptions: { show } } : {}),
	},
];

export function readDuration(ctx: IExecuteFunctions, name: string, what: string): number {
	const amount = ctx.getNodeParameter(name, 0) as number;
	const unit = ctx.getNodeParameter(`${name}Unit`, 0) as DurationUnit;
	return toMilliseconds(amount, unit, what);
}

/**
 * Namespace per item: constant in the usual case, read per item only when it holds an expression.
 * An editor test run gets its test namespace instead (see testRuns.ts), unless the node is set to
 * use the production namespace; the Idempotency Ledger node always gets the production one.
 */
export function namespaceReader(ctx: IExecuteFunctions): (itemIndex: number, item: INodeExecutionData) => string {
	const production = productionNamespaceReader(ctx);
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

/** The namespace the node's Scope and Namespace name, whatever the execution mode. */
function productionNamespaceReader(ctx: IExecuteFunctions): (itemIndex: number, item: INodeExecutionData) => string {
	const scope = ctx.getNodeParameter('scope', 0) as string;
	if (scope !== 'shared') {
		const id = ctx.getWorkflow().id ?? 'unsaved';
		const namespace = `workflow:${id}`;
		return () => namespace;
	}
	const source = parameterSource(ctx, 'namespace');
	if (source.kind === 'constant') {
		// A valid namespace is checked once; a bad one fails every item, so "continue on fail"
		// still applies.
		const value = source.read(0, { json: {} });
		const namespace = typeof value === 'string' ? value.trim() : value;
		let checked: string | undefined;
		return () => (checked ??= assertNamespace(namespace));
	}
	return (i, item) => {
		const value = source.read(i, item);
		return assertNamespace(typeof value === 'string' ? value.trim() : typeof value === 'number' ? String(value) : value);
	};
}
