#!/usr/bin/env node
/**
 * Regenerates the README's and docs' screenshots from the real n8n editor (`npm run screenshots`, which
 * builds first): n8n (N8N_VERSION, default 2.41.1) from scripts/n8n-runtime.sh, this package installed the
 * user's way (npm pack into <user folder>/.n8n/nodes) by test/e2e/support/n8n.ts, on its own
 * PostgreSQL database; the editor driven by headless Chromium (/usr/bin/chromium) through
 * playwright-core. Writes PNGs to docs/images/ (see the `shots` list below), and dashboard.png:
 * the page examples/ledger-dashboard.json serves, from a ledger table filled for it (dropped
 * after) where the e2e tests keep theirs (DATABASE_URL, default its database `test`). Then stops
 * n8n and drops its database.
 *
 * Environment: CHROMIUM (default /usr/bin/chromium); DATABASE_URL (the PostgreSQL server n8n's
 * own database is created on, default postgres://postgres@127.0.0.1:5432/postgres); SHOTS (image
 * file names, separated by commas: write only these, e.g. SHOTS=start-step.png,canvas-region.png;
 * all by default).
 *
 * The AI Agent image needs n8n's AI nodes, which need sqlite3's native binding: scripts/n8n-runtime.sh
 * builds it.
 *
 * Every image is checked before it is written: the editor is on the workflow (not the sign-in
 * page), every node of ours shows its icon, and no error toast is up.
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { DASHBOARD_LOGIN, dashboardLedger, dashboardWorkflow } from './screenshots/dashboard.mjs';
import { agentWorkflow, buildWorkflow, freshWorkflow, panels, regionWorkflow } from './screenshots/workflow.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(here, '..');
const outDir = path.join(repoRoot, 'docs', 'images');
const require = createRequire(import.meta.url);
require(path.join(repoRoot, 'test', 'support', 'ts-require.js'));
const harness = require(path.join(repoRoot, 'test', 'e2e', 'support', 'n8n.ts'));
const { chromium } = require('playwright-core');

const VIEWPORT = { width: 1280, height: 800 };
/** A parameter panel taller than this is cut (the viewport grows to show the rest, up to here). */
const MAX_PANEL_VIEWPORT_HEIGHT = 2000;
const PACKAGE_TYPE_PREFIX = `${harness.PACKAGE_NAME}.`;
/** The images to write (SHOTS), or null for all. */
const ONLY = process.env.SHOTS ? new Set(process.env.SHOTS.split(',').map((name) => name.trim()).filter(Boolean)) : null;
const wanted = (file) => !ONLY || ONLY.has(file);
const started = Date.now();

function log(message) {
	console.log(`[screenshots ${((Date.now() - started) / 1000).toFixed(1).padStart(6)} s] ${message}`);
}

/**
 * Editor chrome that floats over the canvas and says nothing about the nodes: zoom buttons, the
 * "Execute workflow" button, the canvas side buttons, the AI assistant, tours and banners.
 */
const HIDE_CANVAS_CHROME = `
	[data-test-id="canvas-controls"],
	[data-test-id="execute-workflow-button"],
	[data-test-id="canvas-minimap"],
	[data-test-id="node-creator-plus-button"],
	[data-test-id="command-bar-button"],
	[data-test-id="add-sticky-button"],
	[data-test-id="toggle-focus-panel-button"],
	[data-test-id="instance-ai-canvas-action-button"],
	[data-test-id="ask-assistant-floating-button"],
	[data-test-id="canvas-breadcrumbs"],
	[data-test-id="banner-stack"],
	.tab-bar-container,
	[class*="_executionButtons_"] { visibility: hidden !important; }
`;

