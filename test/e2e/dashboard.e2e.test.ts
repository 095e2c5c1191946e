/**
 * The ledger dashboard in a real n8n (the package installed the user's way), as a person opens it:
 * examples/ledger-dashboard.json imported as it is (Webhook GET with Basic Auth → Idempotency
 * Ledger → Render Dashboard → Respond to Webhook), against a PostgreSQL ledger seeded with the
 * ledger's own writes (thousands of completed rows, stuck and Needs Review rows, day counters).
 *
 * - Without the credentials, or with a wrong password, n8n answers 401 and no page.
 * - In headless Chromium with the network blocked (every request but the page itself aborted), the
 *   page renders, asks for nothing else, and the counts it shows are the ledger's.
 */
import { chromium, type Browser } from 'playwright-core';
import fs from 'node:fs';

import { PostgresLedger } from '../../lib/ledger';
import { newPool } from '../support/db';
import { CHROMIUM } from './support/editor';
import { startN8n, type N8nInstance } from './support/n8n';
import { ledgerCredentialData, LedgerTables, loadExample, uniqueLedgerTable } from './support/standIns';

const table = uniqueLedgerTable('e2e_dashboard');
const tables = new LedgerTables(table);
const LOGIN = { user: 'ops', password: 'e2e-dashboard-password' };
const PATH = 'ledger/dashboard';
const DAY = 86_400_000;

const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

