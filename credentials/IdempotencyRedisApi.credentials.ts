import type { ICredentialType, INodeProperties } from 'n8n-workflow';

import { timeoutProperties } from '../lib/n8n/credentialTimeouts';

export class IdempotencyRedisApi implements ICredentialType {
	name = 'idempotencyRedisApi';

	displayName = 'Idempotency Ledger (Redis) API';

	icon = 'file:idempotencyRedis.svg' as const;

	documentationUrl = 'https://github.com/n8n-nodes-idempotency/n8n-nodes-idempotency/blob/main/docs/credentials.md';

	properties: INodeProperties[] = [
		{
			displayName: 'Host',
			name: 'host',
			type: 'string',
			default: 'localhost',
			required: true,
			hint: 'In Docker, localhost is the n8n container itself: enter the Redis service name instead (redis in docker/docker-compose.yml)',
		},
		{ displayName: 'Port', name: 'port', type: 'number', default: 6379 },
		{
			displayName: 'User',
			name: 'user',
			type: 'string',
			default: '',
			description: 'ACL user name (Redis 6 and newer). Leave empty for the default user.',
		},
		{
			displayName: 'Password',
			name: 'password',
			type: 'string',
			typeOptions: { password: true },
			default: '',
		},
		{
			displayName: 'Database Index',
			name: 'database',
			type: 'number',
			typeOptions: { minValue: 0 },
			default: 0,
			description: 'Number of the Redis database to use. Must be 0 in cluster mode.',
		},
		{
			displayName: 'TLS',
			name: 'tls',
			type: 'boolean',
			default: false,
			description: 'Whether to use TLS',
		},
		{
			displayName: 'Reject Unauthorized',
			name: 'rejectUnauthorized',
			type: 'boolean',
			default: true,
			description: 'Whether to refuse a server certificate that does not verify',
			displayOptions: { show: { tls: [true] } },
		},
		{
			displayName: 'Key Prefix',
			name: 'prefix',
			type: 'string',
			default: 'idem',
			description:
				'Start of every key the ledger writes. Letters, digits, dots, dashes and underscores. Use different prefixes to keep ledgers apart on one Redis.',
		},
		...timeoutProperties('Redis', 'command'),
		{
			displayName: 'I Accept That This Redis May Lose Keys',
			name: 'acceptKeyLoss',
			type: 'boolean',
			default: false,
			description:
				'Whether to use a Redis that can evict keys (a maxmemory-policy other than noeviction under a memory limit) or restart empty (no AOF, no RDB save rules). Off: the nodes refuse such a Redis and say which setting to change. On: they run and every run warns, as a lost key lets a message be sent twice.',
		},
		{
			displayName: 'Cluster Mode',
			name: 'cluster',
			type: 'boolean',
			default: false,
			description: 'Whether the server is a Redis Cluster',
		},
		{
			displayName: 'Cluster Nodes',
			name: 'clusterNodes',
			type: 'string',
			default: '',
			placeholder: 'e.g. 10.0.0.1:6379, 10.0.0.2:6379',
			description: 'Nodes to start from, as host:port separated by commas. Leave empty to start from the host and port above.',
			displayOptions: { show: { cluster: [true] } },
		},
	];
}
