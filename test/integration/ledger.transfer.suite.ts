/**
 * The ledger copy's tests (lib/ledger/transfer.ts), run for each pair of backends by
 * ledger.transfer.test.ts (PostgreSQL and Redis) and sqlite.transfer.test.ts (the Built-in ledger,
 * on Node 22.13+): 20,000 rows by default (TRANSFER_ROWS), every field checked on arrival, a second run that copies nothing,
 * a copy stopped half way then run again that ends exactly where an uninterrupted one does, and
 * the merge rule row by row.
 */
import type { Ledger, LedgerRecord } from '../../lib/ledger';
import { copyLedger, type CopyTotals, type LedgerExport, type LedgerImport, type TransferRow } from '../../lib/ledger/transfer';
import { freshPostgresLedger, uniqueTable } from '../support/db';
import { freshRedisLedger, uniquePrefix } from '../support/redis';

/** A ledger a copy can read (a source); a target can also take a copy. */
type Source = Ledger & LedgerExport;
type Side = Source & LedgerImport;
export interface Fixture<L extends Source = Side> {
	ledger: L;
	dispose(): Promise<void>;
}

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
/**
 * Keys of the big copy: 20,000 by default (20 batches of 1,000, every state and every field), so
 * that it checks the copy, not the machine; TRANSFER_ROWS=100000 gives the size a real Built-in
 * ledger grows to, with the copy's time beside the fill's (printed).
 */
const N = Number(process.env.TRANSFER_ROWS || 20_000);
const ns = 'transfer-big';

/**
 * A ledger of `n` keys in every state: completed with results, needs_review in phase `sending`,
 * in progress in phase `sending`, failed_retryable, in progress under a live lease, in progress
 * with a lapsed lease; a second step on some keys; checkpoints, counters and release audit rows.
 */
async function fill(ledger: Ledger, n: number): Promise<void> {
	const keys = Array.from({ length: n }, (_, i) => `k${i}`);
	const claimed = await ledger.claim(
		keys.map((key, i) => ({ namespace: ns, key, step: '', fingerprint: `fp-${i % 7}` })),
		{ mode: 'lease', holder: 'exec-1', leaseMs: 2 * HOUR, ttlMs: 7 * DAY },
	);
	const fence = (i: number) => (claimed[i] as { record: LedgerRecord }).record.fence!;
	const range = (from: number, to: number) => Array.from({ length: Math.max(0, Math.min(n, to) - from) }, (_, j) => from + j);
	const tenth = Math.floor(n / 10);
	// 0 .. 6/10: completed, with an external id and a result.
	await ledger.record(
		range(0, 6 * tenth).map((i) => ({ namespace: ns, key: keys[i], step: '', status: 'completed' as const, fence: fence(i), externalId: `ext-${i}`, result: { n: i, ok: true } })),
		{ ttlMs: 30 * DAY },
	);
	// 6/10 .. 7/10: phase sending; the first half then needs_review (keeps sending).
	const sending = range(6 * tenth, 7 * tenth);
	await ledger.markPhase(sending.map((i) => ({ namespace: ns, key: keys[i], step: '', fence: fence(i) })), 'sending');
	await ledger.record(
		sending.slice(0, sending.length / 2).map((i) => ({ namespace: ns, key: keys[i], step: '', status: 'needs_review' as const, fence: fence(i), result: { error: `timeout ${i}` } })),
		{ ttlMs: 30 * DAY },
	);
	// 7/10 .. 8/10: failed_retryable.
	await ledger.record(
		range(7 * tenth, 8 * tenth).map((i) => ({ namespace: ns, key: keys[i], step: '', status: 'failed_retryable' as const, fence: fence(i), result: { error: 'HTTP 503' } })),
		{ ttlMs: 3 * DAY },
	);
	// The rest stay in progress under the lease. A second step on 1,000 keys, completed at once.
	await ledger.claim(
		range(0, Math.min(1000, n)).map((i) => ({ namespace: ns, key: keys[i], step: 'email', fingerprint: null })),
		{ mode: 'seen', holder: 'exec-1', leaseMs: 0, ttlMs: 10 * DAY },
	);
	// A lapsed lease in another namespace.
	await ledger.claim([{ namespace: 'transfer-other', key: 'stuck', step: '', fingerprint: null }], { mode: 'lease', holder: 'exec-2', leaseMs: 1, ttlMs: DAY });
	await ledger.setCheckpoint(ns, 'stripe-cursor', '1700000000', { force: false, updatedBy: 'sync' });
	await ledger.setCheckpoint('transfer-other', 'page', 'evt_42', { force: false, updatedBy: null });
	await ledger.addCounts([
		{ namespace: ns, counts: { sent: 1234, spentUsd: 12.5 } },
		{ namespace: 'transfer-other', counts: { blocked: 3 } },
	]);
	// Two releases (audit rows): one freed, one "it was sent".
	await ledger.release({ namespace: ns, key: keys[6 * tenth + 1], step: null, releasedBy: 'ops@example.com', resolution: 'not_sent', ttlMs: DAY });
	await ledger.release({ namespace: ns, key: keys[6 * tenth + 2], step: null, releasedBy: 'ops@example.com', resolution: 'sent', ttlMs: DAY });
}

