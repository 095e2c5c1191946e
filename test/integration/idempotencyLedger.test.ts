/**
 * Idempotency Ledger (operator node): every operation and every parameter check, run through
 * n8n-core's real engine against the real PostgreSQL.
 */
import type { INodeExecutionData, NodeOperationError } from 'n8n-workflow';

import { closeAllPostgresLedgers } from '../../lib/ledger';
import { IdempotencyLedger } from '../../nodes/IdempotencyLedger/IdempotencyLedger.node';
import { NODE, ledgerFixture, liveRow, recordRow, sleep, stuckRow, type LedgerFixture } from './idempotencyLedger.support';

let f: LedgerFixture;

beforeAll(async () => {
	f = await ledgerFixture('opled');
});

afterAll(async () => {
	await closeAllPostgresLedgers();
	await f.dispose();
});

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const shared = (namespace: string) => ({ scope: 'shared', namespace });
const json = (items: INodeExecutionData[]) => items.map((i) => i.json);
const paired = (items: INodeExecutionData[]) => items.map((i) => i.pairedItem);

async function ledgerRows(): Promise<number> {
	return await f.count('SELECT count(*) AS n FROM {t}');
}
async function auditRows(): Promise<number> {
	return await f.count('SELECT count(*) AS n FROM {audit}');
}
async function checkpointRows(): Promise<number> {
	return await f.count('SELECT count(*) AS n FROM {checkpoints}');
}

describe('node description', () => {
	const description = new IdempotencyLedger().description;

	test('type name, icons, credential and the same backend selector as the other nodes', () => {
		expect(description.name).toBe('idempotencyLedger');
		expect(description.displayName).toBe('Idempotency Ledger');
		expect(description.icon).toEqual({ light: 'file:idempotencyLedger.svg', dark: 'file:idempotencyLedger.dark.svg' });
		expect(description.credentials?.map((c) => c.name)).toContain('idempotencyPostgresApi');
		expect(description.properties[0].name).toBe('backend');
	});

	test('every operation of every resource is listed', () => {
		const ops = description.properties
			.filter((p) => p.name === 'operation')
			.map((p) => [p.displayOptions?.show?.resource, (p.options as Array<{ value: string }>).map((o) => o.value)]);
		expect(ops).toEqual([
			[['key'], ['get', 'list', 'release']],
			[['ledger'], ['copyInto', 'stats', 'purge', 'dashboard']],
			[['checkpoint'], ['get', 'set']],
			[['review'], ['ask', 'settle']],
		]);
	});
});