describe('e2e: the ledger dashboard page (real n8n, Chromium)', () => {
	let n8n: N8nInstance | undefined;
	const pool = newPool(2);
	const ledger = new PostgresLedger({ pool, table });
	const namespaces = ['workflow:Xy12AbCd34', 'crm-contacts', 'stripe <events>'];

	beforeAll(async () => {
		// The ledger: a busy workflow, a shared namespace with a stuck send and two Needs Review steps.
		const seen = { mode: 'seen' as const, holder: 'e2e', leaseMs: 0, ttlMs: 30 * DAY };
		for (let chunk = 0; chunk < 4; chunk++) {
			await ledger.claim(Array.from({ length: 1000 }, (_, i) => ({ namespace: namespaces[0], key: `evt_${chunk}_${i}`, step: '', fingerprint: null })), seen);
		}
		await ledger.claim(Array.from({ length: 50 }, (_, i) => ({ namespace: namespaces[0], key: `evt_0_${i}`, step: '', fingerprint: null })), seen);
		const [held] = await ledger.claim([{ namespace: namespaces[1], key: 'jane@example.com', step: 'create', fingerprint: null }], { mode: 'lease', holder: 'execution:7', leaseMs: 200, ttlMs: DAY });
		if (held.kind !== 'claimed') throw new Error(held.kind);
		await ledger.markPhase([{ namespace: namespaces[1], key: 'jane@example.com', step: 'create', fence: held.record.fence! }], 'sending');
		await ledger.record(
			[
				{ namespace: namespaces[2], key: 'evt_1', step: 'slack', status: 'needs_review', result: { check: { outcome: 'unknown', detail: 'Slack answered 503', checkedAt: '2026-12-01T10:00:00.000Z' } } },
				{ namespace: namespaces[2], key: 'evt_2', step: 'slack', status: 'needs_review' },
				{ namespace: namespaces[2], key: 'evt_3', step: 'slack', status: 'failed_retryable' },
			],
			{ ttlMs: DAY },
		);
		await ledger.addCounts([{ namespace: namespaces[0], counts: { duplicatesBlocked: 50, hits: 12, tokensSaved: 3400, moneySaved: 0.42 } }]);
		await new Promise((r) => setTimeout(r, 300));

		n8n = await startN8n({ withPackage: true });
		await n8n.setupOwner();
		await n8n.createApiKey();
		// The credentials examples/README.md names, created before the import so n8n links them.
		await n8n.createCredential({ name: 'Idempotency Ledger', type: 'idempotencyPostgresApi', data: ledgerCredentialData(table) });
		await n8n.createCredential({ name: 'Dashboard Login', type: 'httpBasicAuth', data: LOGIN });
		await n8n.deploy(loadExample('ledger-dashboard.json'));
	});

	afterAll(async () => {
		if (n8n) console.log(`n8n log: ${n8n.logFile}`);
		await n8n?.stop();
		await pool.end();
		await tables.drop();
	});

	test('401 without the credentials or with a wrong password; 200 text/html with them', async () => {
		const none = await n8n!.post(PATH, undefined, { method: 'GET' });
		expect(none.status).toBe(401);
		expect(none.text).not.toContain('<table');
		const wrong = await n8n!.post(PATH, undefined, { method: 'GET', headers: { authorization: basic(LOGIN.user, 'guess') } });
		expect(wrong.status).toBe(401);
		expect(wrong.text).not.toContain('<table');
		const right = await n8n!.post(PATH, undefined, { method: 'GET', headers: { authorization: basic(LOGIN.user, LOGIN.password) } });
		expect(right.status).toBe(200);
		expect(String(right.headers['content-type'])).toMatch(/^text\/html/);
		expect(right.text.startsWith('<!DOCTYPE html>')).toBe(true);
	});

	test('renders with the network blocked, asks for nothing but itself, and shows the ledger’s counts', async () => {
		if (!fs.existsSync(CHROMIUM)) {
			if (process.env.CI === 'true') throw new Error(`No Chromium at ${CHROMIUM}`);
			console.warn(`[skip] dashboard browser test: no Chromium at ${CHROMIUM}`);
			return;
		}
		const url = `${n8n!.baseUrl}/webhook/${PATH}`;
		let browser: Browser | undefined;
		try {
			browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'] });
			const context = await browser.newContext({ httpCredentials: { username: LOGIN.user, password: LOGIN.password }, viewport: { width: 1280, height: 900 } });
			const requested: string[] = [];
			const blocked: string[] = [];
			context.on('request', (r) => requested.push(r.url()));
			await context.route('**/*', (route) => {
				if (route.request().url() === url) return route.continue();
				blocked.push(route.request().url());
				return route.abort('internetdisconnected');
			});
			const page = await context.newPage();
			const response = await page.goto(url, { waitUntil: 'load' });
			expect(response?.status()).toBe(200);
			await page.waitForLoadState('networkidle');
			expect(await page.locator('h1').textContent()).toBe('Idempotency Ledger');
			// Drawn: the four charts have a size, the counts table rows are laid out.
			const charts = await page.locator('figure.chart svg').evaluateAll((svgs) => svgs.map((s) => s.getBoundingClientRect().height));
			expect(charts).toHaveLength(4);
			for (const h of charts) expect(h).toBeGreaterThan(50);

			const shown = await page.locator('td[data-namespace][data-count]').evaluateAll((cells) =>
				cells.map((c) => ({ ns: c.getAttribute('data-namespace')!, what: c.getAttribute('data-count')!, n: Number((c.textContent ?? '').replace(/,/g, '')) })),
			);
			for (const ns of namespaces) {
				const stats = await ledger.stats(ns);
				const of = (what: string) => shown.find((c) => c.ns === ns && c.what === what)?.n;
				expect({ ns, ...Object.fromEntries(Object.keys(stats.byStatus).map((s) => [s, of(s)])) }).toEqual({ ns, ...stats.byStatus });
				expect({ ns, stuck: of('stuck'), duplicatesBlocked: of('duplicatesBlocked') }).toEqual({ ns, stuck: stats.stuck, duplicatesBlocked: stats.duplicatesBlocked });
			}
			const of = (ns: string, what: string) => shown.find((c) => c.ns === ns && c.what === what)?.n;
			expect(of(namespaces[0], 'completed')).toBe(4000);
			expect(of(namespaces[0], 'duplicatesBlocked')).toBe(50);
			expect(of(namespaces[1], 'stuck')).toBe(1);
			expect(of(namespaces[2], 'needs_review')).toBe(2);
			const text = await page.locator('body').innerText();
			expect(text).toContain('stripe <events>');
			expect(text).toContain('jane@example.com');
			expect(text).toContain('Slack answered 503');

			expect(blocked).toEqual([]);
			expect(requested).toEqual([url]);
		} finally {
			await browser?.close().catch(() => undefined);
		}
	});
});
