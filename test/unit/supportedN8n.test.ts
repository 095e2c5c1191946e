/**
 * An n8n too old for the package (before 1.85.0, no `NodeConnectionTypes`) gets a refusal in words
 * when it loads a node, not a TypeError from deep inside; a supported one loads every node.
 */
import * as workflow from 'n8n-workflow';

import { assertSupportedN8n, n8nMajor } from '../../lib/n8n/supportedN8n';

const NODE_FILES = ['DedupeGate', 'GuardedSend', 'IdempotencyLedger', 'MarkStepDone', 'PromptCache'].map((name) => `../../nodes/${name}/${name}.node`);

test('this n8n-workflow has what the package needs, and its major version is read', () => {
	expect(() => assertSupportedN8n()).not.toThrow();
	expect(n8nMajor()).toBe(Number((require('n8n-workflow/package.json') as { version: string }).version.split('.')[0]));
});

test('an n8n without NodeConnectionTypes is refused with what to do', () => {
	const { NodeConnectionTypes: _, ...older } = workflow as Record<string, unknown>;
	expect(() => assertSupportedN8n(older)).toThrow(
		'n8n-nodes-idempotency cannot load in this n8n: it lacks NodeConnectionTypes, which n8n has since version 1.85.0. Update n8n to 1.123 or later',
	);
});

test.each(NODE_FILES)('%s refuses to load in an n8n without NodeConnectionTypes, and loads in this one', (file) => {
	jest.isolateModules(() => {
		jest.doMock('n8n-workflow', () => {
			const { NodeConnectionTypes: _, ...older } = jest.requireActual('n8n-workflow');
			return older;
		});
		expect(() => require(file)).toThrow(/cannot load in this n8n: it lacks NodeConnectionTypes/);
		jest.dontMock('n8n-workflow');
	});
	jest.isolateModules(() => {
		const loaded = require(file) as Record<string, new () => { description: { name: string } }>;
		const [NodeClass] = Object.values(loaded);
		expect(new NodeClass().description.name).toEqual(expect.any(String));
	});
});
