import type {
	ICredentialTestFunctions,
	ICredentialsDecrypted,
	IExecuteFunctions,
	INodeCredentialDescription,
	INodeCredentialTestResult,
	INodeProperties,
} from 'n8n-workflow';

import type { Ledger } from '../ledger/types';
import { postgresLedger } from '../ledger/postgres/connect';
import { toUnavailable } from '../ledger/postgres/errors';
import { POSTGRES_CREDENTIAL, postgresSettingsFrom, testPostgresConnection } from './postgresCredential';

/** The "Ledger" selector every node starts with. Only the chosen backend's credential is shown. */
export const backendProperty: INodeProperties = {
	displayName: 'Ledger',
	name: 'backend',
	type: 'options',
	noDataExpression: true,
	options: [
		{ name: 'PostgreSQL', value: 'postgres', description: 'Durable; the recommended source of truth' },
	],
	default: 'postgres',
	description: 'Where the idempotency ledger is kept',
};

export const ledgerCredentials: INodeCredentialDescription[] = [
	{
		name: POSTGRES_CREDENTIAL,
		required: true,
		testedBy: 'idempotencyPostgresApiTest',
		displayOptions: { show: { backend: ['postgres'] } },
	},
];

export const credentialTest = {
	async idempotencyPostgresApiTest(
		this: ICredentialTestFunctions,
		credential: ICredentialsDecrypted,
	): Promise<INodeCredentialTestResult> {
		return await testPostgresConnection((credential.data ?? {}) as Record<string, unknown>);
	},
};

/**
 * The ledger for this node's credential: a pooled client shared by every execution in this
 * process, with its schema created on first use. Throws LedgerUnavailableError when the
 * ledger cannot be reached, so the caller fails closed.
 */
export async function openLedger(ctx: IExecuteFunctions): Promise<Ledger> {
	const data = (await ctx.getCredentials(POSTGRES_CREDENTIAL)) as Record<string, unknown>;
	const ledger = postgresLedger(postgresSettingsFrom(data));
	try {
		await ledger.ensureSchema();
	} catch (error) {
		throw toUnavailable(error);
	}
	return ledger;
}