async function main() {
	fs.mkdirSync(outDir, { recursive: true });
	log('ensuring the n8n runtime (scripts/n8n-runtime.sh; minutes on a cold cache)');
	const runtime = await harness.ensureRuntime();
	log(`n8n ${runtime.version}; starting it with this package installed from npm pack`);
	const n8n = await harness.startN8n({ withPackage: true, readinessTimeoutMs: 300_000 });
	let browser;
	let userDataDir;
	const stopAll = async () => {
		await browser?.close().catch(() => undefined);
		await n8n.stop();
		// Chromium's profile, once Chromium is gone (it writes to it until it exits).
		if (userDataDir) fs.rmSync(userDataDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
	};
	const onSignal = (signal) => {
		log(`${signal}: stopping n8n`);
		stopAll().finally(() => process.exit(130));
	};
	process.once('SIGINT', onSignal);
	process.once('SIGTERM', onSignal);
	try {
		log(`n8n ready on ${n8n.baseUrl} after ${(n8n.bootMs / 1000).toFixed(1)} s (log ${n8n.logFile})`);
		const cookie = await n8n.setupOwner();
		await n8n.createApiKey('screenshots');
		const types = await n8n.nodeTypes();
		const ours = types.filter((t) => t.startsWith(PACKAGE_TYPE_PREFIX));
		if (ours.length < 5) throw new Error(`n8n loaded only these of our node types: ${ours.join(', ') || 'none'}`);

		const credential = await n8n.createCredential({
			name: 'Ledger (PostgreSQL)',
			type: 'idempotencyPostgresApi',
			data: {
				host: 'db.internal',
				port: 5432,
				database: 'n8n',
				user: 'n8n',
				password: 'not-a-real-password',
				ssl: 'disable',
				schema: 'public',
				table: 'idempotency_ledger',
				poolSize: 10,
			},
		});
		// The other nodes' credentials, so that no node shows a warning for a missing one.
		const openAi = await n8n.createCredential({ name: 'OpenAI', type: 'openAiApi', data: { apiKey: 'sk-not-a-real-key' } });
		const billing = await n8n.createCredential({ name: 'Billing API', type: 'httpHeaderAuth', data: { name: 'Authorization', value: 'Bearer not-a-real-token' } });
		const create = async (json) => ({ json, id: (await n8n.createWorkflow(json)).id });
		const overview = await create(buildWorkflow({ credential }));
		const orders = await create(buildWorkflow({ credential, name: 'Order webhook, handled once', only: ['orders'] }));
		const llm = await create(buildWorkflow({ credential, name: 'LLM answers, asked once', only: ['llm'] }));
		const agent = await create(agentWorkflow({ credential, openAi }));
		const region = await create(regionWorkflow({ credential, billing }));
		log(`workflows ${overview.id} (all flows), ${orders.id} (orders), ${llm.id} (LLM), ${agent.id} (agent), ${region.id} (region)`);

		log(`launching ${process.env.CHROMIUM || '/usr/bin/chromium'}`);
		userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'n8n-screenshots-chromium-'));
		browser = await chromium.launchPersistentContext(userDataDir, {
			executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
			headless: true,
			args: [
				'--no-sandbox',
				'--disable-gpu',
				'--disable-quic',
				'--no-first-run',
				'--disable-background-networking',
				'--disable-component-update',
				'--disable-sync',
			],
			viewport: VIEWPORT,
			deviceScaleFactor: 1,
			colorScheme: 'light',
			locale: 'en-US',
			timezoneId: 'UTC',
		});
		const [cookieName, cookieValue] = cookie.split(/=(.*)/s);
		await browser.addCookies([{ name: cookieName, value: cookieValue, url: n8n.baseUrl }]);
		const page = browser.pages()[0] ?? (await browser.newPage());
		page.setDefaultTimeout(120_000);
		page.on('pageerror', (error) => log(`page error: ${error.message.slice(0, 300)}`));

		const written = [];
		const save = async (file, options) => {
			await assertClean(page);
			const target = path.join(outDir, file);
			await page.screenshot({ path: target, animations: 'disabled', caret: 'hide', ...options });
			written.push(target);
			log(`wrote ${path.relative(repoRoot, target)}`);
		};

		// Canvas images: each workflow as the editor opens it (fitted to the view), cropped to the canvas.
		// The overview gets a taller window, so that three flows stacked still read at a fair zoom.
		for (const [file, wf, viewport] of [
			['canvas-orders.png', orders, VIEWPORT],
			['canvas-prompt-cache.png', llm, VIEWPORT],
			['canvas-overview.png', overview, { width: VIEWPORT.width, height: 1100 }],
			['canvas-agent-tool.png', agent, VIEWPORT],
			['canvas-region.png', region, VIEWPORT],
		]) {
			if (!wanted(file)) continue;
			await openCanvas(page, n8n.baseUrl, wf, viewport);
			await page.addStyleTag({ content: HIDE_CANVAS_CHROME });
			await page.mouse.move(2, viewport.height - 2); // no hover toolbar on a node
			await settle(page);
			await save(file, { clip: await drawingBox(page) });
		}

		// Parameter panels: each node fresh (every setting at its default), opened with a double
		// click as a user would.
		const fresh = await create(freshWorkflow({ credential }));
		await openCanvas(page, n8n.baseUrl, fresh);
		for (const panel of panels) {
			if (!wanted(panel.file) && !(panel.full && wanted(panel.full))) continue;
			await page.setViewportSize(VIEWPORT);
			await page.locator(`[data-test-id="canvas-node"][data-node-name="${panel.name}"]`).dblclick();
			const params = page.locator('[data-test-id="node-parameters"]');
			await params.waitFor({ state: 'visible' });
			await page.waitForFunction(
				(name) => document.querySelector('[data-test-id="ndv"]')?.textContent.includes(name),
				panel.name,
			);
			await page.mouse.move(2, 2); // off the panel: no hover controls on a field
			await settle(page);
			if (panel.full && wanted(panel.full)) await save(panel.full, { clip: await page.locator('[data-test-id="ndv"]').boundingBox() });
			// Grow the window until every parameter fits, then crop to the parameter column.
			const overflow = await params.evaluate((el) => el.scrollHeight - el.clientHeight);
			if (overflow > 0) {
				await page.setViewportSize({
					width: VIEWPORT.width,
					height: Math.min(MAX_PANEL_VIEWPORT_HEIGHT, VIEWPORT.height + overflow + 80),
				});
				await page.mouse.move(2, 2);
				await settle(page);
			}
			const column = await params.evaluate((el) => {
				// node-parameters sits in the settings column, under its Parameters/Settings tabs.
				const settings = el.closest('.node-settings') ?? el.parentElement;
				const box = settings.getBoundingClientRect();
				const last = [...el.querySelectorAll('[data-test-id="parameter-item"], [data-test-id="node-credentials-slot"]')]
					.map((item) => item.getBoundingClientRect().bottom)
					.reduce((a, b) => Math.max(a, b), box.top);
				return { x: box.x, y: box.y, width: box.width, height: Math.min(box.height, last - box.y + 24) };
			});
			if (wanted(panel.file)) await save(panel.file, { clip: column });
			await page.keyboard.press('Escape');
			await params.waitFor({ state: 'hidden' });
		}
		await page.setViewportSize(VIEWPORT);

		// The dashboard, as examples/ledger-dashboard.json serves it from a ledger with a month in it.
		if (wanted('dashboard.png')) {
			const ledgerCredentialData = require(path.join(repoRoot, 'test', 'e2e', 'support', 'standIns.ts')).ledgerCredentialData;
			const ledger = await dashboardLedger(process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test');
			try {
				await n8n.createCredential({ name: 'Idempotency Ledger', type: 'idempotencyPostgresApi', data: ledgerCredentialData(ledger.table) });
				await n8n.createCredential({ name: 'Dashboard Login', type: 'httpBasicAuth', data: DASHBOARD_LOGIN });
				const workflow = dashboardWorkflow();
				await n8n.deploy(workflow);
				const dashboard = await browser.newPage();
				await dashboard.setExtraHTTPHeaders({ authorization: `Basic ${Buffer.from(`${DASHBOARD_LOGIN.user}:${DASHBOARD_LOGIN.password}`).toString('base64')}` });
				await dashboard.setViewportSize({ width: 1280, height: 900 });
				const path_ = workflow.nodes.find((n) => n.type === 'n8n-nodes-base.webhook').parameters.path;
				const response = await dashboard.goto(`${n8n.baseUrl}/webhook/${path_}`, { waitUntil: 'load' });
				if (response?.status() !== 200) throw new Error(`the dashboard answered ${response?.status()}: ${(await response?.text())?.slice(0, 300)}`);
				await dashboard.locator('figure.chart svg').first().waitFor({ state: 'visible' });
				const target = path.join(outDir, 'dashboard.png');
				await dashboard.screenshot({ path: target, fullPage: true, animations: 'disabled', caret: 'hide' });
				written.push(target);
				log(`wrote ${path.relative(repoRoot, target)}`);
				await dashboard.close();
			} finally {
				await ledger.drop();
			}
		}

		const missing = ONLY ? [...ONLY].filter((file) => !written.includes(path.join(outDir, file))) : [];
		if (missing.length > 0) throw new Error(`SHOTS names images this script does not make: ${missing.join(', ')}`);
		log(`done: ${written.length} images in ${path.relative(repoRoot, outDir)}/`);
	} finally {
		log('stopping n8n and dropping its database');
		await stopAll();
		process.removeListener('SIGINT', onSignal);
		process.removeListener('SIGTERM', onSignal);
	}
}