interface Snapshot {
	rows: Map<string, TransferRow>;
	checkpoints: Map<string, string>;
	days: Map<string, Record<string, number>>;
	audit: string[];
}

/** Everything a ledger holds, by reading its export whole. */
async function snapshot(ledger: LedgerExport): Promise<Snapshot> {
	const out: Snapshot = { rows: new Map(), checkpoints: new Map(), days: new Map(), audit: [] };
	let cursor: string | null = null;
	do {
		const page: Awaited<ReturnType<LedgerExport['exportBatch']>> = await ledger.exportBatch(cursor, 5000);
		for (const r of page.rows) out.rows.set(`${r.namespace}|${r.key}|${r.step}`, r);
		for (const c of page.checkpoints) out.checkpoints.set(`${c.namespace}|${c.name}`, `${c.value}|${c.updatedBy}|${Math.round(c.updatedAt)}`);
		for (const d of page.days) out.days.set(`${d.namespace}|${d.day}`, d.counts);
		for (const a of page.audit) out.audit.push(JSON.stringify([a.namespace, a.key, a.step, a.action, a.actor, Math.round(a.at), a.detail.status, a.detail.phase ?? null, a.detail.resolution ?? null]));
		cursor = page.next;
	} while (cursor !== null);
	out.audit.sort();
	return out;
}

/** The facts of a row that must arrive exactly (fence: only whether there was one; times: to the ms). */
const facts = (r: TransferRow) =>
	JSON.stringify([r.status, r.phase, r.previousStatus, r.previousPhase, r.fence !== null, r.fingerprint, r.version, r.externalId, r.result, r.attempts,
		r.leaseHolder, r.leaseRemainingMs === null ? null : r.leaseRemainingMs > 0, r.expiresInMs === null, Math.round(r.firstSeenAt), Math.round(r.updatedAt)]);

/**
 * The target holds exactly what the source held when it was read, `elapsedMs` before the target
 * was: leases and expiries as long as the source's then, less the time since (the target counts by
 * its own clock from the moment of the copy), never longer by more than a second.
 */
function expectSameContent(source: Snapshot, target: Snapshot, elapsedMs: number): void {
	expect(target.rows.size).toBe(source.rows.size);
	let compared = 0;
	for (const [id, s] of source.rows) {
		const t = target.rows.get(id);
		if (!t) throw new Error(`row ${id} did not arrive`);
		if (facts(t) !== facts(s)) expect({ id, row: JSON.parse(facts(t)) }).toEqual({ id, row: JSON.parse(facts(s)) });
		if (s.expiresInMs !== null) {
			// The target's clock took over: a little later than the source's, never earlier.
			expect(t.expiresInMs!).toBeGreaterThan(s.expiresInMs - elapsedMs - 1_000);
			expect(t.expiresInMs!).toBeLessThan(s.expiresInMs + 1_000);
		}
		if (s.leaseRemainingMs !== null && s.leaseRemainingMs > 0) {
			expect(t.leaseRemainingMs!).toBeGreaterThan(s.leaseRemainingMs - elapsedMs - 1_000);
			expect(t.leaseRemainingMs!).toBeLessThan(s.leaseRemainingMs + 1_000);
		}
		compared++;
	}
	expect(compared).toBe(source.rows.size);
	expect(target.checkpoints).toEqual(source.checkpoints);
	expect(target.days).toEqual(source.days);
	expect(target.audit).toEqual(source.audit);
}

export const pg = async (): Promise<Fixture> => {
	const f = await freshPostgresLedger(uniqueTable('transfer'));
	return { ledger: f.ledger, dispose: f.dispose };
};
export const redis = async (): Promise<Fixture> => {
	const f = await freshRedisLedger(uniquePrefix('transfer'));
	return { ledger: f.ledger, dispose: f.dispose };
};