describe('Key → Get', () => {
	const ns = 'get-ns';

	beforeAll(async () => {
		await recordRow(f.ledger, ns, 'order-1', 'completed', '', { externalId: 'inv_1', result: { ok: true } });
		await recordRow(f.ledger, ns, 'order-1', 'needs_review', 'emailSend');
		await liveRow(f.ledger, ns, 'order-1', 'crmCreate');
	});

	test('a key with all its steps, dates as ISO strings, one output item per input item', async () => {
		const result = await f.run([{ id: 'order-1' }, { id: 'order-404' }], { resource: 'key', operation: 'get', ...shared(ns), key: '={{ $json.id }}' });
		expect(result.error).toBeUndefined();
		const out = f.out(result);
		expect(paired(out)).toEqual([{ item: 0 }, { item: 1 }]);
		const [found, missing] = json(out);
		expect(found).toMatchObject({ namespace: ns, key: 'order-1', found: true, status: 'completed', stepCount: 3 });
		const steps = found.steps as Array<Record<string, unknown>>;
		expect(steps.map((s) => [s.step, s.status])).toEqual([
			['', 'completed'],
			['crmCreate', 'in_progress'],
			['emailSend', 'needs_review'],
		]);
		expect(steps[0]).toMatchObject({ externalId: 'inv_1', result: { ok: true }, attempts: 1, stuck: false });
		expect(steps[1]).toMatchObject({ leaseHolder: 'execution:alive', stuck: false });
		for (const field of ['firstSeenAt', 'updatedAt', 'expiresAt']) expect(steps[0][field]).toMatch(ISO);
		expect(steps[1].leaseExpiresAt).toMatch(ISO);
		expect(missing).toEqual({ namespace: ns, key: 'order-404', found: false, status: null, stepCount: 0, steps: [] });
	});

	test('a number from an expression is used as text, as Dedupe Gate does', async () => {
		await recordRow(f.ledger, ns, '42', 'completed');
		const out = f.out(await f.run([{ n: 42 }], { resource: 'key', operation: 'get', ...shared(ns), key: '={{ $json.n }}' }));
		expect(out[0].json).toMatchObject({ key: '42', found: true });
	});

	test('"This Workflow" reads the namespace workflow:<id>', async () => {
		await recordRow(f.ledger, 'workflow:wf-mine', 'k1', 'completed');
		const mine = f.out(await f.run([{}], { resource: 'key', operation: 'get', key: 'k1' }, { workflowId: 'wf-mine' }));
		expect(mine[0].json).toMatchObject({ namespace: 'workflow:wf-mine', found: true });
		const other = f.out(await f.run([{}], { resource: 'key', operation: 'get', key: 'k1' }, { workflowId: 'wf-other' }));
		expect(other[0].json).toMatchObject({ namespace: 'workflow:wf-other', found: false });
	});

	test('a per-item shared namespace from an expression', async () => {
		await recordRow(f.ledger, 'tenant-a', 'same', 'completed');
		await recordRow(f.ledger, 'tenant-b', 'same', 'needs_review');
		const out = f.out(
			await f.run([{ t: 'tenant-a' }, { t: 'tenant-b' }], { resource: 'key', operation: 'get', scope: 'shared', namespace: '={{ $json.t }}', key: 'same' }),
		);
		expect(json(out).map((j) => [j.namespace, j.status])).toEqual([
			['tenant-a', 'completed'],
			['tenant-b', 'needs_review'],
		]);
	});
});