/** Opens a workflow in the editor and waits until every node is drawn with its icon. */
async function openCanvas(page, baseUrl, wf, viewport = VIEWPORT) {
	await page.setViewportSize(viewport);
	await page.goto(`${baseUrl}/workflow/${wf.id}`, { waitUntil: 'domcontentloaded' });
	const nodes = page.locator('[data-test-id="canvas-node"]');
	await page.waitForFunction(
		(count) => document.querySelectorAll('[data-test-id="canvas-node"]').length === count,
		wf.json.nodes.length,
		{ timeout: 120_000 },
	);
	await nodes.first().waitFor({ state: 'visible' });
	await page.waitForLoadState('networkidle').catch(() => undefined);
	await waitForIcons(page);
}

/** Our nodes' icons are SVG files served by n8n (/icons/<package>/...): each must have loaded. */
async function waitForIcons(page) {
	const missing = await page
		.waitForFunction(
			(prefix) => {
				const ours = [...document.querySelectorAll('[data-test-id="canvas-node"]')].filter((n) =>
					(n.getAttribute('data-node-type') ?? '').startsWith(prefix),
				);
				const bad = ours.filter((n) => {
					const img = n.querySelector('img');
					return !img || !img.complete || img.naturalWidth === 0;
				});
				return bad.length === 0 ? true : false;
			},
			PACKAGE_TYPE_PREFIX,
			{ timeout: 60_000 },
		)
		.then(() => undefined)
		.catch(() => 'timeout');
	if (missing) {
		const names = await page.evaluate(
			(prefix) =>
				[...document.querySelectorAll('[data-test-id="canvas-node"]')]
					.filter((n) => (n.getAttribute('data-node-type') ?? '').startsWith(prefix))
					.filter((n) => {
						const img = n.querySelector('img');
						return !img || !img.complete || img.naturalWidth === 0;
					})
					.map((n) => n.getAttribute('data-node-name')),
			PACKAGE_TYPE_PREFIX,
		);
		throw new Error(`node icons did not load for: ${names.join(', ')}`);
	}
}

