import { readFileSync } from 'fs';
import { join } from 'path';

import { NodeHelpers, type INodeParameters, type INodeType } from 'n8n-workflow';

import { IdempotencyPostgresApi } from '../../credentials/IdempotencyPostgresApi.credentials';
import { IdempotencyBuiltinApi } from '../../credentials/IdempotencyBuiltinApi.credentials';
import { IdempotencyRedisApi } from '../../credentials/IdempotencyRedisApi.credentials';
import { DedupeGate } from '../../nodes/DedupeGate/DedupeGate.node';
import { GuardedSend } from '../../nodes/GuardedSend/GuardedSend.node';
import { IN_PROGRESS_REASONS, NEEDS_REVIEW_REASONS, REASONS, SKIPPED_REASONS } from '../../nodes/GuardedSend/reasons';
import { IdempotencyLedger } from '../../nodes/IdempotencyLedger/IdempotencyLedger.node';
import { MarkStepDone } from '../../nodes/MarkStepDone/MarkStepDone.node';
import { PromptCache } from '../../nodes/PromptCache/PromptCache.node';

const OPTIONS = ['options', 'storeOptions', 'statsOptions'];

/** The top-level controls the panel shows before Options for these parameter values (defaults for the rest). */
function topControls(node: INodeType, values: INodeParameters = {}): string[] {
	const { properties } = node.description;
	const parameters = NodeHelpers.getNodeParameters(properties, values, true, false, null, node.description) ?? {};
	const shown = properties.filter((p) => NodeHelpers.displayParameter(parameters, p, null, node.description));
	const end = shown.findIndex((p) => OPTIONS.includes(p.name));
	return (end === -1 ? shown : shown.slice(0, end)).map((p) => p.displayName);
}

describe('each panel shows at the top only what a flow builder must decide', () => {
	// The honest count for the default settings of each node (and each Guarded Send channel):
	// raise it only for a control that every flow builder must look at; the rest goes under Options.
	test.each([
		['Dedupe Gate', new DedupeGate(), {}, 10],
		['Guarded Send, HTTP', new GuardedSend(), { channel: 'http' }, 12],
		['Guarded Send, Slack', new GuardedSend(), { channel: 'slack' }, 7],
		['Guarded Send, email', new GuardedSend(), { channel: 'email' }, 10],
		['Mark Step Done', new MarkStepDone(), {}, 6],
		['Prompt Cache, Lookup', new PromptCache(), { operation: 'lookup' }, 7],
		['Prompt Cache, Store', new PromptCache(), { operation: 'store' }, 4],
		['Prompt Cache, Get Stats', new PromptCache(), { operation: 'stats' }, 3],
		['Idempotency Ledger, Get Key', new IdempotencyLedger(), { resource: 'key', operation: 'get' }, 6],
		['Idempotency Ledger, Get Checkpoint', new IdempotencyLedger(), { resource: 'checkpoint', operation: 'get' }, 5],
	] as Array<[string, INodeType, INodeParameters, number]>)('%s: at most N controls before Options', (_name, node, values, n) => {
		const top = topControls(node, values);
		expect(top.length).toBeLessThanOrEqual(n);
	});

	test('Guarded Send keeps the retry, timing, scope and bookkeeping choices under Options', () => {
		const send = new GuardedSend();
		for (const channel of ['http', 'slack', 'email']) {
			const top = topControls(send, { channel });
			for (const moved of ['Step', 'Lease', 'Hold Step For', 'When Another Run Is Sending', 'Max Wait (Seconds)', 'When the Content Differs', 'Also Complete the Unit of Work', 'Keep Records For', 'Scope', 'Namespace', 'Idempotency Header', 'ID Field in Response']) {
				expect(top).not.toContain(moved);
			}
		}
		const options = send.description.properties.find((p) => p.name === 'options')?.options?.map((o) => o.name) ?? [];
		expect(options).toEqual(expect.arrayContaining(['step', 'lease', 'leaseUnit', 'whenInProgress', 'maxWait', 'onMismatch', 'completeUnit', 'retention', 'retentionUnit', 'namespace', 'idempotencyHeader', 'responseIdField']));
	});

	test('a key given as an expression keeps its scope under Options (Guarded Send, Mark Step Done)', () => {
		for (const node of [new GuardedSend(), new MarkStepDone()]) {
			const top = topControls(node, { keyFrom: 'expression' });
			expect(top).toEqual(expect.arrayContaining(['Key From', 'Key']));
			expect(top).not.toContain('Scope');
			expect(top).not.toContain('Namespace');
		}
	});

	test('the notice about another workflow\'s keys is shown for keys, not for checkpoints', () => {
		const ledger = new IdempotencyLedger();
		const notice = ledger.description.properties.find((p) => p.type === 'notice')?.displayName;
		expect(topControls(ledger, { resource: 'key', operation: 'get' })).toContain(notice);
		for (const operation of ['get', 'set']) expect(topControls(ledger, { resource: 'checkpoint', operation })).not.toContain(notice);
	});

	test('the HTTP credential has one slot: "Generic Auth Type" is a plain choice, not a second credential picker', () => {
		const generic = new GuardedSend().description.properties.find((p) => p.name === 'genericAuthType');
		expect(generic?.type).toBe('options');
		expect(new GuardedSend().description.properties.some((p) => p.type === 'credentialsSelect')).toBe(false);
	});
});

