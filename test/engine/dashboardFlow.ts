/**
 * Idempotency Ledger's Render Dashboard through n8n-core's real engine, the same on every backend
 * (dashboard.engine.test.ts: PostgreSQL and Redis; sqlite.dashboard.engine.test.ts: Built-in).
 * A Dedupe Gate run twice in the workflow's own namespace counts its duplicates of the day; rows
 * made with the ledger directly are a stuck send and a Needs Review with its destination check;
 * Prompt Cache's counters are added as Lookup adds them. The page must show what the ledger says.
 */
import type { ICredentialDataDecryptedObject, INodeParameters } from 'n8n-workflow';

import type { Ledger } from '../../lib/ledger';
import { DedupeGate } from '../../nodes/DedupeGate/DedupeGate.node';
import { IdempotencyLedger } from '../../nodes/IdempotencyLedger/IdempotencyLedger.node';
import { chartTotal, countCell, listSection } from '../support/dashboardPage';
import { chain, node, runWorkflow } from '../support/engine';

const LEDGER_TYPE = 'n8n-nodes-idempotency.idempotencyLedger';
const GATE_TYPE = 'n8n-nodes-idempotency.dedupeGate';
const WORKFLOW_ID = 'wf-dash';
const WORKFLOW_NS = `workflow:${WORKFLOW_ID}`;
const SHARED = 'payments <b>&amp;</b> refunds';