export function describeBigCopy(name: string, makeSource: () => Promise<Fixture<Source>>, makeTarget: () => Promise<Fixture>, n = N, batchSize = 1000) {
	describe(name, () => {
		let source: Fixture<Source>;
		let expected: Snapshot;
		let readAt = 0;
		/** How long the source's own claims and records of the same keys took (the baseline the copy's time is reported beside). */
		let fillMs = 0;
		const since = () => Date.now() - readAt;
		const targets: Fixture[] = [];
		const target = async () => {
			const t = await makeTarget();
			targets.push(t);
			return t;
		};

		beforeAll(async () => {
			source = await makeSource();
			const started = Date.now();
			await fill(source.ledger, n);
			fillMs = Date.now() - started;
			readAt = Date.now();
			expected = await snapshot(source.ledger);
		}, 600_000);
		afterAll(async () => {
			await Promise.all(targets.map((t) => t.dispose()));
			await source?.dispose();
		});

		test(`copies ${n.toLocaleString('en')} keys with every field, and a second run copies nothing`, async () => {
			// 100,000 keys, 1,000 second steps, one lapsed lease; two rows released (one gone, one recorded as sent).
			expect(expected.rows.size).toBe(n + Math.min(1000, n) + 1 - 1);
			const t = await target();
			const first = await copyLedger(source.ledger, t.ledger, { batchSize });
			process.stderr.write(
				`${name}: copied ${expected.rows.size} rows in ${first.durationMs} ms (${first.batches} batches); ` +
					`writing them into the source with its own claim/record/markPhase took ${fillMs} ms (copy/fill ${(first.durationMs / fillMs).toFixed(2)})\n`,
			);
			expect(first).toMatchObject({
				rowsCopied: expected.rows.size,
				rowsReplaced: 0,
				rowsAlreadyPresent: 0,
				rowsSkippedOlder: 0,
				checkpointsCopied: 2,
				counterDaysCopied: 2,
				auditCopied: 2,
			});
			expectSameContent(expected, await snapshot(t.ledger), since());

			const second = await copyLedger(source.ledger, t.ledger, { batchSize });
			expect(second).toMatchObject({
				rowsCopied: 0,
				rowsReplaced: 0,
				rowsAlreadyPresent: expected.rows.size,
				rowsSkippedOlder: 0,
				checkpointsCopied: 0,
				checkpointsKept: 2,
				counterDaysCopied: 0,
				counterDaysKept: 2,
				auditCopied: 0,
				auditAlreadyPresent: 2,
			});
			// The copied ledger works: a copied completed key is a duplicate, a copied in-progress key is held.
			const [done, held] = await t.ledger.claim(
				[
					{ namespace: ns, key: 'k0', step: '', fingerprint: 'fp-0' },
					{ namespace: ns, key: `k${n - 1}`, step: '', fingerprint: `fp-${(n - 1) % 7}` },
				],
				{ mode: 'lease', holder: 'exec-9', leaseMs: HOUR, ttlMs: DAY },
			);
			expect(done.kind).toBe('duplicate');
			expect(held.kind).toBe('in_progress');
		}, 600_000);

		test('a copy stopped after a few batches, run again, ends exactly where a whole copy does', async () => {
			const t = await target();
			let stoppedAt: CopyTotals | null = null;
			await expect(
				copyLedger(source.ledger, t.ledger, {
					batchSize,
					onBatch: (done) => {
						if (done.batches === 7) {
							stoppedAt = { ...done };
							throw new Error('crash');
						}
					},
				}),
			).rejects.toThrow('crash');
			expect(stoppedAt!.rowsCopied).toBe(7 * batchSize);
			const resumed = await copyLedger(source.ledger, t.ledger, { batchSize });
			expect(resumed.rowsAlreadyPresent).toBe(7 * batchSize);
			expect(resumed.rowsCopied).toBe(expected.rows.size - 7 * batchSize);
			expect(resumed.rowsReplaced + resumed.rowsSkippedOlder).toBe(0);
			expectSameContent(expected, await snapshot(t.ledger), since());
		}, 600_000);
	});
}

