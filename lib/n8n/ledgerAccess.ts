import type {
	ICredentialTestFunctions,
	ICredentialsDecrypted,
	IExecuteFunctions,
	INodeCredentialDescription,
	INodeCredentialTestResult,
	INodeProperties,
} from 'n8n-workflow';

import { LedgerInputError } from '../ledger/errors';
import type { Ledger } from '../ledger/types';
import { postgresLedger } from '../ledger/postgres/connect';
import { toUnavailable } from '../ledger/postgres/errors';
import { redisLedger } from '../ledger/redis/connect';
import { POSTGRES_CREDENTIAL, postgresSettingsFrom, testPostgresConnection } from './postgresCredential';
import { REDIS_CREDENTIAL, redisSettingsFrom, testRedisCredential } from './redisCredential';
import { ACCEPT_KEY_LOSS, checkRedisForRun } from './redisSafety';

/** The "Ledger" selector every node starts with. Only the chosen backend's credential is shown. */
export const backendProperty: INodeProperties = {
	displayName: 'Ledger',
	name: 'backend',
	type: 'options',
	noDataExpression: true,
	options: [
		{ name: 'PostgreSQL', value: 'postgres', description: 'Durable; the recommended source of truth' },
		{
			name: 'Redis',
			value: 'redis',
			description: 'Fast; keeps the ledger only with persistence on and key eviction off',
		},
	],
	default: 'postgres',
	description: 'Where the idempotency ledger is kept',
};

/**
 * The credential entries of the ledger, the same in every node: `credentials: ledgerCredentials`.
 * Guarded Send, which lists more credentials, repeats them as literals: n8n's lint rule
 * node-class-description-credentials-name-unsuffixed crashes on a spread inside the array.
 */
export const ledgerCredentials: INodeCredentialDescription[] = [
	{
		name: POSTGRES_CREDENTIAL,
		required: true,
		testedBy: 'idempotencyPostgresApiTest',
		displayOptions: { hide: { backend: ['redis'] } },
	},
	{
		name: REDIS_CREDENTIAL,
		required: true,
		testedBy: 'idempotencyRedisApiTest',
		displayOptions: { hide: { backend: ['postgres'] } },
	},
];

export const credentialTest = {
	async idempotencyPostgresApiTest(
		this: ICredentialTestFunctions,
		credential: ICredentialsDecrypted,
	): Promise<INodeCredentialTestResult> {
		return await testPostgresConnection((credential.data ?? {}) as Record<string, unknown>);
	},
	async idempotencyRedisApiTest(
		this: ICredentialTestFunctions,
		credential: ICredentialsDecrypted,
	): Promise<INodeCredentialTestResult> {
		return await testRedisCredential((credential.data ?? {}) as Record<string, unknown>);
	},
};

/**
 * The ledger for this node's credential: a client (pool) shared by every execution in this
 * process, with its schema created on first use. Throws LedgerUnavailableError when the
 * ledger cannot be reached, so the caller fails closed.
 */
export async function openLedger(ctx: IExecuteFunctions): Promise<Ledger> {
	const backend = ctx.getNodeParameter('backend', 0, 'postgres') as unknown;
	if (backend !== 'postgres' && backend !== 'redis') {
		// E.g. Idempotency Ledger's copy direction left in place after switching to another operation.
		throw new LedgerInputError(`The ledger ${JSON.stringify(backend)} is not one of: postgres, redis`, 'Pick PostgreSQL or Redis in "Ledger".');
	}
	return await openLedgerOf(ctx, backend);
}

/** The ledger of this node's credential of one kind (see openLedger). Idempotency Ledger's copy opens both. */
export async function openLedgerOf(ctx: IExecuteFunctions, backend: 'postgres' | 'redis'): Promise<Ledger> {
	if (backend === 'redis') {
		const data = (await ctx.getCredentials(REDIS_CREDENTIAL)) as Record<string, unknown>;
		const settings = redisSettingsFrom(data);
		const ledger = redisLedger(settings);
		await ledger.ensureSchema();
		// A Redis that can evict keys or restart empty fails closed unless the credential accepts it.
		await checkRedisForRun(ctx, settings, data[ACCEPT_KEY_LOSS] === true);
		return ledger;
	}
	const ledger = postgresLedger(postgresSettingsFrom((await ctx.getCredentials(POSTGRES_CREDENTIAL)) as Record<string, unknown>));
	try {
		await ledger.ensureSchema();
	} catch (error) {
		throw toUnavailable(error);
	}
	return ledger;
}