describe('Key → List', () => {
	const ns = 'list-ns';

	beforeAll(async () => {
		await stuckRow(f.ledger, ns, 'stuck-1');
		await stuckRow(f.ledger, ns, 'stuck-2', 'emailSend');
		await liveRow(f.ledger, ns, 'running-1');
		await recordRow(f.ledger, ns, 'review-1', 'needs_review');
		await recordRow(f.ledger, ns, 'failed-1', 'failed_retryable');
		for (let i = 0; i < 7; i++) await recordRow(f.ledger, ns, `done-${i}`, 'completed');
		await stuckRow(f.ledger, 'list-other-ns', 'stuck-elsewhere');
	});

	const list = (params: Record<string, unknown>, items: object[] = [{}], options = {}) =>
		f.run(items, { resource: 'key', operation: 'list', ...shared(ns), ...params }, options);

	test('stuck (the default): in progress with a lapsed lease, not the live one', async () => {
		const result = await list({});
		expect(result.error).toBeUndefined();
		const [page] = json(f.out(result));
		expect(page).toMatchObject({ namespace: ns, status: 'stuck', count: 2, hasMore: false, nextCursor: null, pages: 1 });
		const records = page.records as Array<Record<string, unknown>>;
		expect(records.map((r) => [r.key, r.step, r.status, r.stuck, r.leaseHolder])).toEqual([
			['stuck-1', '', 'in_progress', true, 'execution:dead'],
			['stuck-2', 'emailSend', 'in_progress', true, 'execution:dead'],
		]);
		expect(records[0].leaseExpiresAt).toMatch(ISO);
	});

	test('by status: needs review, failed, in progress (live and lapsed), any', async () => {
		const keysOf = async (status: string) =>
			((json(f.out(await list({ status, limit: 100 })))[0].records as Array<{ key: string }>).map((r) => r.key)).sort();
		expect(await keysOf('needs_review')).toEqual(['review-1']);
		expect(await keysOf('failed_retryable')).toEqual(['failed-1']);
		expect(await keysOf('in_progress')).toEqual(['running-1', 'stuck-1', 'stuck-2']);
		expect(await keysOf('completed')).toHaveLength(7);
		expect(await keysOf('any')).toHaveLength(12);
	});

	test('All Namespaces', async () => {
		const [page] = json(f.out(await list({ scope: 'all' })));
		expect(page.namespace).toBeNull();
		const keys = (page.records as Array<{ namespace: string; key: string }>).map((r) => `${r.namespace}/${r.key}`);
		expect(keys).toEqual(expect.arrayContaining([`${ns}/stuck-1`, 'list-other-ns/stuck-elsewhere']));
	});

	test('paged with a cursor: pages follow each other without gaps or repeats', async () => {
		const seen: string[] = [];
		let cursor = '';
		for (let guard = 0; guard < 10; guard++) {
			const [page] = json(f.out(await list({ status: 'completed', limit: 3, cursor })));
			for (const r of page.records as Array<{ key: string }>) seen.push(r.key);
			if (!page.hasMore) {
				expect(page.nextCursor).toBeNull();
				break;
			}
			expect(page.count).toBe(3);
			cursor = page.nextCursor as string;
			expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
		}
		expect(seen.sort()).toEqual(Array.from({ length: 7 }, (_, i) => `done-${i}`));
	});

	test('the cursor may come from the previous item through an expression, one page per input item', async () => {
		const first = json(f.out(await list({ status: 'completed', limit: 4 })))[0];
		const result = await list({ status: 'completed', limit: 4, cursor: '={{ $json.c }}' }, [{ c: '' }, { c: first.nextCursor }]);
		const pages = json(f.out(result));
		expect(paired(f.out(result))).toEqual([{ item: 0 }, { item: 1 }]);
		expect(pages.map((p) => p.count)).toEqual([4, 3]);
	});

	test('Return All walks every page; Max Rows bounds it and hands back the cursor', async () => {
		const [all] = json(f.out(await list({ status: 'completed', returnAll: true })));
		expect(all).toMatchObject({ count: 7, hasMore: false, nextCursor: null });
		const capped = await list({ status: 'completed', returnAll: true, maxRows: 5 });
		const [page] = json(f.out(capped));
		expect(page).toMatchObject({ count: 5, hasMore: true });
		const rest = json(f.out(await list({ status: 'completed', returnAll: true, maxRows: 5, cursor: page.nextCursor })))[0];
		expect(rest).toMatchObject({ count: 2, hasMore: false });
		const hints = capped.run.data.resultData.runData[NODE][0].hints ?? [];
		expect(hints.map((h) => h.message).join(' ')).toMatch(/Max Rows/);
	});

	test('One Item per Row', async () => {
		const out = f.out(await list({ status: 'completed', returnAll: true, output: 'rows' }));
		expect(out).toHaveLength(7);
		expect(out.every((i) => i.json.status === 'completed' && (i.pairedItem as { item: number }).item === 0)).toBe(true);
		expect(out[0].json).not.toHaveProperty('records');
	});

	test('Not Updated For: only rows last changed long enough ago', async () => {
		await f.pool.query(`UPDATE "public"."${f.table}" SET updated_at = now() - interval '3 hours' WHERE namespace = $1 AND key = 'stuck-1'`, [ns]);
		const keysOlderThan = async (amount: number, unit: string) =>
			(json(f.out(await list({ notUpdatedFor: amount, notUpdatedForUnit: unit })))[0].records as Array<{ key: string }>).map((r) => r.key);
		expect(await keysOlderThan(2, 'hours')).toEqual(['stuck-1']);
		expect(await keysOlderThan(4, 'hours')).toEqual([]);
		expect((await keysOlderThan(0, 'minutes')).sort()).toEqual(['stuck-1', 'stuck-2']);
	});

	test('expired rows are never listed', async () => {
		await f.ledger.record([{ namespace: 'list-expired', key: 'gone', step: '', status: 'needs_review' }], { ttlMs: 1 });
		await sleep(15);
		const [page] = json(f.out(await f.run([{}], { resource: 'key', operation: 'list', ...shared('list-expired'), status: 'any' })));
		expect(page.count).toBe(0);
	});
});