/** Row by row: the target keeps what says more about the side effect, and nothing that may have been sent is reopened. */
export function describeMergeRule(name: string, makeSource: () => Promise<Fixture<Source>>, makeTarget: () => Promise<Fixture>) {
	test(`${name}: the merge rule`, async () => {
		const source = await makeSource();
		const target = await makeTarget();
		try {
			const m = 'transfer-merge';
			const row = (key: string) => ({ namespace: m, key, step: '', fingerprint: null });
			const lease = { mode: 'lease' as const, holder: 'run', leaseMs: HOUR, ttlMs: DAY };
			const fenceOf = (o: unknown) => (o as { record: LedgerRecord }).record.fence!;
			// Target: a completed, b in progress and maybe sent, c in progress, d needs review, e completed, f failed.
			const t = await target.ledger.claim(['a', 'b', 'c', 'd', 'e', 'f'].map(row), lease);
			await target.ledger.markPhase([{ ...row('b'), fence: fenceOf(t[1]) }, { ...row('d'), fence: fenceOf(t[3]) }], 'sending');
			await target.ledger.record(
				[
					{ ...row('a'), status: 'completed', fence: fenceOf(t[0]), result: 'target a' },
					{ ...row('d'), status: 'needs_review', fence: fenceOf(t[3]) },
					{ ...row('e'), status: 'completed', fence: fenceOf(t[4]), result: 'target e' },
					{ ...row('f'), status: 'failed_retryable', fence: fenceOf(t[5]) },
				],
				{ ttlMs: DAY },
			);
			// Source: a in progress, b failed, c completed, d completed, e completed (another result), f in progress and maybe sent.
			const s = await source.ledger.claim(['a', 'b', 'c', 'd', 'e', 'f'].map(row), lease);
			await source.ledger.markPhase([{ ...row('f'), fence: fenceOf(s[5]) }], 'sending');
			await source.ledger.record(
				[
					{ ...row('b'), status: 'failed_retryable', fence: fenceOf(s[1]) },
					{ ...row('c'), status: 'completed', fence: fenceOf(s[2]), result: 'source c' },
					{ ...row('d'), status: 'completed', fence: fenceOf(s[3]), result: 'source d' },
					{ ...row('e'), status: 'completed', fence: fenceOf(s[4]), result: 'source e' },
				],
				{ ttlMs: DAY },
			);
			await target.ledger.setCheckpoint(m, 'ahead', '100', { force: false, updatedBy: null });
			await target.ledger.setCheckpoint(m, 'behind', '5', { force: false, updatedBy: null });
			await source.ledger.setCheckpoint(m, 'ahead', '90', { force: false, updatedBy: null });
			await source.ledger.setCheckpoint(m, 'behind', '7', { force: false, updatedBy: 'sync' });
			await source.ledger.setCheckpoint(m, 'new', 'evt_1', { force: false, updatedBy: null });
			await target.ledger.addCounts([{ namespace: m, counts: { sent: 10, a: 1 } }]);
			await source.ledger.addCounts([{ namespace: m, counts: { sent: 4, b: 2.5 } }]);

			const totals = await copyLedger(source.ledger, target.ledger);
			expect(totals).toMatchObject({
				rowsCopied: 0,
				rowsReplaced: 3,
				rowsAlreadyPresent: 1,
				rowsSkippedOlder: 2,
				checkpointsCopied: 2,
				checkpointsKept: 1,
				counterDaysCopied: 1,
			});
			const state = async (key: string) => {
				const [r] = await target.ledger.get(m, key);
				return { status: r.status, phase: r.phase, result: r.result };
			};
			expect(await state('a')).toEqual({ status: 'completed', phase: null, result: 'target a' });
			expect(await state('b')).toMatchObject({ status: 'in_progress', phase: 'sending' });
			expect(await state('c')).toEqual({ status: 'completed', phase: null, result: 'source c' });
			expect(await state('d')).toEqual({ status: 'completed', phase: null, result: 'source d' });
			expect(await state('e')).toEqual({ status: 'completed', phase: null, result: 'target e' });
			expect(await state('f')).toMatchObject({ status: 'in_progress', phase: 'sending' });
			const [f] = await target.ledger.get(m, 'f');
			expect(f.expiresAt.getUTCFullYear()).toBe(9999);
			// The run of the target that held c no longer owns it: the copied row has a token of its own.
			const [late] = await target.ledger.record([{ ...row('c'), status: 'failed_retryable', fence: fenceOf(t[2]) }], { ttlMs: DAY });
			expect(late.kind).toBe('lost_lease');
			expect((await target.ledger.getCheckpoint(m, 'ahead'))?.value).toBe('100');
			expect((await target.ledger.getCheckpoint(m, 'behind'))).toMatchObject({ value: '7', updatedBy: 'sync' });
			expect((await target.ledger.getCheckpoint(m, 'new'))?.value).toBe('evt_1');
			const [today] = await target.ledger.readCounts(m, 1);
			expect(today.counts).toEqual({ sent: 10, a: 1, b: 2.5 });
			// And again: nothing changes.
			const again = await copyLedger(source.ledger, target.ledger);
			expect(again).toMatchObject({ rowsCopied: 0, rowsReplaced: 0, rowsAlreadyPresent: 4, rowsSkippedOlder: 2, checkpointsCopied: 0, counterDaysCopied: 0 });
		} finally {
			await source.dispose();
			await target.dispose();
		}
	});
}
