import type { ICredentialType, INodeProperties } from 'n8n-workflow';

export class IdempotencyBuiltinApi implements ICredentialType {
	name = 'idempotencyBuiltinApi';

	displayName = 'Idempotency Ledger (Built-in) API';

	icon = 'file:idempotencyBuiltin.svg' as const;

	documentationUrl = 'https://github.com/n8n-nodes-idempotency/n8n-nodes-idempotency/blob/main/docs/credentials.md';

	properties: INodeProperties[] = [
		{
			displayName:
				'Nothing to set up: the ledger is a file in n8n\'s own folder (~/.n8n; in Docker /home/node/.n8n, the n8n volume). For this n8n only: not in queue mode, not shared between n8n instances.',
			name: 'notice',
			type: 'notice',
			default: '',
		},
		{
			displayName: 'File Name',
			name: 'file',
			type: 'string',
			default: 'idempotency-ledger.sqlite',
			placeholder: 'idempotency-ledger.sqlite',
			description:
				'Name of the ledger file in n8n\'s folder (~/.n8n), or an absolute path on a local disk. Use different names to keep ledgers apart. Empty: idempotency-ledger.sqlite.',
		},
		{
			displayName: 'Sweep Expired Rows',
			name: 'sweepExpired',
			type: 'boolean',
			default: true,
			description:
				'Whether to delete rows past their retention in the background (a turn at most every 10 seconds after a claim, up to 100,000 rows), so that the file does not grow. Off: expired rows still count as absent, and the Idempotency Ledger node\'s Purge Expired deletes them.',
		},
	];
}