describe('Key → Release', () => {
	test('every step of a key: rows gone, one audit row per step with who and when, then a claim succeeds', async () => {
		const ns = 'release-key';
		await stuckRow(f.ledger, ns, 'k');
		await recordRow(f.ledger, ns, 'k', 'needs_review', 'emailSend');
		await recordRow(f.ledger, ns, 'other', 'completed');
		const before = Date.now();
		const result = await f.run([{}], { resource: 'key', operation: 'release', ...shared(ns), key: 'k', releasedBy: 'jane@example.com (OPS-7)' });
		expect(result.error).toBeUndefined();
		const [out] = json(f.out(result));
		expect(out).toMatchObject({ namespace: ns, key: 'k', step: null, released: 2, releasedBy: 'jane@example.com (OPS-7)' });
		expect(Date.parse(out.releasedAt as string)).toBeGreaterThanOrEqual(before - 1000);
		expect(await f.ledger.get(ns, 'k')).toEqual([]);
		expect(await f.ledger.get(ns, 'other')).toHaveLength(1);
		const { rows } = await f.pool.query(`SELECT step, action, actor, at, detail FROM "public"."${f.table}_audit" WHERE namespace = $1 ORDER BY step`, [ns]);
		expect(rows.map((r) => [r.step, r.action, r.actor, r.detail.status])).toEqual([
			['', 'release', 'jane@example.com (OPS-7)', 'in_progress'],
			['emailSend', 'release', 'jane@example.com (OPS-7)', 'needs_review'],
		]);
		expect(rows[0].at).toBeInstanceOf(Date);
		const [claim] = await f.ledger.claim([{ namespace: ns, key: 'k', step: '', fingerprint: null }], { mode: 'lease', holder: 'execution:replay', leaseMs: 60_000, ttlMs: 60_000 });
		expect(claim.kind).toBe('claimed');
	});

	test('one step only; an empty step is the unit itself; the default "released by" is this workflow and execution', async () => {
		const ns = 'release-step';
		await recordRow(f.ledger, ns, 'k', 'completed');
		await recordRow(f.ledger, ns, 'k', 'needs_review', 'emailSend');
		const step = await f.run([{}], { resource: 'key', operation: 'release', ...shared(ns), key: 'k', releaseScope: 'step', step: 'emailSend' }, { workflowId: 'wf-ops', executionId: 'exec-77' });
		expect(json(f.out(step))[0]).toMatchObject({ step: 'emailSend', released: 1, releasedBy: 'workflow:wf-ops execution:exec-77' });
		expect((await f.ledger.get(ns, 'k')).map((r) => r.step)).toEqual(['']);
		const unit = await f.run([{}], { resource: 'key', operation: 'release', ...shared(ns), key: 'k', releaseScope: 'step', step: '' });
		expect(json(f.out(unit))[0]).toMatchObject({ step: '', released: 1 });
		expect(await f.ledger.get(ns, 'k')).toEqual([]);
		const { rows } = await f.pool.query(`SELECT actor FROM "public"."${f.table}_audit" WHERE namespace = $1 AND step = 'emailSend'`, [ns]);
		expect(rows[0].actor).toBe('workflow:wf-ops execution:exec-77');
	});

	test('what Guarded Send\'s check found at the destination is on the listed row and on the released step', async () => {
		const ns = `release-evidence-${Date.now()}`;
		const check = { outcome: 'unknown', detail: 'Slack refused to show the channel history (missing_scope)', checkedAt: '2026-11-25T10:00:00.000Z' };
		await recordRow(f.ledger, ns, 'k', 'needs_review', 'slackNotify', { result: { reason: 'ambiguous', detail: 'may have been delivered', check } });
		await recordRow(f.ledger, ns, 'k', 'completed', 'emailSend');
		const listed = json(f.out(await f.run([{}], { resource: 'key', operation: 'list', ...shared(ns), status: 'needs_review' })))[0].records as Array<Record<string, unknown>>;
		expect(listed.map((r) => [r.step, r.check])).toEqual([['slackNotify', check]]);
		const released = json(f.out(await f.run([{}], { resource: 'key', operation: 'release', ...shared(ns), key: 'k', resolution: 'sent' })))[0];
		expect((released.steps as Array<Record<string, unknown>>).map((s) => [s.step, s.check]).sort()).toEqual([
			['emailSend', null],
			['slackNotify', check],
		]);
	});

	test('an unknown key releases nothing and writes no audit row', async () => {
		const audits = await auditRows();
		const out = json(f.out(await f.run([{}], { resource: 'key', operation: 'release', ...shared('release-none'), key: 'nope' })));
		expect(out[0]).toMatchObject({ released: 0 });
		expect(await auditRows()).toBe(audits);
	});
});

