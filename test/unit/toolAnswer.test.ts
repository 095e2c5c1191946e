import { NodeOperationError, type INode } from 'n8n-workflow';

import { unsafeRedisError } from '../../lib/n8n/redisSafety';
import { toNodeError } from '../../lib/n8n/errors';
import { toolSentence } from '../../nodes/GuardedSend/toolAnswer';

const node = { name: 'Send', type: 'n8n-nodes-idempotency.guardedSendTool', typeVersion: 1, position: [0, 0], parameters: {} } as unknown as INode;

describe('the tool answer of a failed call', () => {
	test('a Redis that can lose keys: every sentence ends once, never with ".."', () => {
		const report = { risks: [{ setting: 'persistence' as const, server: '127.0.0.1:6379', found: 'appendonly no and no save rules', effect: 'a restart loses every key', fix: 'CONFIG SET appendonly yes' }], unknown: [] };
		const answer = toolSentence({}, toNodeError(node, unsafeRedisError(report)));
		expect(answer).toMatch(/^Not sent: The ledger Redis can lose keys/);
		expect(answer).not.toMatch(/\.\./);
		expect(answer).toMatch(/Nothing was sent by this call; do not retry until the problem above is fixed\.$/);
	});

	test('a message without a full stop gets one; a hint keeps its own', () => {
		const answer = toolSentence({}, new NodeOperationError(node, 'The key is empty', { description: 'Set Key From.' }));
		expect(answer).toBe('Not sent: The key is empty. Set Key From. Nothing was sent by this call; do not retry until the problem above is fixed.');
	});
});
