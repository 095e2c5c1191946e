/**
 * The dashboard image (docs/images/dashboard.png): a ledger of its own on the PostgreSQL server
 * (DATABASE_URL), filled with the ledger's own writes (a month of day counters written straight
 * into its table), served by examples/ledger-dashboard.json as it is, behind Basic Auth.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(here, '..', '..');
const require = createRequire(import.meta.url);
const { Pool } = require('pg');
const { PostgresLedger } = require(path.join(repoRoot, 'dist', 'lib', 'ledger'));
const { LEDGER_TABLE_SUFFIXES } = require(path.join(repoRoot, 'dist', 'lib', 'ledger', 'postgres', 'schema'));

const DAY = 86_400_000;
export const DASHBOARD_LOGIN = { user: 'ops', password: `screenshots-${randomBytes(6).toString('hex')}` };

const key = (i) => `evt_${(0x1f3a9 * (i + 7)).toString(36)}`;

/** A ledger table with a few workflows' worth of rows; `drop()` removes it. */
export async function dashboardLedger(databaseUrl) {
	const table = `screenshots_dashboard_${randomBytes(4).toString('hex')}`;
	const pool = new Pool({ connectionString: databaseUrl, max: 4 });
	const ledger = new PostgresLedger({ pool, table });
	await ledger.ensureSchema();
	const seen = { mode: 'seen', holder: 'screenshots', leaseMs: 0, ttlMs: 30 * DAY };
	const claim = (namespace, from, n, options = seen) =>
		ledger.claim(Array.from({ length: n }, (_, i) => ({ namespace, key: key(from + i), step: '', fingerprint: null })), options);
	await claim('stripe-events', 0, 1840);
	await claim('stripe-events', 0, 37); // redelivered: duplicates blocked
	await claim('crm-contacts', 0, 412);
	await claim('crm-contacts', 0, 9);
	await claim('workflow:Xy12AbCd34', 0, 96);
	// Two sends that died mid-way, one before anything went out.
	const lease = { mode: 'lease', holder: 'execution:4821', leaseMs: 200, ttlMs: DAY };
	const held = await ledger.claim(
		[
			{ namespace: 'stripe-events', key: 'evt_1QxR7bLkd', step: 'Post to #payments', fingerprint: null },
			{ namespace: 'crm-contacts', key: 'jane@example.com', step: 'Create Contact', fingerprint: null },
		],
		lease,
	);
	await ledger.markPhase([{ namespace: 'stripe-events', key: 'evt_1QxR7bLkd', step: 'Post to #payments', fence: held[0].record.fence }], 'sending');
	await ledger.record(
		[
			{ namespace: 'stripe-events', key: 'evt_1QxQ2mTa9', step: 'Post to #payments', status: 'needs_review', result: { check: { outcome: 'unknown', detail: 'Slack refused to show the channel history (missing_scope: channels:history)', checkedAt: new Date(Date.now() - 3 * 3600_000).toISOString() } } },
			{ namespace: 'workflow:Xy12AbCd34', key: 'A-1042', step: 'Send Confirmation', status: 'needs_review' },
			{ namespace: 'crm-contacts', key: 'sam@example.org', step: 'Create Contact', status: 'failed_retryable' },
		],
		{ ttlMs: DAY },
	);
	// A month of counters, as Dedupe Gate, Guarded Send and Prompt Cache add them day by day.
	const days = [];
	for (let d = 29; d >= 0; d--) {
		const wave = 1 + Math.sin(d / 3) * 0.4;
		days.push(['stripe-events', d, { duplicatesBlocked: Math.round((20 + (d % 7) * 6) * wave) }]);
		days.push(['crm-contacts', d, { duplicatesBlocked: Math.round(4 + (d % 5)), lookups: Math.round(160 * wave), hits: Math.round((60 + (29 - d) * 3) * wave), tokensSaved: Math.round((60 + (29 - d) * 3) * wave * 410), moneySaved: Math.round((60 + (29 - d) * 3) * wave * 410 * 0.0000025 * 1e4) / 1e4 }]);
	}
	for (const [namespace, daysAgo, counts] of days) {
		await pool.query(`INSERT INTO public."${table}_daily" (namespace, day, counts) VALUES ($1, (now() AT TIME ZONE 'UTC')::date - $2::integer, $3)`, [namespace, daysAgo, counts]);
	}
	await new Promise((r) => setTimeout(r, 300)); // the leases lapse: stuck
	return {
		table,
		async drop() {
			for (const s of LEDGER_TABLE_SUFFIXES) await pool.query(`DROP TABLE IF EXISTS public."${table}${s}"`);
			await pool.end();
		},
	};
}

/** The example workflow as it is in examples/. */
export const dashboardWorkflow = () => JSON.parse(fs.readFileSync(path.join(repoRoot, 'examples', 'ledger-dashboard.json'), 'utf8'));