describe('Ledger → Purge Expired and Get Stats', () => {
	test('purge is bounded by Max Rows to Delete and reports whether more may remain', async () => {
		const ns = 'purge-ns';
		await recordRow(f.ledger, ns, 'keep', 'completed');
		for (let i = 0; i < 5; i++) await recordRow(f.ledger, ns, `old-${i}`, 'completed');
		await f.pool.query(`UPDATE "public"."${f.table}" SET expires_at = now() - interval '1 day' WHERE namespace = $1 AND key LIKE 'old-%'`, [ns]);
		const expired = () => f.count(`SELECT count(*) AS n FROM {t} WHERE expires_at <= now()`);
		const total = await expired();
		expect(total).toBeGreaterThanOrEqual(5);
		const first = json(f.out(await f.run([{}], { resource: 'ledger', operation: 'purge', maxDelete: 3 })))[0];
		expect(first).toMatchObject({ purged: 3, limit: 3, more: true });
		expect(first.purgedAt).toMatch(ISO);
		expect(await expired()).toBe(total - 3);
		const rest = json(f.out(await f.run([{}], { resource: 'ledger', operation: 'purge' })))[0];
		expect(rest).toMatchObject({ purged: total - 3, limit: 1000, more: false });
		expect(await f.ledger.get(ns, 'keep')).toHaveLength(1);
	});

	test('stats per namespace: counts by status, stuck, duplicates blocked, oldest in progress', async () => {
		const ns = 'stats-ns';
		await stuckRow(f.ledger, ns, 's1');
		await liveRow(f.ledger, ns, 'r1');
		await recordRow(f.ledger, ns, 'c1', 'completed');
		await recordRow(f.ledger, ns, 'c2', 'completed');
		await recordRow(f.ledger, ns, 'n1', 'needs_review');
		// Two repeats of a completed key are blocked.
		await f.ledger.claim(
			[{ namespace: ns, key: 'c1', step: '', fingerprint: null }, { namespace: ns, key: 'c2', step: '', fingerprint: null }],
			{ mode: 'lease', holder: 'execution:again', leaseMs: 60_000, ttlMs: 60_000 },
		);
		const expected = await f.ledger.stats(ns);
		const [stats] = json(f.out(await f.run([{}], { resource: 'ledger', operation: 'stats', ...shared(ns) })));
		expect(stats).toMatchObject({
			namespace: ns,
			total: 5,
			byStatus: { in_progress: 2, completed: 2, failed_retryable: 0, needs_review: 1 },
			stuck: 1,
			duplicatesBlocked: expected.duplicatesBlocked,
		});
		expect(expected.duplicatesBlocked).toBe(2);
		expect(stats.oldestInProgressAt).toBe(expected.oldestInProgressAt?.toISOString());
		expect(stats.oldestInProgressAgeSeconds).toEqual(expect.any(Number));
		expect(stats.asOf).toMatch(ISO);
		const [empty] = json(f.out(await f.run([{}], { resource: 'ledger', operation: 'stats', ...shared('stats-empty') })));
		expect(empty).toMatchObject({ total: 0, stuck: 0, duplicatesBlocked: 0, oldestInProgressAt: null, oldestInProgressAgeSeconds: null });
	});
});

