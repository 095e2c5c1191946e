import type { IExecuteFunctions, INodeProperties } from 'n8n-workflow';

import { LedgerInputError } from '../ledger/errors';
import { sha256 } from '../ledger/fingerprint';
import { assertNamespace, MAX_NAMESPACE_LENGTH } from '../ledger/validate';

/**
 * Editor test runs ("Execute workflow" or "Execute step" in the n8n editor, execution mode
 * 'manual') must never consume a production key: a person testing with a real event's data
 * would otherwise make the real delivery leave on Duplicate. Every decision about them is made
 * here; `namespaceReader` (scope.ts) applies it, so each node that reads its namespace through it
 * gets it.
 */

/** What an execution does with the ledger. */
export type TestRunChoice = 'separate' | 'production' | 'skip';

export interface TestRunPolicy {
	/** Whether this is an editor test run (execution mode 'manual'). */
	testRun: boolean;
	/** What this execution does: always 'production' when it is not a test run. */
	choice: TestRunChoice;
}

/** Test namespaces start with this, e.g. `editor-test:workflow:42`. */
export const TEST_NAMESPACE_PREFIX = 'editor-test:';

export const isTestNamespace = (namespace: string): boolean => namespace.startsWith(TEST_NAMESPACE_PREFIX);

/** The test namespace of a production namespace; hashed when the prefix would make it too long. */
export function testNamespace(namespace: string): string {
	const name = `${TEST_NAMESPACE_PREFIX}${namespace}`;
	return assertNamespace(name.length <= MAX_NAMESPACE_LENGTH ? name : `${TEST_NAMESPACE_PREFIX}#${sha256(namespace)}`);
}

const OPTION = 'editorTestRuns';

const isNodeType = (ctx: IExecuteFunctions, name: string) => {
	const type = ctx.getNode().type;
	return type === name || type.endsWith(`.${name}`);
};

/**
 * The check of a namespace a person names (Shared Namespace, Scope "Shared Namespace"). One that
 * starts with the test prefix is refused: a real run would write into the test namespace of
 * another one, its keys would be taken by the editor's test runs, and its items would say they
 * came from a test run. The Idempotency Ledger node may name one: that is how a person looks at
 * test rows.
 */
export function namedNamespaceCheck(ctx: IExecuteFunctions): (namespace: string) => string {
	if (isNodeType(ctx, 'idempotencyLedger')) return (namespace) => namespace;
	return (namespace) => {
		if (!isTestNamespace(namespace)) return namespace;
		const rest = namespace.slice(TEST_NAMESPACE_PREFIX.length).replace(/^[:\s]+/, '');
		throw new LedgerInputError(
			`The namespace ${JSON.stringify(namespace)} starts with "${TEST_NAMESPACE_PREFIX}", which is reserved for runs started from the editor`,
			`Choose a namespace that does not start with "${TEST_NAMESPACE_PREFIX}"${rest ? `, e.g. ${JSON.stringify(rest)}` : ''}. Runs started from the editor get a test namespace of their own by themselves (see the "Editor Test Runs" option); to look at the rows of test runs, use the Idempotency Ledger node.`,
		);
	};
}

/** Where the node keeps the choice: its Options collection (Prompt Cache's Store and Get Stats have their own). */
function choicePath(ctx: IExecuteFunctions): string {
	if (isNodeType(ctx, 'promptCache')) {
		const operation = ctx.getNodeParameter('operation', 0, 'lookup') as string;
		if (operation === 'store') return `storeOptions.${OPTION}`;
		if (operation === 'stats') return `statsOptions.${OPTION}`;
	}
	return `options.${OPTION}`;
}

/**
 * What this execution does with the ledger. Only executions in mode 'manual' are test runs;
 * 'webhook', 'trigger', 'cli', 'retry' and the rest are production. The Idempotency Ledger node is
 * how a person acts on production rows, usually with "Execute step", so it never switches.
 */
export function testRunPolicy(ctx: IExecuteFunctions): TestRunPolicy {
	if (ctx.getMode() !== 'manual') return { testRun: false, choice: 'production' };
	if (isNodeType(ctx, 'idempotencyLedger')) return { testRun: true, choice: 'production' };
	const value = ctx.getNodeParameter(choicePath(ctx), 0, 'separate') as unknown;
	const choice: TestRunChoice = value === 'production' || value === 'skip' ? value : 'separate';
	return { testRun: true, choice };
}

/** The execution hint a node adds when it skipped the ledger for a test run. */
export const skippedLedgerHint = (what: string) => ({
	message: `This was a test run from the editor and "Editor Test Runs" is set to "Skip the Ledger": ${what}, and nothing was written to the ledger. Runs started by a trigger or webhook use the ledger as usual.`,
	location: 'outputPane' as const,
});

const separate = {
	name: 'Use a Separate Test Namespace',
	value: 'separate',
	description:
		'Keys of test runs are kept apart from the real ones, so testing with a real event\'s data never makes the real delivery look like a duplicate',
};
const production = {
	name: 'Use the Production Namespace',
	value: 'production',
	description: 'Test runs use the same keys as real runs: a key a test run takes is taken for real runs too',
};
const skip = {
	name: 'Skip the Ledger',
	value: 'skip',
	description: 'Test runs neither check nor record anything in the ledger',
};

/**
 * The "Editor Test Runs" option, for a node's Options collection. `withSkip` offers "Skip the
 * Ledger" too; `extra` is added to the description (e.g. how the namespace is found).
 */
export function editorTestRunsOption(withSkip: boolean, extra = ''): INodeProperties {
	return {
		displayName: 'Editor Test Runs',
		name: OPTION,
		type: 'options',
		noDataExpression: true,
		options: withSkip ? [skip, separate, production] : [separate, production],
		default: 'separate',
		description: `What runs started from the editor ("Execute workflow" or "Execute step") do with the ledger. Runs started by a trigger or webhook always use the real namespace.${extra ? ` ${extra}` : ''}`,
	};
}