/** The part of the canvas that holds nodes, edges and their labels, with a margin. */
async function drawingBox(page, margin = 28) {
	return page.evaluate((margin) => {
		const canvas = document.querySelector('[data-test-id="canvas"]').getBoundingClientRect();
		const box = { left: Infinity, top: Infinity, right: -Infinity, bottom: -Infinity };
		for (const el of document.querySelectorAll('.vue-flow__node, .vue-flow__node *, .vue-flow__edge path, [data-test-id="edge-label"]')) {
			if (el.closest('[data-test-id="canvas-node-toolbar"]')) continue; // shown on hover only
			const r = el.getBoundingClientRect();
			if (r.width === 0 || r.height === 0 || getComputedStyle(el).visibility === 'hidden') continue;
			box.left = Math.min(box.left, r.left);
			box.top = Math.min(box.top, r.top);
			box.right = Math.max(box.right, r.right);
			box.bottom = Math.max(box.bottom, r.bottom);
		}
		const left = Math.max(canvas.left, box.left - margin);
		const top = Math.max(canvas.top, box.top - margin);
		const right = Math.min(canvas.right, box.right + margin);
		const bottom = Math.min(canvas.bottom, box.bottom + margin);
		return { x: Math.round(left), y: Math.round(top), width: Math.round(right - left), height: Math.round(bottom - top) };
	}, margin);
}

/** Lets transitions end and fonts load. */
async function settle(page) {
	await page.evaluate(() => document.fonts.ready);
	await page.waitForTimeout(800);
}

/** Refuses to photograph the sign-in page or an error toast. */
async function assertClean(page) {
	const url = new URL(page.url());
	if (!url.pathname.startsWith('/workflow/')) throw new Error(`the editor is not on a workflow but on ${url.pathname}`);
	const toasts = await page.evaluate(() =>
		[...document.querySelectorAll('.el-notification, .el-message')]
			.filter((el) => el.getBoundingClientRect().width > 0 && getComputedStyle(el).visibility !== 'hidden')
			.map((el) => el.textContent.trim().replace(/\s+/g, ' ').slice(0, 300))
			.filter(Boolean),
	);
	if (toasts.length > 0) throw new Error(`the editor shows a notification: ${toasts.join(' | ')}`);
}

main().then(
	() => {
		log('finished');
		process.exit(0);
	},
	(error) => {
		console.error(error);
		process.exit(1);
	},
);
