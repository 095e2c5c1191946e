import { updateDisplayOptions, type IDataObject, type IExecuteFunctions, type INodeProperties } from 'n8n-workflow';

import { LedgerError, LedgerInputError, LedgerUnavailableError } from '../../../../lib/ledger/errors';
import { canExport, canImport, copyLedger, DEFAULT_TRANSFER_BATCH, type CopyTotals } from '../../../../lib/ledger/transfer';
import type { Ledger } from '../../../../lib/ledger/types';
import { failedItem, toNodeError } from '../../../../lib/n8n/errors';
import { openLedgerOf } from '../../../../lib/n8n/ledgerAccess';
import { BUILTIN_CREDENTIAL } from '../../../../lib/n8n/builtinCredential';
import { POSTGRES_CREDENTIAL } from '../../../../lib/n8n/postgresCredential';
import { REDIS_CREDENTIAL } from '../../../../lib/n8n/redisCredential';
import { type Execute, readWholeNumber } from '../common';

export const MAX_COPY_BATCH = 5000;

type Kind = 'builtin' | 'postgres' | 'redis';
const NAMES: Record<Kind, string> = { builtin: 'Built-in', postgres: 'PostgreSQL', redis: 'Redis' };
const CREDENTIALS: Record<Kind, string> = { builtin: BUILTIN_CREDENTIAL, postgres: POSTGRES_CREDENTIAL, redis: REDIS_CREDENTIAL };
/** The credential types' names as n8n shows them. */
const CREDENTIAL_NAMES: Record<Kind, string> = {
	builtin: 'Idempotency Ledger (Built-in) API',
	postgres: 'Idempotency Ledger (PostgreSQL) API',
	redis: 'Idempotency Ledger (Redis) API',
};

/**
 * The copy's direction, in the place of the "Ledger" selector: n8n gives a node one credential of
 * each type, so the source and the target are always of two different kinds, and the credentials
 * of exactly those two show (lib/n8n/ledgerAccess.ts). The main case: the Built-in ledger of one
 * n8n, outgrown, into PostgreSQL or Redis. Nothing is copied into a Built-in ledger.
 */
export const COPY_DIRECTIONS: Record<string, { from: Kind; into: Kind }> = {
	builtinIntoPostgres: { from: 'builtin', into: 'postgres' },
	builtinIntoRedis: { from: 'builtin', into: 'redis' },
	postgresIntoRedis: { from: 'postgres', into: 'redis' },
	redisIntoPostgres: { from: 'redis', into: 'postgres' },
};

/** Named `backend` like the selector it replaces, so the ledger credentials' display rules show the two of a direction. */
export const copyDirectionProperty: INodeProperties = {
	displayName: 'Copy',
	name: 'backend',
	type: 'options',
	noDataExpression: true,
	displayOptions: { show: { resource: ['ledger'], operation: ['copyInto'] } },
	options: [
		{ name: 'Built-in Into PostgreSQL', value: 'builtinIntoPostgres', description: 'Read this n8n\'s Built-in ledger, write into the PostgreSQL ledger' },
		{ name: 'Built-in Into Redis', value: 'builtinIntoRedis', description: 'Read this n8n\'s Built-in ledger, write into the Redis ledger' },
		{ name: 'PostgreSQL Into Redis', value: 'postgresIntoRedis', description: 'Read the PostgreSQL ledger, write into the Redis ledger' },
		{ name: 'Redis Into PostgreSQL', value: 'redisIntoPostgres', description: 'Read the Redis ledger, write into the PostgreSQL ledger' },
	],
	default: 'postgresIntoRedis',
	description: 'Which ledger is read (the source) and which is written (the target). The credentials of both are below.',
};

const properties: INodeProperties[] = [
	{
		displayName:
			'Copies every key, step, checkpoint, daily counter and release audit entry of the source ledger into the target. Safe to run again (also after a copy that stopped): what the target already has is kept, and a completed or possibly-sent row is never reopened. Stop the workflows that use the source first, or run the copy again after they stopped.',
		name: 'copyNotice',
		type: 'notice',
		default: '',
	},
	{
		displayName: 'Batch Size',
		name: 'copyBatchSize',
		type: 'number',
		typeOptions: { minValue: 1, maxValue: MAX_COPY_BATCH },
		default: DEFAULT_TRANSFER_BATCH,
		description: `Rows read and written per round (up to ${MAX_COPY_BATCH.toLocaleString('en-US')})`,
	},
];