export interface DashboardBackend {
	name: string;
	/** The nodes' "Ledger" parameter. */
	backend: 'postgres' | 'redis' | 'builtin';
	open(): Promise<{ ledger: Ledger; credentials: Record<string, ICredentialDataDecryptedObject>; dispose(): Promise<void> }>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function describeDashboard(b: DashboardBackend, closeAll: () => Promise<void>) {
	describe(`Idempotency Ledger → Render Dashboard on ${b.name}`, () => {
		let fx: Awaited<ReturnType<DashboardBackend['open']>>;
		const run = (parameters: INodeParameters, items: object[] = [{}], continueOnFail = false) =>
			runWorkflow(
				{
					name: 'Orders <main>',
					nodes: [
						node('Start', 'test.manualTrigger'),
						node('Items', 'test.items', { items: JSON.stringify(items) }),
						node('Ledger', LEDGER_TYPE, { backend: b.backend, resource: 'ledger', operation: 'dashboard', ...parameters }, continueOnFail ? { onError: 'continueRegularOutput' } : {}),
					],
					connections: chain('Start', 'Items', 'Ledger'),
				},
				{ credentials: fx.credentials, nodeTypes: { [LEDGER_TYPE]: new IdempotencyLedger() }, workflowId: WORKFLOW_ID },
			);
		const gate = (ids: string[]) =>
			runWorkflow(
				{
					nodes: [node('Start', 'test.manualTrigger'), node('Items', 'test.items', { items: JSON.stringify(ids.map((id) => ({ id }))) }), node('Gate', GATE_TYPE, { backend: b.backend, mode: 'seen' })],
					connections: chain('Start', 'Items', 'Gate'),
				},
				{ credentials: fx.credentials, nodeTypes: { [GATE_TYPE]: new DedupeGate() }, workflowId: WORKFLOW_ID },
			);

		beforeAll(async () => {
			fx = await b.open();
			const { ledger } = fx;
			// Four deliveries, then the same four again and one new: four duplicates blocked today.
			expect((await gate(['e1', 'e2', 'e3', 'e4'])).error).toBeUndefined();
			expect((await gate(['e1', 'e2', 'e3', 'e4', 'e5'])).error).toBeUndefined();
			// A send that died mid-way (its lease lapsed in phase sending), and one that needs a person.
			const [claimed] = await ledger.claim([{ namespace: SHARED, key: 'evt_<stuck>', step: 'slack', fingerprint: null }], { mode: 'lease', holder: 'execution:dead', leaseMs: 300, ttlMs: 86_400_000 });
			if (claimed.kind !== 'claimed') throw new Error(`expected a claim, got ${claimed.kind}`);
			expect(await ledger.markPhase([{ namespace: SHARED, key: 'evt_<stuck>', step: 'slack', fence: claimed.record.fence! }], 'sending')).toEqual([true]);
			await ledger.record(
				[{ namespace: SHARED, key: 'evt_review', step: 'slack', status: 'needs_review', result: { check: { outcome: 'not_found', detail: 'no message with this key in #payments', checkedAt: '2026-12-02T08:00:00.000Z' } } }],
				{ ttlMs: 86_400_000 },
			);
			await ledger.record([{ namespace: SHARED, key: 'evt_done', step: 'slack', status: 'completed' }], { ttlMs: 86_400_000 });
			await ledger.addCounts([{ namespace: SHARED, counts: { lookups: 5, hits: 3, tokensSaved: 1200, moneySaved: 0.018 } }]);
			await sleep(400);
		});
		afterAll(async () => {
			await closeAll();
			await fx?.dispose();
		});

		test('one item, an HTML page whose counts, rows and charts are the ledger’s', async () => {
			const result = await run({ title: 'Ops <ledger>' });
			expect(result.error).toBeUndefined();
			const [item, ...rest] = result.items('Ledger');
			expect(rest).toHaveLength(0);
			expect(item.json).toMatchObject({ namespaces: 2, moreNamespaces: false });
			const html = String(item.json.html);
			expect(html.startsWith('<!DOCTYPE html>')).toBe(true);
			expect(html).toContain('<title>Ops &lt;ledger&gt;</title>');
			for (const ns of [WORKFLOW_NS, SHARED]) {
				const stats = await fx.ledger.stats(ns);
				for (const [status, n] of Object.entries(stats.byStatus)) expect({ ns, status, n: countCell(html, ns, status) }).toEqual({ ns, status, n });
				expect(countCell(html, ns, 'stuck')).toBe(stats.stuck);
				expect(countCell(html, ns, 'duplicatesBlocked')).toBe(stats.duplicatesBlocked);
			}
			expect(countCell(html, WORKFLOW_NS, 'completed')).toBe(5);
			expect(countCell(html, WORKFLOW_NS, 'duplicatesBlocked')).toBe(4);
			expect(countCell(html, SHARED, 'stuck')).toBe(1);
			// The workflow's own namespace shows its name; the shared one, escaped.
			expect(html).toContain('<strong>Orders &lt;main&gt;</strong><br><code>workflow:wf-dash</code>');
			expect(html).toContain('<code>payments &lt;b&gt;&amp;amp;&lt;/b&gt; refunds</code>');
			expect(listSection(html, 'stuck')).toContain('evt_&lt;stuck&gt;');
			expect(listSection(html, 'stuck')).toContain('may have been sent');
			expect(listSection(html, 'review')).toContain('evt_review');
			expect(listSection(html, 'review')).toContain('no message with this key in #payments');
			// Today's counters: the gate's duplicates, Prompt Cache's savings.
			expect(chartTotal(html, 'duplicatesBlocked')).toBe(4);
			expect(chartTotal(html, 'hits')).toBe(3);
			expect(chartTotal(html, 'tokensSaved')).toBe(1200);
			expect(chartTotal(html, 'moneySaved')).toBeCloseTo(0.018, 9);
		});

		test('Max Namespaces cuts the list and says so; bad input fails its own item only', async () => {
			const result = await run({ maxNamespaces: '={{ $json.max }}', rowsPerList: 1 }, [{ max: 1 }, { max: 0 }, { max: 'ten' }], true);
			const items = result.items('Ledger');
			expect(items).toHaveLength(3);
			expect(items[0].json).toMatchObject({ namespaces: 1, moreNamespaces: true });
			expect(String(items[0].json.html)).toContain('More namespaces hold rows than this page shows (1)');
			expect(items[1].json.error).toMatch(/max namespaces must be a whole number from 1 to 200/);
			expect(items[2].json.error).toMatch(/max namespaces must be a whole number from 1 to 200, not string "ten"/);
			expect(items.map((i) => i.pairedItem)).toEqual([{ item: 0 }, { item: 1 }, { item: 2 }]);
		});
	});
}
