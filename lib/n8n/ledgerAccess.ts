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
import { BUILTIN_CREDENTIAL, openBuiltinLedger, testBuiltinCredential } from './builtinCredential';
import { POSTGRES_CREDENTIAL, postgresSettingsFrom, testPostgresConnection } from './postgresCredential';
import { REDIS_CREDENTIAL, redisSettingsFrom, testRedisCredential } from './redisCredential';
import { ACCEPT_KEY_LOSS, checkRedisForRun } from './redisSafety';

/** The "Ledger" selector, without its default (see backendProperties). */
const backendChoice: INodeProperties = {
	displayName: 'Ledger',
	name: 'backend',
	type: 'options',
	noDataExpression: true,
	options: [
		{
			name: 'Built-in (this n8n only)',
			value: 'builtin',
			description: 'Nothing to set up: a file in n8n\'s own folder. One n8n only: not in queue mode.',
		},
		{
			name: 'PostgreSQL',
			value: 'postgres',
			description: 'Durable and shared: for more than one n8n process (queue mode), or the ledger in your database',
		},
		{
			name: 'Redis',
			value: 'redis',
			description: 'Fast; keeps the ledger only with persistence on and key eviction off',
		},
	],
	default: 'builtin',
	description: 'Where the idempotency ledger is kept',
};

/** The versions of every node: 2 is version 1 with *Ledger* defaulting to Built-in. */
export const NODE_VERSIONS = [1, 2];

/**
 * The "Ledger" selector every node starts with. Only the chosen backend's credential is shown.
 * Version 1 of every node defaulted to PostgreSQL, version 2 defaults to Built-in (nothing to set
 * up). n8n does not save a parameter left at its default, so a saved node's default must never
 * change: a workflow saved with version 1 keeps it, and its PostgreSQL ledger.
 */
export const backendProperties: INodeProperties[] = [
	{ ...backendChoice, default: 'postgres', displayOptions: { show: { '@version': [1] } } },
	{ ...backendChoice, default: 'builtin', displayOptions: { show: { '@version': [2] } } },
];

/**
 * The credential entries of the ledger, the same in every node: `credentials: ledgerCredentials`.
 * Guarded Send, which lists more credentials, repeats them as literals: n8n's lint rule
 * node-class-description-credentials-name-unsuffixed crashes on a spread inside the array.
 * Idempotency Ledger's copy puts its direction (e.g. `builtinIntoPostgres`) in `backend`: each
 * credential is hidden for the directions that do not read or write its kind.
 */
export const ledgerCredentials: INodeCredentialDescription[] = [
	{
		name: POSTGRES_CREDENTIAL,
		required: true,
		testedBy: 'idempotencyPostgresApiTest',
		displayOptions: { hide: { backend: ['redis', 'builtin', 'builtinIntoRedis'] } },
	},
	{
		name: REDIS_CREDENTIAL,
		required: true,
		testedBy: 'idempotencyRedisApiTest',
		displayOptions: { hide: { backend: ['postgres', 'builtin', 'builtinIntoPostgres'] } },
	},
	{
		// Optional: without one the Built-in ledger uses its defaults (builtinSettingsFrom).
		name: BUILTIN_CREDENTIAL,
		required: false,
		testedBy: 'idempotencyBuiltinApiTest',
		displayOptions: { hide: { backend: ['postgres', 'redis', 'postgresIntoRedis', 'redisIntoPostgres'] } },
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
	async idempotencyBuiltinApiTest(
		this: ICredentialTestFunctions,
		credential: ICredentialsDecrypted,
	): Promise<INodeCredentialTestResult> {
		return await testBuiltinCredential((credential.data ?? {}) as Record<string, unknown>);
	},
};

/**
 * The ledger for this node's credential: a client (pool) shared by every execution in this
 * process, with its schema created on first use. Throws LedgerUnavailableError when the
 * ledger cannot be reached, so the caller fails closed.
 */
export async function openLedger(ctx: IExecuteFunctions): Promise<Ledger> {
	const backend = ctx.getNodeParameter('backend', 0, 'postgres') as unknown;
	if (backend !== 'postgres' && backend !== 'redis' && backend !== 'builtin') {
		// E.g. Idempotency Ledger's copy direction left in place after switching to another operation.
		throw new LedgerInputError(`The ledger ${JSON.stringify(backend)} is not one of: builtin, postgres, redis`, 'Pick Built-in, PostgreSQL or Redis in "Ledger".');
	}
	return await openLedgerOf(ctx, backend);
}

/** The ledger of this node's credential of one kind (see openLedger). Idempotency Ledger's copy opens both. */
export async function openLedgerOf(ctx: IExecuteFunctions, backend: 'builtin' | 'postgres' | 'redis'): Promise<Ledger> {
	if (backend === 'builtin') {
		// Refuses queue mode, a Node.js without node:sqlite, a folder it cannot write and a network
		// file system, before anything is claimed.
		// No credential: the default file in n8n's folder, swept in the background.
		const chosen = ctx.getNode().credentials?.[BUILTIN_CREDENTIAL];
		return await openBuiltinLedger(chosen ? ((await ctx.getCredentials(BUILTIN_CREDENTIAL)) as Record<string, unknown>) : {});
	}
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