export const description = updateDisplayOptions({ show: { resource: ['ledger'], operation: ['copyInto'] } }, properties);

/** A failure opening one side, saying which side and which credential. */
function sideError(error: unknown, side: 'source' | 'target', kind: Kind): unknown {
	const where = `The ${side} ledger (${NAMES[kind]})`;
	if (error instanceof LedgerUnavailableError) return new LedgerUnavailableError(`${where}: ${error.message}`, error.hint ?? '', error.code);
	if (error instanceof LedgerError) return new LedgerError(`${where}: ${error.message}`, error.hint);
	return error;
}

async function open(ctx: IExecuteFunctions, side: 'source' | 'target', kind: Kind): Promise<Ledger> {
	const chosen = await ctx.getCredentials(CREDENTIALS[kind]).then(
		() => true,
		() => false,
	);
	if (!chosen) {
		throw new LedgerInputError(
			`No ${NAMES[kind]} ledger credential is chosen for the ${side} of the copy`,
			`Choose an "${CREDENTIAL_NAMES[kind]}" credential in the node, below "Copy".`,
		);
	}
	try {
		return await openLedgerOf(ctx, kind);
	} catch (error) {
		throw sideError(error, side, kind);
	}
}

function totalsJson(from: Kind, into: Kind, t: CopyTotals): IDataObject {
	return {
		from: NAMES[from],
		into: NAMES[into],
		rowsCopied: t.rowsCopied,
		rowsReplaced: t.rowsReplaced,
		rowsAlreadyPresent: t.rowsAlreadyPresent,
		rowsSkippedOlder: t.rowsSkippedOlder,
		checkpointsCopied: t.checkpointsCopied,
		checkpointsKept: t.checkpointsKept,
		counterDaysCopied: t.counterDaysCopied,
		counterDaysKept: t.counterDaysKept,
		auditCopied: t.auditCopied,
		auditAlreadyPresent: t.auditAlreadyPresent,
		batches: t.batches,
		durationMs: t.durationMs,
		finishedAt: new Date().toISOString(),
	};
}

/**
 * Copies the whole source ledger into the target, once per execution whatever the number of input
 * items (a copy is of the whole ledger): one output item with the counts.
 */
export const execute: Execute = async function (items) {
	const node = this.getNode();
	try {
		const direction = this.getNodeParameter('backend', 0) as unknown;
		const pair = typeof direction === 'string' && Object.prototype.hasOwnProperty.call(COPY_DIRECTIONS, direction) ? COPY_DIRECTIONS[direction] : null;
		if (!pair) {
			throw new LedgerInputError(
				`The copy direction ${JSON.stringify(direction)} is not one of: ${Object.keys(COPY_DIRECTIONS).join(', ')}`,
				`Pick one of ${copyDirectionProperty.options!.map((o) => `"${(o as { name: string }).name}"`).join(', ')} in "Copy".`,
			);
		}
		const batchSize = readWholeNumber(this, 'copyBatchSize', 0, 'batch size', 1, MAX_COPY_BATCH, DEFAULT_TRANSFER_BATCH);
		const source = await open(this, 'source', pair.from);
		const target = await open(this, 'target', pair.into);
		if (!canExport(source) || !canImport(target)) throw new LedgerInputError(`A ${NAMES[pair.from]} ledger cannot be copied into a ${NAMES[pair.into]} ledger by this version`);
		const totals = await copyLedger(source, target, { batchSize });
		return [{ json: totalsJson(pair.from, pair.into, totals), pairedItem: { item: 0 } }];
	} catch (error) {
		const nodeError = toNodeError(node, error, 0);
		if (!this.continueOnFail()) throw nodeError;
		return [failedItem(node, items[0] ?? { json: {} }, 0, nodeError)];
	}
};
