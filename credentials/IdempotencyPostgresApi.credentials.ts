import type { ICredentialType, INodeProperties } from 'n8n-workflow';

import { timeoutProperties } from '../lib/n8n/credentialTimeouts';

export class IdempotencyPostgresApi implements ICredentialType {
	name = 'idempotencyPostgresApi';

	displayName = 'Idempotency Ledger (PostgreSQL) API';

	icon = 'file:idempotencyPostgres.svg' as const;

	documentationUrl = 'https://github.com/n8n-nodes-idempotency/n8n-nodes-idempotency/blob/main/docs/credentials.md';

	properties: INodeProperties[] = [
		{
			displayName: 'Host',
			name: 'host',
			type: 'string',
			default: 'localhost',
			required: true,
			hint: 'In Docker, localhost is the n8n container itself: enter the PostgreSQL service name instead (postgres in docker/docker-compose.yml)',
		},
		{ displayName: 'Port', name: 'port', type: 'number', default: 5432 },
		{ displayName: 'Database', name: 'database', type: 'string', default: 'postgres', required: true },
		{ displayName: 'User', name: 'user', type: 'string', default: 'postgres', required: true },
		{
			displayName: 'Password',
			name: 'password',
			type: 'string',
			typeOptions: { password: true },
			default: '',
		},
		{
			displayName: 'SSL',
			name: 'ssl',
			type: 'options',
			options: [
				{ name: 'Disable', value: 'disable' },
				{ name: 'Require', value: 'require', description: 'Encrypt; verify the certificate only if "Reject Unauthorized" is on' },
				{ name: 'Verify Full', value: 'verify-full', description: 'Encrypt and verify the server certificate and host name' },
			],
			default: 'disable',
		},
		{
			displayName: 'CA Certificate',
			name: 'ca',
			type: 'string',
			typeOptions: { rows: 4 },
			default: '',
			description: 'PEM text of the certificate authority that signed the server certificate',
			displayOptions: { hide: { ssl: ['disable'] } },
		},
		{
			displayName: 'Reject Unauthorized',
			name: 'rejectUnauthorized',
			type: 'boolean',
			default: false,
			description: 'Whether to refuse a server certificate that does not verify',
			displayOptions: { show: { ssl: ['require'] } },
		},
		{
			displayName: 'Schema',
			name: 'schema',
			type: 'string',
			default: 'public',
			description: 'Schema that holds the ledger tables. It is created if it does not exist.',
		},
		{
			displayName: 'Table',
			name: 'table',
			type: 'string',
			default: 'idempotency_ledger',
			description: 'Name of the ledger table. Letters, digits and underscores only.',
		},
		{
			displayName: 'Pool Size',
			name: 'poolSize',
			type: 'number',
			typeOptions: { minValue: 1, maxValue: 100 },
			default: 10,
			description: 'Most connections this n8n process opens to the ledger, shared by all executions',
		},
		...timeoutProperties('PostgreSQL', 'statement'),
	];
}
