/**
 * n8n's editor in headless Chromium (Debian's chromium package, through playwright-core), logged
 * in as the owner: for the e2e tests of what a person sees and clicks. Without Chromium a test
 * fails under CI=true and is skipped with a warning otherwise (.ci/run installs it).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { chromium, type BrowserContext, type Page } from 'playwright-core';

import type { N8nInstance } from './n8n';

export const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

/** Opens `route` of `n8n` in headless Chromium with the owner's `cookie`, and hands the page to `use`. */
export async function inEditor(n8n: N8nInstance, cookie: string, route: string, use: (page: Page) => Promise<void>): Promise<void> {
	if (!fs.existsSync(CHROMIUM)) {
		if (process.env.CI === 'true') throw new Error(`No Chromium at ${CHROMIUM}: install Debian's chromium package (.ci/run does) or set CHROMIUM`);
		console.warn(`[skip] editor test: no Chromium at ${CHROMIUM} (install Debian's chromium package, or set CHROMIUM)`);
		return;
	}
	const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'e2e-chromium-'));
	let browser: BrowserContext | undefined;
	try {
		browser = await chromium.launchPersistentContext(userDataDir, {
			executablePath: CHROMIUM,
			headless: true,
			args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
			viewport: { width: 1280, height: 800 },
		});
		const [name, value] = cookie.split(/=(.*)/s);
		await browser.addCookies([{ name, value, url: n8n.baseUrl }]);
		const page = browser.pages()[0] ?? (await browser.newPage());
		page.setDefaultTimeout(120_000);
		await page.goto(`${n8n.baseUrl}${route}`, { waitUntil: 'domcontentloaded' });
		await use(page);
	} finally {
		await browser?.close().catch(() => undefined);
		fs.rmSync(userDataDir, { recursive: true, force: true });
	}
}

/** The node panel's search box (open). */
export const panelSearchBox = (page: Page) => page.locator('[data-test-id="node-creator-search-bar"] input, input[data-test-id="node-creator-search-bar"]').first();

const listedNames = async (page: Page) => (await page.locator('[data-test-id="node-creator-item-name"]').allTextContents()).map((t) => t.trim());

/**
 * Types `term` into the open node panel and returns the node names it lists, in order. The list
 * follows the typing after a debounce, so it is read once it has stayed the same for a second,
 * and then, while `expected` are not all in it, until they are or 15 s have passed.
 */
export async function searchPanel(page: Page, term: string, expected: string[]): Promise<string[]> {
	await panelSearchBox(page).fill(term);
	const deadline = Date.now() + 15_000;
	let shown = await listedNames(page);
	let stableSince = Date.now();
	while (Date.now() < deadline) {
		await page.waitForTimeout(100);
		const now = await listedNames(page);
		if (now.join('\n') !== shown.join('\n')) {
			shown = now;
			stableSince = Date.now();
		} else if (Date.now() - stableSince >= 1_000 && expected.every((name) => shown.includes(name))) {
			break;
		}
	}
	return shown;
}