describe('Checkpoint → Get and Set', () => {
	const cp = (params: Record<string, unknown>, options = {}) =>
		f.run([{}], { resource: 'checkpoint', ...shared('cp-ns'), checkpointName: 'invoices', ...params }, options);

	test('unknown → set → forward → backward refused (per-item error) → forced back', async () => {
		expect(json(f.out(await cp({ operation: 'get' })))[0]).toEqual({
			namespace: 'cp-ns', name: 'invoices', found: false, value: null, updatedAt: null, updatedBy: null,
		});
		const set = json(f.out(await cp({ operation: 'set', checkpointValue: '2026-01-01', updatedBy: 'nightly sync' })))[0];
		expect(set).toMatchObject({ found: true, value: '2026-01-01', updatedBy: 'nightly sync', forced: false });
		expect(set.updatedAt).toMatch(ISO);
		expect(json(f.out(await cp({ operation: 'set', checkpointValue: '2026-02-01' })))[0]).toMatchObject({ value: '2026-02-01' });

		const back = await cp({ operation: 'set', checkpointValue: '2026-01-15' });
		expect(back.error?.message).toBe('The checkpoint is at "2026-02-01" and will not move back to "2026-01-15"');
		expect((back.error as NodeOperationError).description).toMatch(/Force/);
		expect(json(f.out(await cp({ operation: 'get' })))[0]).toMatchObject({ value: '2026-02-01' });

		const forced = json(f.out(await cp({ operation: 'set', checkpointValue: '2026-01-15', force: true })))[0];
		expect(forced).toMatchObject({ value: '2026-01-15', forced: true });
		const got = json(f.out(await cp({ operation: 'get' })))[0];
		expect(got).toMatchObject({ found: true, value: '2026-01-15', updatedBy: expect.stringMatching(/^workflow:wf-operator execution:/) });
	});

	test('numbers compare as numbers; with continue on fail a refused item is an error item and the others go on', async () => {
		const run = (values: unknown[]) =>
			f.run(values.map((v) => ({ v })), { resource: 'checkpoint', operation: 'set', ...shared('cp-num'), checkpointName: 'page', checkpointValue: '={{ $json.v }}' }, { continueOnFail: true });
		const out = f.out(await run([9, 10, 3, '11']));
		expect(paired(out)).toEqual([{ item: 0 }, { item: 1 }, { item: 2 }, { item: 3 }]);
		expect(out.map((i) => i.json.value ?? i.json.error)).toEqual([
			'9',
			'10',
			'The checkpoint is at "10" and will not move back to "3"',
			'11',
		]);
		expect(out[2].json.details).toMatch(/Force/);
	});
});

