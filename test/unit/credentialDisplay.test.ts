import { NodeHelpers, type INode, type INodeParameters, type INodeType } from 'n8n-workflow';

import { DedupeGate } from '../../nodes/DedupeGate/DedupeGate.node';
import { GuardedSend } from '../../nodes/GuardedSend/GuardedSend.node';
import { IdempotencyLedger } from '../../nodes/IdempotencyLedger/IdempotencyLedger.node';
import { COPY_DIRECTIONS } from '../../nodes/IdempotencyLedger/actions/ledger/copy.operation';
import { MarkStepDone } from '../../nodes/MarkStepDone/MarkStepDone.node';
import { PromptCache } from '../../nodes/PromptCache/PromptCache.node';

const nodes: Array<[string, INodeType]> = [
	['Dedupe Gate', new DedupeGate()],
	['Guarded Send', new GuardedSend()],
	['Idempotency Ledger', new IdempotencyLedger()],
	['Mark Step Done', new MarkStepDone()],
	['Prompt Cache', new PromptCache()],
];

/** The credential types n8n offers (and lets the node read) for these parameter values, on a node of `typeVersion`. */
function offered(node: INodeType, values: INodeParameters, typeVersion = 2): string[] {
	const placed = { typeVersion, parameters: values } as unknown as INode;
	const parameters = NodeHelpers.getNodeParameters(node.description.properties, values, true, false, placed, node.description) ?? {};
	return (node.description.credentials ?? [])
		.filter((credential) => NodeHelpers.displayParameter(parameters, credential, placed, node.description))
		.map((credential) => credential.name);
}

describe('credentials and the parameters they depend on', () => {
	// n8n's editor takes every parameter that a credential's `displayOptions.show` names out of
	// the node's panel (it offers the first such one in the credential dialog instead, and none
	// of the rest anywhere), and with it every parameter named in the `show` rule of such a
	// parameter. Seen in the real editor: Backend and Guarded Send's Channel could not be set.
	// The credentials therefore say when they are NOT needed (`hide`), which the editor and the
	// engine read the same way, and the panel keeps every parameter.
	test.each(nodes)('%s: no credential uses displayOptions.show', (_name, node) => {
		for (const credential of node.description.credentials ?? []) expect(credential.displayOptions?.show).toBeUndefined();
	});

	test.each(nodes)('%s: exactly one ledger credential per backend, on both versions', (_name, node) => {
		for (const version of [1, 2]) {
			const ledgerOnes = (values: INodeParameters) => offered(node, values, version).filter((n) => n.startsWith('idempotency'));
			expect(ledgerOnes({ backend: 'postgres' })).toEqual(['idempotencyPostgresApi']);
			expect(ledgerOnes({ backend: 'redis' })).toEqual(['idempotencyRedisApi']);
			expect(ledgerOnes({ backend: 'builtin' })).toEqual(['idempotencyBuiltinApi']);
		}
	});

	test.each(nodes)('%s: Ledger left at its default is PostgreSQL on version 1 (saved workflows keep it) and Built-in on version 2, whose credential is optional', (_name, node) => {
		const ledgerOnes = (version: number) => offered(node, {}, version).filter((n) => n.startsWith('idempotency'));
		expect(ledgerOnes(1)).toEqual(['idempotencyPostgresApi']);
		expect(ledgerOnes(2)).toEqual(['idempotencyBuiltinApi']);
		expect(node.description.credentials?.find((c) => c.name === 'idempotencyBuiltinApi')?.required).toBe(false);
		expect(node.description.version).toEqual([1, 2]);
	});

	test('Idempotency Ledger: a copy offers exactly the two ledger credentials of its direction, the source and the target', () => {
		const ledger = new IdempotencyLedger();
		const expected: Record<string, string[]> = {
			builtinIntoPostgres: ['idempotencyPostgresApi', 'idempotencyBuiltinApi'],
			builtinIntoRedis: ['idempotencyRedisApi', 'idempotencyBuiltinApi'],
			postgresIntoRedis: ['idempotencyPostgresApi', 'idempotencyRedisApi'],
			redisIntoPostgres: ['idempotencyPostgresApi', 'idempotencyRedisApi'],
		};
		// Every direction the node offers is checked, and only those.
		expect(Object.keys(COPY_DIRECTIONS).sort()).toEqual(Object.keys(expected).sort());
		for (const [backend, credentials] of Object.entries(expected)) {
			expect([backend, offered(ledger, { resource: 'ledger', operation: 'copyInto', backend })]).toEqual([backend, credentials]);
		}
	});

	const guardedSend = new GuardedSend();
	const channelCredentials = (values: INodeParameters) => offered(guardedSend, values).filter((n) => !n.startsWith('idempotency'));

	test('Guarded Send: Slack and email offer only their own credentials; email\'s IMAP (the Sent folder check) is optional', () => {
		expect(channelCredentials({ channel: 'slack' })).toEqual(['slackApi']);
		expect(channelCredentials({ channel: 'email' })).toEqual(['smtp', 'imap']);
		const declared = (name: string) => guardedSend.description.credentials?.find((c) => c.name === name);
		expect(declared('smtp')?.required).toBe(true);
		expect(declared('imap')?.required).toBe(false);
		expect(channelCredentials({ channel: 'http', authentication: 'none' })).not.toContain('imap');
	});

	test('Guarded Send: HTTP offers none without authentication, and exactly the chosen generic type with it', () => {
		expect(channelCredentials({ channel: 'http', authentication: 'none' })).toEqual([]);
		for (const type of ['httpBasicAuth', 'httpBearerAuth', 'httpCustomAuth', 'httpHeaderAuth', 'httpQueryAuth', 'oAuth1Api', 'oAuth2Api']) {
			expect(channelCredentials({ channel: 'http', authentication: 'genericCredentialType', genericAuthType: type })).toEqual([type]);
		}
	});
});