describe('node search and docs links', () => {
	const codex = (name: string) => JSON.parse(readFileSync(join(__dirname, '../../nodes', name, `${name}.node.json`), 'utf8'));
	const pages: Array<[string, string]> = [
		['DedupeGate', 'dedupe-gate'],
		['GuardedSend', 'guarded-send'],
		['IdempotencyLedger', 'idempotency-ledger'],
		['MarkStepDone', 'mark-step-done'],
		['PromptCache', 'prompt-cache'],
	];

	// n8n appends a tracking query to the docs link, which breaks a #anchor: each node has its own page.
	test.each(pages)('%s: the docs link opens its own page, with no #anchor', (name, page) => {
		const urls = codex(name).resources.primaryDocumentation.map((d: { url: string }) => d.url);
		expect(urls).toEqual([`https://github.com/n8n-nodes-idempotency/n8n-nodes-idempotency/blob/main/docs/nodes/${page}.md`]);
		for (const url of urls) expect(url).not.toContain('#');
	});

	test.each([new IdempotencyBuiltinApi(), new IdempotencyPostgresApi(), new IdempotencyRedisApi()].map((c) => [c.name, c.documentationUrl]))(
		'%s: the credential docs link opens the credentials page, with no #anchor',
		(_name, url) => {
			expect(url).toBe('https://github.com/n8n-nodes-idempotency/n8n-nodes-idempotency/blob/main/docs/credentials.md');
		},
	);

	// n8n's node creator leaves out of its main search every node in the "AI" category whose AI
	// subcategories lack "Root Nodes" (filterOutAiNodes in the editor's useViewStacks.ts).
	test.each(pages)('%s: a node in the AI category is also listed as a root node, so the main search finds it', (name) => {
		const c = codex(name);
		if (c.categories.includes('AI')) expect(c.subcategories.AI).toContain('Root Nodes');
	});

	test.each([
		['PromptCache', 'prompt'],
		['PromptCache', 'cache'],
		['PromptCache', 'LLM'],
		['DedupeGate', 'dedupe'],
	])('%s is found by "%s"', (name, word) => {
		const c = codex(name);
		const display = { PromptCache: 'Prompt Cache', DedupeGate: 'Dedupe Gate' }[name] ?? '';
		expect([display, ...c.alias].some((a: string) => a.toLowerCase().includes(word.toLowerCase()))).toBe(true);
	});
});

describe('Guarded Send reasons', () => {
	const source = ['nodes/GuardedSend/execute.ts', 'lib/n8n/channels/retry.ts'].map((f) => readFileSync(join(__dirname, '../..', f), 'utf8')).join('\n');

	test('every reason the node can put on an item is listed (and the list has no stale entries)', () => {
		const emitted = new Set<string>();
		for (const m of source.matchAll(/reason: '([a-z_]+)'/g)) emitted.add(m[1]);
		for (const m of source.matchAll(/failed\('([a-z_]+)'/g)) emitted.add(m[1]);
		for (const m of source.matchAll(/reason: '([a-z_]+)' \| '([a-z_]+)'(?: \| '([a-z_]+)')?/g)) [m[1], m[2], m[3]].filter(Boolean).forEach((r) => emitted.add(r));
		for (const reason of emitted) expect(REASONS).toContain(reason);
		for (const reason of ['ambiguous', 'rejected', 'gave_up', 'unauthorized', 'out_of_time', 'mismatch', 'marked_for_review', 'already_sent', 'in_progress']) expect(emitted).toContain(reason);
	});

	test('every reason has a plain description, and no reason is called "retry later" in one place and something else in another', () => {
		for (const table of [NEEDS_REVIEW_REASONS, SKIPPED_REASONS, IN_PROGRESS_REASONS]) {
			for (const [reason, text] of Object.entries(table)) {
				expect(reason).toMatch(/^[a-z_]+$/);
				expect(text.length).toBeGreaterThan(20);
			}
		}
		expect(source).not.toContain("'retry_later'");
		expect(source).not.toContain("'exhausted'");
	});
});