describe('bad input: a clear per-item error and no ledger write', () => {
	const cases: Array<[string, Record<string, unknown>, object, RegExp]> = [
		['an empty key', { resource: 'key', operation: 'release', key: '={{ $json.k }}' }, { k: '' }, /^The key is empty$/],
		['a missing key field', { resource: 'key', operation: 'release', key: '={{ $json.k }}' }, {}, /^The key is missing on this item$/],
		['a key that is too long', { resource: 'key', operation: 'release', key: '={{ $json.k }}' }, { k: 'x'.repeat(513) }, /513 characters long; the limit is 512/],
		['a key that is an object', { resource: 'key', operation: 'get', key: '={{ $json.k }}' }, { k: { a: 1 } }, /must be text or a number, but on this item it is an object/],
		['a key that is a list', { resource: 'key', operation: 'get', key: '={{ $json.k }}' }, { k: [1] }, /it is a list/],
		['a key that is a boolean', { resource: 'key', operation: 'release', key: '={{ $json.k }}' }, { k: true }, /it is a boolean/],
		['an empty shared namespace', { resource: 'key', operation: 'release', scope: 'shared', namespace: '={{ $json.ns }}', key: 'k' }, { ns: '  ' }, /^The namespace is empty$/],
		['a step that is too long', { resource: 'key', operation: 'release', key: 'k', releaseScope: 'step', step: 's'.repeat(201) }, {}, /step is 201 characters long/],
		['a "released by" that is an object', { resource: 'key', operation: 'release', key: 'k', releasedBy: '={{ $json.who }}' }, { who: { id: 1 } }, /released by must be text, but on this item it is an object/],
		['a bad status', { resource: 'key', operation: 'list', status: '={{ $json.s }}' }, { s: 'stuk' }, /^The status "stuk" is not one of: stuck, stuck_sending, needs_review, in_progress, failed_retryable, completed, any$/],
		['a negative limit', { resource: 'key', operation: 'list', limit: '={{ $json.l }}' }, { l: -5 }, /^The limit must be a whole number from 1 to 1000, not number -5$/],
		['a zero limit', { resource: 'key', operation: 'list', limit: 0 }, {}, /whole number from 1 to 1000/],
		['a fractional limit', { resource: 'key', operation: 'list', limit: 2.5 }, {}, /whole number from 1 to 1000/],
		['a limit above the bound', { resource: 'key', operation: 'list', limit: 5000 }, {}, /whole number from 1 to 1000/],
		['a limit that is text', { resource: 'key', operation: 'list', limit: '={{ $json.l }}' }, { l: 'ten' }, /whole number from 1 to 1000, not string "ten"/],
		['Max Rows above the bound', { resource: 'key', operation: 'list', returnAll: true, maxRows: 20000 }, {}, /max rows must be a whole number from 1 to 10000/],
		['a negative age', { resource: 'key', operation: 'list', notUpdatedFor: -1 }, {}, /Not Updated For" age must be a positive number/],
		['a cursor with odd characters', { resource: 'key', operation: 'list', cursor: 'not a cursor!' }, {}, /^The page cursor is not one this ledger made$/],
		['a cursor of the right alphabet but not from this ledger', { resource: 'key', operation: 'list', cursor: 'bm90LWEtY3Vyc29y' }, {}, /^The page cursor is not one this ledger made$/],
		['a cursor that is a number', { resource: 'key', operation: 'list', cursor: '={{ $json.c }}' }, { c: 12 }, /cursor must be text, but on this item it is number 12/],
		['a negative purge limit', { resource: 'ledger', operation: 'purge', maxDelete: -1 }, {}, /max rows to delete must be a whole number from 1 to 100000/],
		['an empty checkpoint name', { resource: 'checkpoint', operation: 'set', checkpointName: '={{ $json.n }}', checkpointValue: '1' }, { n: ' ' }, /^The checkpoint name is empty$/],
		['an empty checkpoint value', { resource: 'checkpoint', operation: 'set', checkpointName: 'x', checkpointValue: '={{ $json.v }}' }, {}, /^The checkpoint value must be text, but on this item it is nothing$/],
		['a checkpoint value that is an object', { resource: 'checkpoint', operation: 'set', checkpointName: 'x', checkpointValue: '={{ $json.v }}' }, { v: { a: 1 } }, /checkpoint value must be text, but on this item it is an object/],
		['a checkpoint value that is too long', { resource: 'checkpoint', operation: 'set', checkpointName: 'x', checkpointValue: 'v'.repeat(2001) }, {}, /2001 characters long; the limit is 2000/],
		['"Force" that is not a boolean', { resource: 'checkpoint', operation: 'set', checkpointName: 'x', checkpointValue: '1', force: '={{ $json.f }}' }, { f: 'yes' }, /"Force" must be true or false/],
		['"All Namespaces" carried to an operation that needs one namespace', { resource: 'key', operation: 'release', scope: 'all', key: 'k' }, {}, /scope "all" cannot be used with this operation/],
	];

	test.each(cases)('%s', async (_label, params, item, message) => {
		const before = [await ledgerRows(), await auditRows(), await checkpointRows()];
		const result = await f.run([item], { scope: 'shared', namespace: 'bad-input', ...params });
		expect(result.error?.message).toMatch(message);
		expect(result.nodeError(NODE)?.message).toMatch(message);
		expect((result.error as NodeOperationError & { context?: { itemIndex?: number } }).context?.itemIndex).toBe(0);
		expect([await ledgerRows(), await auditRows(), await checkpointRows()]).toEqual(before);
	});

	test('a required parameter left literally empty is refused by n8n before the node runs', async () => {
		const before = await checkpointRows();
		await expect(f.run([{}], { resource: 'checkpoint', operation: 'set', ...shared('bad-input'), checkpointName: '', checkpointValue: '1' })).rejects.toThrow(
			/Parameter "Checkpoint Name" is required/,
		);
		expect(await checkpointRows()).toBe(before);
	});

	test('with continue on fail: bad items become error items in place, good items still run, nothing written for the bad ones', async () => {
		const ns = 'bad-mixed';
		await recordRow(f.ledger, ns, 'good-1', 'needs_review');
		await recordRow(f.ledger, ns, 'good-2', 'needs_review');
		const audits = await auditRows();
		const result = await f.run(
			[{ k: 'good-1' }, { k: '' }, { k: { nested: true } }, { k: 'good-2' }],
			{ resource: 'key', operation: 'release', ...shared(ns), key: '={{ $json.k }}' },
			{ continueOnFail: true },
		);
		expect(result.error).toBeUndefined();
		const out = f.out(result);
		expect(paired(out)).toEqual([{ item: 0 }, { item: 1 }, { item: 2 }, { item: 3 }]);
		expect(out.map((i) => i.json.released ?? i.json.error)).toEqual([
			1,
			'The key is empty',
			'The key must be text or a number, but on this item it is an object',
			1,
		]);
		expect(out[1].json.details).toMatch(/Check the key parameter/);
		expect(await auditRows()).toBe(audits + 2);
	});

	test('the second item fails without continue on fail: the error names item 1, and item 0 was already done', async () => {
		const ns = 'bad-second';
		await recordRow(f.ledger, ns, 'a', 'needs_review');
		const result = await f.run([{ k: 'a' }, { k: '' }], { resource: 'key', operation: 'release', ...shared(ns), key: '={{ $json.k }}' });
		expect(result.error?.message).toBe('The key is empty');
		expect((result.error as NodeOperationError & { context?: { itemIndex?: number } }).context?.itemIndex).toBe(1);
		expect(await f.ledger.get(ns, 'a')).toEqual([]);
	});
});

describe('fail closed when the ledger is unreachable', () => {
	const down = () => ({ idempotencyPostgresApi: { ...f.credentials.idempotencyPostgresApi, host: '127.0.0.1', port: 1 } });

	test('the node fails with a message that says what to check', async () => {
		const result = await f.run([{}], { resource: 'key', operation: 'release', ...shared('down'), key: 'k' }, { credentials: down() });
		expect(result.error?.message).toBe('The idempotency ledger is unavailable: The ledger database refused the connection');
		expect((result.error as NodeOperationError).description).toMatch(/Check that PostgreSQL is running/);
	});

	test('with continue on fail every item carries the error; bad input still gets its own error', async () => {
		const result = await f.run([{ k: 'a' }, { k: '' }, { k: 'b' }], { resource: 'key', operation: 'get', ...shared('down'), key: '={{ $json.k }}' }, {
			credentials: down(),
			continueOnFail: true,
		});
		const out = f.out(result);
		expect(out.map((i) => i.json.error)).toEqual([
			'The idempotency ledger is unavailable: The ledger database refused the connection',
			'The key is empty',
			'The idempotency ledger is unavailable: The ledger database refused the connection',
		]);
		expect(paired(out)).toEqual([{ item: 0 }, { item: 1 }, { item: 2 }]);
	});
});
