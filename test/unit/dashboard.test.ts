/**
 * The dashboard page (lib/dashboard/render.ts) as a pure function: what it shows, that everything
 * from the ledger is escaped, and that it loads nothing from anywhere.
 */
import { renderDashboard, windowDays, type DashboardData, type DashboardNamespace } from '../../lib/dashboard/render';
import { chartTotal, countCell as cell, listSection } from '../support/dashboardPage';

const NOW = new Date('2026-12-02T09:00:00Z');
const EVIL = `<script>alert("x")</script><img src="http://evil.example/a.png">'&`;

function ns(namespace: string, extra: Partial<DashboardNamespace> = {}): DashboardNamespace {
	return {
		namespace,
		name: null,
		byStatus: { in_progress: 0, completed: 0, failed_retryable: 0, needs_review: 0 },
		stuck: 0,
		duplicatesBlocked: 0,
		stuckRows: [],
		reviewRows: [],
		days: [],
		...extra,
	};
}

const page = (namespaces: DashboardNamespace[], extra: Partial<DashboardData> = {}) =>
	renderDashboard({ title: 'Ledger', generatedAt: NOW, windowDays: 7, namespaces, moreNamespaces: false, rowsPerList: 5, ...extra });

describe('dashboard page', () => {
	test('counts by status per namespace, stuck, total and duplicates blocked; the workflow name where known', () => {
		const html = page([
			ns('workflow:abc', { name: 'Stripe → Slack', byStatus: { in_progress: 3, completed: 12_345, failed_retryable: 1, needs_review: 2 }, stuck: 2, duplicatesBlocked: 77 }),
			ns('crm-contacts'),
		]);
		expect(cell(html, 'workflow:abc', 'completed')).toBe(12_345);
		expect(cell(html, 'workflow:abc', 'in_progress')).toBe(3);
		expect(cell(html, 'workflow:abc', 'needs_review')).toBe(2);
		expect(cell(html, 'workflow:abc', 'failed_retryable')).toBe(1);
		expect(cell(html, 'workflow:abc', 'stuck')).toBe(2);
		expect(cell(html, 'workflow:abc', 'total')).toBe(12_351);
		expect(cell(html, 'workflow:abc', 'duplicatesBlocked')).toBe(77);
		expect(cell(html, 'crm-contacts', 'total')).toBe(0);
		expect(html).toContain('<strong>Stripe → Slack</strong><br><code>workflow:abc</code>');
		expect(html).toContain('Nothing is stuck.');
		expect(html).toContain('Nothing waits for a person.');
	});

	test('stuck and Needs Review rows with their evidence, and how many more there are', () => {
		const row = { step: 'slackMessage', attempts: 2, leaseHolder: 'execution:41', firstSeenAt: new Date('2026-12-02T07:00:00Z'), updatedAt: new Date('2026-12-02T08:00:00Z') };
		const html = page([
			ns('orders', {
				byStatus: { in_progress: 1, completed: 0, failed_retryable: 0, needs_review: 3 },
				stuck: 1,
				stuckRows: [{ ...row, key: 'evt_stuck', status: 'in_progress', phase: 'sending', check: null }],
				reviewRows: [
					{ ...row, key: 'evt_found', status: 'needs_review', phase: 'sending', check: { outcome: 'found', detail: 'message ts 1712.5 in #payments', checkedAt: '2026-12-02T08:01:00.000Z' } },
					{ ...row, key: 'evt_none', status: 'needs_review', phase: null, check: null },
				],
			}),
		]);
		const stuck = listSection(html, 'stuck');
		expect(stuck).toContain('evt_stuck');
		expect(stuck).toContain('may have been sent');
		expect(stuck).toContain('1 h ago');
		const review = listSection(html, 'review');
		expect(review).toContain('found at the destination');
		expect(review).toContain('message ts 1712.5 in #payments');
		expect(review).toContain('no check ran');
		expect(review).toContain('… and 1 more in <code>orders</code>');
	});

	test('charts: each day counter summed over the namespaces, per day of the window', () => {
		const html = page([
			ns('a', { days: [{ day: '2026-12-01', counts: { duplicatesBlocked: 4, hits: 10, tokensSaved: 1500, moneySaved: 0.25 } }] }),
			ns('b', { days: [{ day: '2026-12-02', counts: { duplicatesBlocked: 1, hits: 5 } }, { day: '2026-11-01', counts: { hits: 999 } }] }),
		]);
		const total = (id: string) => chartTotal(html, id);
		expect(total('duplicatesBlocked')).toBe(5);
		expect(total('hits')).toBe(15); // 2026-11-01 is outside the 7 days
		expect(total('tokensSaved')).toBe(1500);
		expect(total('moneySaved')).toBe(0.25);
		expect((html.match(/<svg /g) ?? []).length).toBe(4);
		expect((html.slice(html.indexOf('id="chart-hits"')).match(/<rect /g) ?? []).length).toBeGreaterThanOrEqual(7);
		expect(html).toContain('<title>2026-12-01: 10</title>');
		expect(windowDays(NOW, 3, [])).toEqual(['2026-11-30', '2026-12-01', '2026-12-02']);
		// A ledger clock a little ahead of this host's: its day is the last one.
		expect(windowDays(NOW, 2, ['2026-12-03'])).toEqual(['2026-12-02', '2026-12-03']);
	});

	test('everything from the ledger or a user is escaped; the page loads nothing and runs nothing', () => {
		const row = { key: EVIL, step: EVIL, status: 'needs_review' as const, phase: null, attempts: 1, leaseHolder: EVIL, firstSeenAt: NOW, updatedAt: NOW };
		const html = page(
			[ns(EVIL, { name: EVIL, byStatus: { in_progress: 0, completed: 0, failed_retryable: 0, needs_review: 1 }, reviewRows: [{ ...row, check: { outcome: EVIL, detail: EVIL, checkedAt: EVIL } }], days: [{ day: '2026-12-02', counts: { hits: 1 } }] })],
			{ title: EVIL },
		);
		expect(html).not.toMatch(/<script/i);
		expect(html).not.toMatch(/<img/i);
		expect(html).toContain('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;');
		// No address but data: ones (escaped text says src=&quot;, never src="), no handler, no style that loads one.
		expect(html).not.toMatch(/\s(src|href|xlink:href|action|srcset|poster)="(?!data:)/i);
		expect(html).toContain('<link rel="icon" href="data:,">');
		expect(html.replace(/"[^"]*"/g, '""')).not.toMatch(/<[^>]*\son\w+=/i);
		expect(html).not.toMatch(/url\(|@import/i);
		expect(html).toContain(`<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">`);
		expect(cell(html, EVIL, 'needs_review')).toBe(1);
	});

	test('an empty ledger, and more namespaces than shown', () => {
		const html = page([], { moreNamespaces: false });
		expect(html).toContain('No namespace holds rows yet.');
		expect(page([ns('a')], { moreNamespaces: true })).toContain('More namespaces hold rows than this page shows (1)');
	});
});
