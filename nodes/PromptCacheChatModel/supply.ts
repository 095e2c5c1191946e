import { randomUUID } from 'crypto';
import { NodeConnectionTypes, NodeOperationError, type IDataObject, type IExecuteFunctions, type ISupplyDataFunctions } from 'n8n-workflow';

import { LedgerInputError } from '../../lib/ledger/errors';
import type { Ledger } from '../../lib/ledger/types';
import { assertNamespace } from '../../lib/ledger/validate';
import { deferCounts } from '../../lib/n8n/countBuffer';
import { toNodeError } from '../../lib/n8n/errors';
import { openLedger } from '../../lib/n8n/ledgerAccess';
import { readDurationOption } from '../../lib/n8n/scope';
import { namedNamespaceCheck, testNamespace, testRunPolicy } from '../../lib/n8n/testRuns';
import { ANSWER_WITHIN, KEEP_ANSWERS, readPrices, WAIT_UP_TO } from '../PromptCache/options';
import type { CacheHost, ChatCacheSettings } from './cachedModel';

/** Prompt Cache Chat Model's settings from its panel, and the n8n side of the cache (CacheHost). */
/** The ledger helpers take n8n's execute functions; a sub-node's supply-data functions have every method they call. */
const asExecute = (ctx: ISupplyDataFunctions) => ctx as unknown as IExecuteFunctions;

const toFlag = (value: unknown) => value === true || value === 'true' || value === 1;

export function readSettings(ctx: ISupplyDataFunctions, itemIndex: number): ChatCacheSettings {
	const exec = asExecute(ctx);
	const options = ctx.getNodeParameter('options', itemIndex, {}) as IDataObject;
	const policy = testRunPolicy(exec);
	const named = String(options.namespace ?? '').trim();
	let namespace = named ? namedNamespaceCheck(exec)(assertNamespace(named)) : `workflow:${ctx.getWorkflow().id ?? 'unsaved'}`;
	if (policy.choice === 'separate') namespace = testNamespace(namespace);
	const kb = options.maxResponseKb === undefined ? 256 : Number(options.maxResponseKb);
	if (!Number.isFinite(kb) || kb <= 0) throw new LedgerInputError(`"Max Answer Size (KB)" must be a positive number, not ${JSON.stringify(options.maxResponseKb)}`, 'Enter the largest answer to keep, in KB, e.g. 256.');
	return {
		namespace,
		ttlMs: readDurationOption(exec, KEEP_ANSWERS),
		leaseMs: readDurationOption(exec, ANSWER_WITHIN),
		waitMs: readDurationOption(exec, WAIT_UP_TO),
		shadow: options.shadowMode === true,
		// "Skip the Ledger" for an editor test run: the model is asked, nothing is read or written.
		skip: toFlag(options.skipCache) || policy.choice === 'skip',
		force: toFlag(options.forceRefresh),
		anyTemperature: options.anyTemperature === true,
		failClosed: options.failClosed === true,
		prices: readPrices(options),
		recordStats: options.recordStats !== false && policy.choice !== 'skip',
		maxBytes: Math.round(kb * 1024),
	};
}

export function hostFor(ctx: ISupplyDataFunctions): CacheHost {
	const node = ctx.getNode();
	let ledger: Promise<Ledger> | null = null;
	const told = new Set<string>();
	const executionId = ctx.getExecutionId();
	return {
		ledger: () => {
			// A failed open is not kept: the next call tries again.
			ledger ??= openLedger(asExecute(ctx)).catch((error: unknown) => {
				ledger = null;
				throw error;
			});
			return ledger;
		},
		holder: executionId ? `execution:${executionId}` : `local:${randomUUID()}`,
		report: (call, error) => {
			// Each model call shows as a run of this node: what the cache did, and why.
			const input = { promptHash: call.promptHash, namespace: call.namespace, model: call.model, keyReceipt: call.keyReceipt };
			const { index } = ctx.addInputData(NodeConnectionTypes.AiLanguageModel, [[{ json: input as unknown as IDataObject }]]);
			if (error !== undefined) {
				const nodeError = new NodeOperationError(node, error instanceof Error ? error : new Error(String(error)), { description: `Prompt Cache Chat Model: ${call.reason}` });
				ctx.addOutputData(NodeConnectionTypes.AiLanguageModel, index, nodeError);
			} else {
				ctx.addOutputData(NodeConnectionTypes.AiLanguageModel, index, [[{ json: { cache: call } as unknown as IDataObject }]]);
			}
		},
		warn: (message) => {
			if (told.has(message)) return;
			told.add(message);
			ctx.logger.warn(`n8n-nodes-idempotency: "${node.name}": ${message}`);
			ctx.addExecutionHints({ message, type: 'warning', location: 'outputPane' });
		},
		countLater: (ledger, counts) => deferCounts(asExecute(ctx), ledger, counts),
		stopError: (error, refused) => {
			const base = toNodeError(node, error);
			if (refused) return base;
			return new NodeOperationError(node, base.message, {
				description: '"Stop if the Ledger Is Down" is on, so the model was not asked. Check the ledger credential and that the ledger is running, or turn the option off to have the model asked uncached while the ledger is down.',
			});
		},
	};
}

