/**
 * The ledger contract. Every backend runs this same suite against its real server.
 */
import {
	CheckpointRegressionError,
	COUNTS_KEPT_DAYS,
	LedgerInputError,
	type ClaimOptions,
	type ClaimOutcome,
	type ClaimRequest,
	type CountIncrement,
	type DailyCounts,
	type Ledger,
	type LedgerRecord,
	type RecordOutcome,
} from '../../lib/ledger';
import { withHostClockSkew } from '../support/clock';

export interface LedgerFixture {
	ledger: Ledger;
	dispose(): Promise<void>;
	/** Another ledger on the same storage with connections of its own, as a second n8n process has; the caller closes it. */
	another(): Promise<Ledger>;
	/** Today, the UTC day by the server's clock, read without the ledger ('YYYY-MM-DD'). */
	ledgerToday(): Promise<string>;
	/** Writes a namespace's counters of a past day (`daysAgo` by the server's clock) straight into storage. */
	putPastCounts(namespace: string, daysAgo: number, counts: Record<string, number>): Promise<void>;
	/** Round trips of an addCounts over `namespaces` namespaces, when not 1 (Redis Cluster: one per namespace). */
	addCountsTrips?: (namespaces: number) => number;
	/** A namespace's audit entries, oldest first, read straight from storage (PostgreSQL's audit table, Redis' audit stream). */
	audit(namespace: string): Promise<AuditEntry[]>;
	/** Deletes one row straight from storage, as a store that loses keys does (Redis eviction, a restart without persistence). */
	vanish(namespace: string, key: string, step: string): Promise<void>;
}

/** One audit entry as both backends keep it: what was done, by whom, and what the row was before. */
export interface AuditEntry {
	key: string;
	step: string;
	action: string;
	actor: string | null;
	status: string;
	leaseHolder: string | null;
	fence: number | null;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const DAY = 86_400_000;

/** The record of a claim that must have succeeded. */
function claimedRecord(outcome: ClaimOutcome): LedgerRecord {
	if (outcome.kind !== 'claimed') throw new Error(`expected a claim, got ${outcome.kind}`);
	return outcome.record;
}

/** 'YYYY-MM-DD' `days` days after `day` (before, when negative). */
const shiftDay = (day: string, days: number) => new Date(Date.parse(`${day}T00:00:00Z`) + days * DAY).toISOString().slice(0, 10);

/** Amounts that went through floating point: equal to within 1e-9. */
function expectAbout(actual: number | undefined, expected: number) {
	expect(typeof actual).toBe('number');
	expect(Math.abs((actual as number) - expected)).toBeLessThan(1e-9);
}

/** The row a record call wrote, or null when it answered lost_lease. */
const writtenRecord = (outcome: RecordOutcome) => (outcome.kind === 'written' ? outcome.record : null);

export function describeLedgerContract(name: string, make: () => Promise<LedgerFixture>) {
	describe(`ledger contract: ${name}`, () => {
		let fx: LedgerFixture;
		let ledger: Ledger;
		let ns: string;
		let n = 0;
		beforeAll(async () => {
			fx = await make();
			ledger = fx.ledger;
		});
		afterAll(async () => fx && (await fx.dispose()));
		beforeEach(() => {
			ns = `ns-${++n}-${Date.now()}`;
		});

		const req = (key: string, extra: Partial<ClaimRequest> = {}): ClaimRequest => ({
			namespace: ns,
			key,
			step: '',
			fingerprint: null,
			...extra,
		});
		const id = (key: string, step = '') => ({ namespace: ns, key, step });
		const lease = (holder: string, leaseMs = 60_000, ttlMs = DAY): ClaimOptions => ({ mode: 'lease', holder, leaseMs, ttlMs });
		const seen: ClaimOptions = { mode: 'seen', holder: 'h', leaseMs: 0, ttlMs: DAY };

		// Races of separate processes are in postgres.migrate.test.ts; here, one instance answers once.
		test('ensureSchema is idempotent: concurrent calls on one instance share one answer', async () => {
			await Promise.all([ledger.ensureSchema(), ledger.ensureSchema(), ledger.ensureSchema()]);
		});

		test('a new key is claimed once; a second claim sees it in progress, then done', async () => {
			const [first] = await ledger.claim([req('a')], lease('run-1'));
			expect(first.kind).toBe('claimed');
			if (first.kind !== 'claimed') return;
			expect(first.record).toMatchObject({ namespace: ns, key: 'a', step: '', status: 'in_progress', leaseHolder: 'run-1', attempts: 1 });
			expect(first.previousStatus).toBeNull();
			expect(first.record.leaseExpiresAt!.getTime()).toBeGreaterThan(Date.now());

			const [second] = await ledger.claim([req('a')], lease('run-2'));
			expect(second.kind).toBe('in_progress');

			const [written] = await ledger.record(
				[{ namespace: ns, key: 'a', step: '', status: 'completed', externalId: 'msg-1', result: { ok: true, ts: '1.2' }, fence: first.record.fence }],
				{ ttlMs: DAY, holder: 'run-1' },
			);
			expect(written).toMatchObject({ kind: 'written', record: { status: 'completed', externalId: 'msg-1', leaseExpiresAt: null, leaseRemainingMs: null } });

			const [third] = await ledger.claim([req('a')], lease('run-3'));
			expect(third.kind).toBe('duplicate');
			if (third.kind === 'duplicate') {
				expect(third.record.result).toEqual({ ok: true, ts: '1.2' });
				expect(third.record.externalId).toBe('msg-1');
			}
		});

		test('duplicates inside one batch: the first item wins, deterministically', async () => {
			const out = await ledger.claim([req('x'), req('y'), req('x'), req('x')], seen);
			expect(out.map((o) => o.kind)).toEqual(['claimed', 'claimed', 'batch_duplicate', 'batch_duplicate']);
			expect(out[2]).toEqual({ kind: 'batch_duplicate', firstIndex: 0 });
		});

		test('keys, steps and namespaces are independent rows', async () => {
			const out = await ledger.claim(
				[req('k'), req('k', { step: 'email' }), req('k', { namespace: `${ns}-other` }), req('K')],
				seen,
			);
			expect(out.every((o) => o.kind === 'claimed')).toBe(true);
		});

		test('one batch blocked by rows of different histories answers each item with its own row', async () => {
			const other = `${ns}-other`;
			const a = await ledger.claim([req('b1', { fingerprint: 'f1' }), req('b2', { fingerprint: 'f2' })], lease('run-a'));
			await ledger.claim([req('b3', { fingerprint: 'f3', namespace: other }), req('b4', { fingerprint: 'f4', step: 'email' })], seen);
			await ledger.record(
				[{ ...id('b2'), status: 'completed', externalId: 'msg-2', result: { ts: '2.0' }, fence: claimedRecord(a[1]).fence }],
				{ ttlMs: DAY, holder: 'run-a' },
			);
			const batch = [
				req('b1', { fingerprint: 'f1' }),
				req('b2', { fingerprint: 'f2' }),
				req('b3', { fingerprint: 'changed', namespace: other }),
				req('b4', { fingerprint: 'f4', step: 'email' }),
				req('b5', { fingerprint: 'f5' }),
			];
			const out = await ledger.claim(batch, lease('run-b'));
			expect(out.map((o) => o.kind)).toEqual(['in_progress', 'duplicate', 'mismatch', 'duplicate', 'claimed']);
			const stored = async (r: ClaimRequest) => (await ledger.get(r.namespace, r.key)).find((row) => row.step === r.step);
			for (let i = 0; i < 4; i++) {
				const answered = out[i] as Exclude<ClaimOutcome, { kind: 'batch_duplicate' }>;
				const row = (await stored(batch[i]))!;
				expect({ ...answered.record, leaseRemainingMs: null }).toEqual({ ...row, leaseRemainingMs: null });
			}
			expect(claimedRecord(out[4]).fingerprint).toBe('f5');
		});

		test('rows of several earlier claims, interleaved in one batch, each answer their own claim; a stored fingerprint not asked for is answered', async () => {
			await ledger.claim([req('p1', { fingerprint: 'F' }), req('p2'), req('p3', { fingerprint: 'F' })], lease('run-a'));
			await ledger.claim([req('q1'), req('q2')], seen);
			const batch = [req('q1'), req('p1', { fingerprint: 'F' }), req('p2'), req('q2'), req('p3'), req('p4')];
			const out = await ledger.claim(batch, lease('run-b'));
			expect(out.map((o) => o.kind)).toEqual(['duplicate', 'in_progress', 'in_progress', 'duplicate', 'in_progress', 'claimed']);
			for (let i = 0; i < 5; i++) {
				const answered = out[i] as Exclude<ClaimOutcome, { kind: 'batch_duplicate' }>;
				const row = (await ledger.get(ns, batch[i].key)).find((r) => r.step === '')!;
				expect({ ...answered.record, leaseRemainingMs: null }).toEqual({ ...row, leaseRemainingMs: null });
			}
			expect((out[4] as { record: LedgerRecord }).record.fingerprint).toBe('F');
			expect((out[1] as { record: LedgerRecord }).record.leaseHolder).toBe('run-a');
			expect((out[1] as { record: LedgerRecord }).record.leaseRemainingMs).toBeGreaterThan(0);
		});

		test('mark-seen mode is at-most-once', async () => {
			expect((await ledger.claim([req('s')], seen))[0].kind).toBe('claimed');
			const [again] = await ledger.claim([req('s')], seen);
			expect(again.kind).toBe('duplicate');
			if (again.kind === 'duplicate') expect(again.record.status).toBe('completed');
		});

		test('a lapsed lease can be reclaimed, and not before', async () => {
			await ledger.claim([req('l')], lease('dead-run', 400));
			const [early] = await ledger.claim([req('l')], lease('run-2', 400));
			expect(early.kind).toBe('in_progress');
			await sleep(600);
			const [late] = await ledger.claim([req('l')], lease('run-2', 60_000));
			expect(late.kind).toBe('claimed');
			if (late.kind === 'claimed') {
				expect(late.previousStatus).toBe('in_progress');
				expect(late.record.attempts).toBe(2);
				expect(late.record.leaseHolder).toBe('run-2');
			}
		});

		test('an expired row counts as absent', async () => {
			await ledger.claim([req('e')], { ...seen, ttlMs: 400 });
			expect((await ledger.claim([req('e')], { ...seen, ttlMs: 400 }))[0].kind).toBe('duplicate');
			await sleep(600);
			expect(await ledger.get(ns, 'e')).toEqual([]);
			const [again] = await ledger.claim([req('e')], seen);
			expect(again.kind).toBe('claimed');
			if (again.kind === 'claimed') {
				expect(again.previousStatus).toBeNull();
				expect(again.record.attempts).toBe(1);
			}
		});

		test('the same key with a different payload is a mismatch and writes nothing', async () => {
			await ledger.claim([req('m', { fingerprint: 'fp-1' })], seen);
			const [before] = await ledger.get(ns, 'm');
			const [out] = await ledger.claim([req('m', { fingerprint: 'fp-2' })], seen);
			expect(out.kind).toBe('mismatch');
			const [after] = await ledger.get(ns, 'm');
			expect(after).toEqual(before);
			expect((await ledger.claim([req('m', { fingerprint: 'fp-1' })], seen))[0].kind).toBe('duplicate');
		});

		test('failed_retryable may be taken again; needs_review may not', async () => {
			await ledger.record(
				[
					{ namespace: ns, key: 'f', step: '', status: 'failed_retryable', result: { error: '503' } },
					{ namespace: ns, key: 'r', step: '', status: 'needs_review' },
				],
				{ ttlMs: DAY },
			);
			const [f, r] = await ledger.claim([req('f'), req('r')], lease('run-9'));
			expect(f.kind).toBe('claimed');
			if (f.kind === 'claimed') expect(f.previousStatus).toBe('failed_retryable');
			expect(r.kind).toBe('duplicate');
		});

		test('only newer versions pass in "newer" mode (numbers compare as numbers)', async () => {
			const newer = { ...seen, mode: 'newer' as const };
			expect((await ledger.claim([req('v', { version: '9', fingerprint: 'a' })], newer))[0].kind).toBe('claimed');
			expect((await ledger.claim([req('v', { version: '9', fingerprint: 'a' })], newer))[0].kind).toBe('duplicate');
			expect((await ledger.claim([req('v', { version: '8', fingerprint: 'b' })], newer))[0].kind).toBe('duplicate');
			expect((await ledger.claim([req('v', { version: '9', fingerprint: 'b' })], newer))[0].kind).toBe('mismatch');
			const [ten] = await ledger.claim([req('v', { version: '10', fingerprint: 'c' })], newer);
			expect(ten.kind).toBe('claimed');
			if (ten.kind === 'claimed') expect(ten.record.version).toBe('10');
			expect((await ledger.claim([req('w', { version: '2026-01-02T00:00:00Z' })], newer))[0].kind).toBe('claimed');
			expect((await ledger.claim([req('w', { version: '2026-01-01T23:00:00Z' })], newer))[0].kind).toBe('duplicate');
			expect((await ledger.claim([req('w', { version: '2026-01-03T00:00:00Z' })], newer))[0].kind).toBe('claimed');
		});

		test('an unfenced record refuses a row another holder has in progress, live or lapsed', async () => {
			await ledger.claim([req('h')], lease('owner'));
			await ledger.claim([req('h-lapsed')], lease('dead', 300));
			await sleep(500);
			expect((await ledger.record([{ ...id('h-lapsed'), status: 'completed' }], { ttlMs: DAY, holder: 'intruder' }))[0]).toEqual({ kind: 'lost_lease' });
			const [refused] = await ledger.record([{ namespace: ns, key: 'h', step: '', status: 'completed' }], { ttlMs: DAY, holder: 'intruder' });
			expect(refused).toEqual({ kind: 'lost_lease' });
			const [ok] = await ledger.record([{ namespace: ns, key: 'h', step: '', status: 'completed' }], { ttlMs: DAY, holder: 'owner' });
			expect(writtenRecord(ok)?.status).toBe('completed');
		});

		// Issue 32: PostgreSQL's jsonb cannot hold NUL (nor a lone UTF-16 surrogate), and the whole
		// write failed with the driver's "unsupported Unicode escape sequence". Every backend gives
		// back exactly what was recorded, on every path that reads a result.
		test('a result holding NUL characters and lone surrogates is given back exactly, on every read; its neighbours are written too', async () => {
			const odd = {
				text: 'before\u0000after',
				'key\u0000with NUL': ['\u0000', { deep: 'x\u0000y' }],
				lone: 'half a pair: \ud83d, and \udc4d',
				literal: 'a backslash and u0000: \\u0000',
			};
			// Results that look like the form a backend may keep such a result in.
			const lookalikes = [{ $idempotencyJson: '{"a":1}' }, { $idempotencyJson: 'x', other: 1 }, '\u0000', ['\u0000']];
			const results: unknown[] = [odd, ...lookalikes, { plain: true }];
			const keys = results.map((_, i) => `nul-${i}`);
			const claimed = await ledger.claim(keys.map((k) => req(k)), lease('run-nul'));
			const written = await ledger.record(
				keys.map((k, i) => ({ ...id(k), status: 'completed' as const, result: results[i], fence: claimedRecord(claimed[i]).fence })),
				{ ttlMs: DAY, holder: 'run-nul' },
			);
			expect(written.map((w) => writtenRecord(w)?.result)).toEqual(results);
			// get, list, a duplicate claim (the row that blocked it) and an unfenced write read back.
			for (const [i, key] of keys.entries()) expect([key, (await ledger.get(ns, key))[0].result]).toEqual([key, results[i]]);
			const listed = await ledger.list({ namespace: ns, status: 'completed', limit: 100 });
			expect(keys.map((k) => listed.records.find((r) => r.key === k)?.result)).toEqual(results);
			const again = await ledger.claim(keys.map((k) => req(k)), lease('run-nul-2'));
			expect(again.map((o) => (o.kind === 'duplicate' ? o.record.result : o.kind))).toEqual(results);
			// A failed step taken again carries its result into the new claim.
			await ledger.record([{ ...id('nul-failed'), status: 'failed_retryable', result: odd }], { ttlMs: DAY });
			const [retaken] = await ledger.claim([req('nul-failed')], lease('run-nul-3'));
			expect(claimedRecord(retaken).result).toEqual(odd);
		});

		test('get returns every live step of a key', async () => {
			await ledger.claim([req('g'), req('g', { step: 'invoice' }), req('g', { step: 'email' })], seen);
			const rows = await ledger.get(ns, 'g');
			expect(rows.map((r) => r.step)).toEqual(['', 'email', 'invoice']);
		});

		test('list pages through rows by status, and finds stuck leases', async () => {
			const keys = Array.from({ length: 7 }, (_, i) => `p${i}`);
			await ledger.claim(keys.map((k) => req(k)), lease('stuck-run', 300));
			await ledger.claim([req('live')], lease('live-run', 60_000));
			await sleep(500);
			const seenKeys: string[] = [];
			let cursor: string | null = null;
			let pages = 0;
			do {
				const page = await ledger.list({ namespace: ns, status: 'in_progress', stuckOnly: true, limit: 3, cursor });
				seenKeys.push(...page.records.map((r) => r.key));
				cursor = page.nextCursor;
				pages++;
			} while (cursor && pages < 10);
			expect(pages).toBe(3);
			expect(seenKeys.sort()).toEqual(keys);
			const all = await ledger.list({ namespace: ns, status: 'in_progress', limit: 100 });
			expect(all.records).toHaveLength(8);
		});

		const release = (key: string, step: string | null, extra: Partial<Parameters<Ledger['release']>[0]> = {}) =>
			ledger.release({ namespace: ns, key, step, releasedBy: 'alice', ttlMs: DAY, ...extra });

		test('release deletes one step or the whole key so it can be replayed', async () => {
			await ledger.claim([req('z'), req('z', { step: 'a' }), req('z', { step: 'b' })], seen);
			expect(await release('z', 'a')).toEqual([{ step: 'a', status: 'completed', phase: null, action: 'released' }]);
			expect((await ledger.get(ns, 'z')).map((r) => r.step)).toEqual(['', 'b']);
			expect((await release('z', null)).map((s) => [s.step, s.action])).toEqual([
				['', 'released'],
				['b', 'released'],
			]);
			expect(await ledger.get(ns, 'z')).toEqual([]);
			expect((await ledger.claim([req('z')], seen))[0].kind).toBe('claimed');
			expect(await release('nope', null)).toEqual([]);
		});

		test('release refuses a step whose lease a run still holds, unless told "even if held"; the holder is then fenced out', async () => {
			const held = claimedRecord((await ledger.claim([req('rl')], lease('running', 60_000)))[0]);
			expect(await release('rl', null)).toEqual([{ step: '', status: 'in_progress', phase: null, action: 'refused', reason: 'lease_live' }]);
			expect(await ledger.get(ns, 'rl')).toHaveLength(1);
			expect((await release('rl', null, { evenIfHeld: true })).map((s) => s.action)).toEqual(['released']);
			expect(await ledger.get(ns, 'rl')).toEqual([]);
			// The run that held it finishes late: nothing it writes lands.
			expect(await ledger.markPhase([{ ...id('rl'), fence: held.fence! }], 'sending')).toEqual([false]);
			const [late] = await ledger.record([{ ...id('rl'), status: 'completed', fence: held.fence }], { ttlMs: DAY, holder: 'running' });
			// The row is gone (released), not another claim's: `missing`.
			expect(late).toEqual({ kind: 'lost_lease', missing: true });
			expect(await ledger.get(ns, 'rl')).toEqual([]);
		});

		test('a row that vanished from under its claim (a store that lost the key) answers lost_lease with missing; a takeover answers it without', async () => {
			const [unit, step] = (await ledger.claim([req('gone'), req('gone', { step: 'crm' })], lease('running', 60_000))).map(claimedRecord);
			await fx.vanish(ns, 'gone', 'crm');
			expect(await ledger.markPhase([{ ...id('gone', 'crm'), fence: step.fence! }], 'sending')).toEqual([false]);
			expect(await ledger.renewLeases([{ ...id('gone', 'crm'), fence: step.fence! }], 60_000)).toEqual([false]);
			const [fenced] = await ledger.record([{ ...id('gone', 'crm'), status: 'completed', fence: step.fence }], { ttlMs: DAY, holder: 'running' });
			expect(fenced).toEqual({ kind: 'lost_lease', missing: true });
			// A write made for the unit's claim, after the unit's row vanished.
			await fx.vanish(ns, 'gone', '');
			const [forClaim] = await ledger.record(
				[{ ...id('gone', 'other'), status: 'completed', claim: { step: '', fence: unit.fence! } }],
				{ ttlMs: DAY, holder: 'running' },
			);
			expect(forClaim).toEqual({ kind: 'lost_lease', missing: true });
			expect(await ledger.get(ns, 'gone')).toEqual([]);

			// A takeover: the row is there, under another claim.
			const dead = claimedRecord((await ledger.claim([req('taken')], lease('dead', 300)))[0]);
			await sleep(500);
			const next = claimedRecord((await ledger.claim([req('taken')], lease('next')))[0]);
			const [late] = await ledger.record([{ ...id('taken'), status: 'completed', fence: dead.fence }], { ttlMs: DAY, holder: 'dead' });
			expect(late).toEqual({ kind: 'lost_lease' });
			const [forOld] = await ledger.record([{ ...id('taken', 'crm'), status: 'completed', claim: { step: '', fence: dead.fence! } }], { ttlMs: DAY });
			expect(forOld).toEqual({ kind: 'lost_lease' });
			// Settled already (onlyInProgress): there, so not missing either.
			await ledger.record([{ ...id('taken'), status: 'completed', fence: next.fence }], { ttlMs: DAY, holder: 'next' });
			const [closed] = await ledger.record([{ ...id('taken'), status: 'failed_retryable', fence: next.fence }], { ttlMs: DAY, onlyInProgress: true });
			expect(closed).toEqual({ kind: 'lost_lease' });
		});

		test('a step that may have been sent is never freed silently: the operator says "sent" or "not sent"', async () => {
			const stuck = claimedRecord((await ledger.claim([req('ms'), req('ms', { step: 'email' })], lease('crashed', 300)))[1]);
			expect(await ledger.markPhase([{ ...id('ms', 'email'), fence: stuck.fence! }], 'sending')).toEqual([true]);
			await sleep(500);
			// Without a resolution: the unit row (never sending) is freed, the email step is refused.
			expect(await release('ms', null)).toEqual([
				{ step: '', status: 'in_progress', phase: null, action: 'released' },
				{ step: 'email', status: 'in_progress', phase: 'sending', action: 'refused', reason: 'may_have_sent' },
			]);
			expect((await ledger.get(ns, 'ms')).map((r) => [r.step, r.phase])).toEqual([['email', 'sending']]);
			// "It was sent": recorded as completed, and the crashed run's late write changes nothing.
			expect(await release('ms', 'email', { resolution: 'sent' })).toEqual([
				{ step: 'email', status: 'in_progress', phase: 'sending', action: 'recorded_sent' },
			]);
			const [row] = await ledger.get(ns, 'ms');
			expect(row).toMatchObject({ step: 'email', status: 'completed', phase: null, leaseExpiresAt: null });
			expect(row.result).toMatchObject({ resolution: 'sent', resolvedBy: 'alice' });
			const [late] = await ledger.record([{ ...id('ms', 'email'), status: 'failed_retryable', fence: stuck.fence }], { ttlMs: DAY, holder: 'crashed' });
			expect(late).toEqual({ kind: 'lost_lease' });
			expect((await ledger.claim([req('ms', { step: 'email' })], lease('next')))[0].kind).toBe('duplicate');

			// "It was not sent": freed; the next claim starts a new incarnation (new first-seen time).
			const again = claimedRecord((await ledger.claim([req('ns2', { step: 'email' })], lease('crashed', 300)))[0]);
			await ledger.markPhase([{ ...id('ns2', 'email'), fence: again.fence! }], 'sending');
			await sleep(500);
			expect((await release('ns2', 'email', { resolution: 'not_sent' })).map((s) => s.action)).toEqual(['released']);
			const next = (await ledger.claim([req('ns2', { step: 'email' })], lease('next')))[0];
			expect(next).toMatchObject({ kind: 'claimed', previousStatus: null, previousPhase: null });
			expect(claimedRecord(next).firstSeenAt.getTime()).toBeGreaterThan(again.firstSeenAt.getTime());
		});

		test('a person\'s answer on a Needs Review step: "drop it" settles it for good; an answer about a step that changed since changes nothing', async () => {
			const claimed = claimedRecord((await ledger.claim([req('rv', { step: 'email' })], lease('crashed')))[0]);
			const [held] = await ledger.record([{ ...id('rv', 'email'), status: 'needs_review', fence: claimed.fence }], { ttlMs: DAY, holder: 'crashed' });
			const asked = { status: 'needs_review' as const, fence: (held as { record: LedgerRecord }).record.fence };
			// An answer about another incarnation of the step (an older fence) is refused.
			expect(await release('rv', 'email', { resolution: 'not_sent', onlyIf: { ...asked, fence: (asked.fence ?? 0) - 1 } })).toEqual([
				{ step: 'email', status: 'needs_review', phase: null, action: 'refused', reason: 'changed' },
			]);
			expect(await release('rv', 'email', { resolution: 'dropped', onlyIf: asked })).toEqual([
				{ step: 'email', status: 'needs_review', phase: null, action: 'recorded_dropped' },
			]);
			const [row] = await ledger.get(ns, 'rv');
			expect(row).toMatchObject({ step: 'email', status: 'completed', fence: null, leaseHolder: null });
			expect(row.result).toMatchObject({ resolution: 'dropped', resolvedBy: 'alice' });
			expect((await ledger.claim([req('rv', { step: 'email' })], lease('next')))[0].kind).toBe('duplicate');
			// A second answer to the same question: the step is settled, nothing changes.
			expect(await release('rv', 'email', { resolution: 'not_sent', onlyIf: asked })).toEqual([
				{ step: 'email', status: 'completed', phase: null, action: 'refused', reason: 'changed' },
			]);
			expect((await ledger.get(ns, 'rv'))[0].result).toMatchObject({ resolution: 'dropped' });
			expect((await fx.audit(ns)).filter((a) => a.key === 'rv')).toEqual([
				{ key: 'rv', step: 'email', action: 'resolve_dropped', actor: 'alice', status: 'needs_review', leaseHolder: null, fence: asked.fence },
			]);
		});

		test('purge deletes only expired rows, at most the limit per call', async () => {
			await ledger.claim(Array.from({ length: 5 }, (_, i) => req(`old${i}`)), { ...seen, ttlMs: 200 });
			await ledger.claim([req('fresh')], seen);
			await sleep(400);
			let purged = 0;
			let calls = 0;
			for (;;) {
				const n = await ledger.purgeExpired(2);
				expect(n).toBeLessThanOrEqual(2);
				purged += n;
				calls++;
				if (n === 0) break;
			}
			expect(purged).toBeGreaterThanOrEqual(5);
			expect(calls).toBeGreaterThanOrEqual(4);
			expect(await ledger.get(ns, 'fresh')).toHaveLength(1);
		});

		test('stats count rows by status, blocked duplicates and the oldest in-progress row', async () => {
			await ledger.claim([req('a'), req('b'), req('c')], lease('r', 60_000));
			await ledger.claim([req('a'), req('b')], lease('r2'));
			await ledger.record([{ namespace: ns, key: 'c', step: '', status: 'needs_review' }], { ttlMs: DAY });
			const s = await ledger.stats(ns);
			expect(s.byStatus).toEqual({ in_progress: 2, completed: 0, failed_retryable: 0, needs_review: 1 });
			expect(s.duplicatesBlocked).toBe(2);
			expect(s.oldestInProgressAt).toBeInstanceOf(Date);
			expect(s.stuck).toBe(0);
			const empty = await ledger.stats(`${ns}-empty`);
			expect(empty.duplicatesBlocked).toBe(0);
			expect(empty.oldestInProgressAt).toBeNull();
			// Where a backend reads several namespaces at once, each answer is its stats, in order.
			if (ledger.statsMany) expect(await ledger.statsMany([`${ns}-empty`, ns, ns])).toEqual([empty, s, s]);
		});

		test('listNamespaces pages the namespaces that hold rows in byte order; a namespace purged empty is gone', async () => {
			const names = [`${ns}-b`, `${ns}-\u00e9`, `${ns}-Z`, `${ns}-a`, `${ns}-c`];
			await ledger.claim(Array.from({ length: 300 }, (_, i) => ({ ...req(`k${i}`), namespace: `${ns}-b` })), seen);
			await ledger.claim([{ ...req('one'), namespace: `${ns}-a` }, { ...req('one'), namespace: `${ns}-Z` }], lease('r'));
			await ledger.record([{ namespace: `${ns}-c`, key: 'x', step: 'email', status: 'needs_review' }], { ttlMs: DAY });
			await ledger.record([{ namespace: `${ns}-\u00e9`, key: 'x', step: '', status: 'completed' }], { ttlMs: DAY });
			await ledger.claim([{ ...req('gone'), namespace: `${ns}-d` }], { ...seen, ttlMs: 200 });
			const sorted = [`${ns}-Z`, `${ns}-a`, `${ns}-b`, `${ns}-c`, `${ns}-d`, `${ns}-\u00e9`];
			expect(await ledger.listNamespaces(2, ns)).toEqual(sorted.slice(0, 2));
			expect(await ledger.listNamespaces(3, `${ns}-a`)).toEqual(sorted.slice(2, 5));
			expect((await ledger.listNamespaces(1000, ns)).slice(0, 6)).toEqual(sorted);
			expect(await ledger.listNamespaces(0, ns)).toEqual([]);
			const first = await ledger.listNamespaces(1000);
			expect(first.length).toBeGreaterThanOrEqual(6);
			expect(first).toEqual(expect.arrayContaining(sorted));
			expect([...first].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)))).toEqual(first);
			await sleep(400);
			while ((await ledger.purgeExpired(1000)) > 0);
			expect((await ledger.listNamespaces(1000, ns)).slice(0, 5)).toEqual(sorted.filter((x) => x !== `${ns}-d`));
			expect(names.every((x) => first.includes(x))).toBe(true);
		});

		test('checkpoints move forward, refuse to go back unless forced', async () => {
			expect(await ledger.getCheckpoint(ns, 'invoices')).toBeNull();
			await ledger.setCheckpoint(ns, 'invoices', '100', { force: false, updatedBy: 'sync' });
			await ledger.setCheckpoint(ns, 'invoices', '200', { force: false, updatedBy: 'sync' });
			await expect(ledger.setCheckpoint(ns, 'invoices', '150', { force: false, updatedBy: 'sync' })).rejects.toBeInstanceOf(
				CheckpointRegressionError,
			);
			expect((await ledger.getCheckpoint(ns, 'invoices'))?.value).toBe('200');
			const forced = await ledger.setCheckpoint(ns, 'invoices', '150', { force: true, updatedBy: 'operator' });
			expect(forced).toMatchObject({ value: '150', updatedBy: 'operator' });
			await ledger.setCheckpoint(ns, 'cursor', '2026-01-01T00:00:00Z', { force: false, updatedBy: null });
			await expect(ledger.setCheckpoint(ns, 'cursor', '2025-12-31T00:00:00Z', { force: false, updatedBy: null })).rejects.toThrow(
				/will not move back/,
			);
		});

		const mark = async (rows: Array<{ key: string; step?: string; fence: number | null }>, phase = 'sending') =>
			ledger.markPhase(rows.map((r) => ({ ...id(r.key, r.step), fence: r.fence! })), phase);

		test('markPhase: only the claim that holds the row can mark; the row shows the phase', async () => {
			const [claimed] = await ledger.claim([req('ph')], lease('owner'));
			const record = claimedRecord(claimed);
			expect(record.phase).toBeNull();
			expect(claimed.kind === 'claimed' && claimed.previousPhase).toBeNull();
			expect(await mark([{ key: 'ph', fence: record.fence! - 1 }])).toEqual([false]);
			expect((await ledger.get(ns, 'ph'))[0].phase).toBeNull();
			expect(await mark([{ key: 'ph', fence: record.fence }])).toEqual([true]);
			const [row] = await ledger.get(ns, 'ph');
			expect(row).toMatchObject({ status: 'in_progress', leaseHolder: 'owner', phase: 'sending', fence: record.fence });
		});

		test('markPhase is batched: one answer per row, in request order, in one round trip', async () => {
			const mine = (await ledger.claim([req('b1'), req('b2'), req('b3', { step: 'x' })], lease('me'))).map(claimedRecord);
			const fence = mine[0].fence;
			await ledger.claim([req('other')], lease('someone-else'));
			await ledger.claim([req('done')], seen);
			const before = ledger.roundTrips;
			const out = await mark([{ key: 'b3', step: 'x', fence }, { key: 'other', fence }, { key: 'absent', fence }, { key: 'b1', fence }, { key: 'done', fence }, { key: 'b2', fence }]);
			expect(ledger.roundTrips - before).toBe(1);
			expect(out).toEqual([true, false, false, true, false, true]);
			expect(await ledger.markPhase([], 'sending')).toEqual([]);
		});

		test('markPhase refuses a lapsed lease, even for its own claim', async () => {
			const record = claimedRecord((await ledger.claim([req('lap')], lease('slow', 300)))[0]);
			await sleep(500);
			expect(await mark([{ key: 'lap', fence: record.fence }])).toEqual([false]);
		});

		const renew = async (rows: Array<{ key: string; step?: string; fence: number | null }>, leaseMs: number) =>
			ledger.renewLeases(rows.map((r) => ({ ...id(r.key, r.step), fence: r.fence! })), leaseMs);

		test('renewLeases: the claim that holds a live lease extends it; the row outlives its old lease end, retention included', async () => {
			const held = claimedRecord((await ledger.claim([req('rn')], lease('alive', 800, 300)))[0]);
			await sleep(300);
			expect(await renew([{ key: 'rn', fence: held.fence }], 5_000)).toEqual([true]);
			const [row] = await ledger.get(ns, 'rn');
			expect(row).toMatchObject({ status: 'in_progress', leaseHolder: 'alive', fence: held.fence, attempts: 1, phase: null });
			expect(row.leaseRemainingMs).toBeGreaterThan(4_000);
			expect(row.leaseRemainingMs).toBeLessThanOrEqual(5_000);
			expect(row.leaseExpiresAt!.getTime()).toBeGreaterThan(held.leaseExpiresAt!.getTime());
			expect(row.expiresAt.getTime()).toBeGreaterThanOrEqual(row.leaseExpiresAt!.getTime());
			// updatedAt still says when the key was let through.
			expect(row.updatedAt).toEqual(held.updatedAt);
			// Past the old lease end and the retention: still held, still there.
			await sleep(900);
			expect((await ledger.claim([req('rn')], lease('next')))[0].kind).toBe('in_progress');
			// The holder can still settle it with its fence.
			const [done] = await ledger.record([{ ...id('rn'), status: 'completed', fence: held.fence }], { ttlMs: DAY });
			expect(writtenRecord(done)).toMatchObject({ status: 'completed', leaseExpiresAt: null });
		});

		test('renewLeases refuses a stale fence, a settled row, a lapsed lease, a released row and an absent one; nothing changes', async () => {
			const [taken, settled, lapsed, released, mine] = (
				await ledger.claim([req('r-taken'), req('r-settled'), req('r-lapsed'), req('r-released'), req('r-mine')], lease('old', 300))
			).map(claimedRecord);
			const fence = taken.fence;
			expect([settled, lapsed, released, mine].every((r) => r.fence === fence)).toBe(true);
			expect(await renew([{ key: 'r-mine', fence }], 60_000)).toEqual([true]);
			await ledger.record([{ ...id('r-settled'), status: 'completed', externalId: 'x-1', fence }], { ttlMs: DAY });
			await release('r-released', null, { evenIfHeld: true });
			await sleep(500);
			const next = claimedRecord((await ledger.claim([req('r-taken')], lease('new-holder', 60_000)))[0]);
			const before = ledger.roundTrips;
			const out = await renew(
				[
					{ key: 'r-taken', fence },
					{ key: 'r-settled', fence },
					{ key: 'r-lapsed', fence },
					{ key: 'r-released', fence },
					{ key: 'r-absent', fence },
					{ key: 'r-mine', fence: fence! - 1 },
					{ key: 'r-mine', fence },
				],
				60_000,
			);
			expect(ledger.roundTrips - before).toBe(1);
			expect(out).toEqual([false, false, false, false, false, false, true]);
			// Taken over: the new holder's lease and fence are as it claimed them.
			const [row] = await ledger.get(ns, 'r-taken');
			expect(row).toMatchObject({ leaseHolder: 'new-holder', fence: next.fence });
			expect(row.leaseExpiresAt).toEqual(next.leaseExpiresAt);
			expect((await ledger.get(ns, 'r-settled'))[0]).toMatchObject({ status: 'completed', externalId: 'x-1', leaseExpiresAt: null });
			// A lapsed lease is not revived: another run may take the key.
			expect((await ledger.get(ns, 'r-lapsed'))[0].leaseRemainingMs).toBe(0);
			expect((await ledger.claim([req('r-lapsed')], lease('other')))[0].kind).toBe('claimed');
			expect(await ledger.get(ns, 'r-released')).toEqual([]);
			expect(await ledger.get(ns, 'r-absent')).toEqual([]);
			expect(await ledger.renewLeases([], 60_000)).toEqual([]);
		});

		test('renewLeases keeps a row in phase "sending" until it is resolved', async () => {
			const held = claimedRecord((await ledger.claim([req('r-send', { step: 'mail' })], lease('alive', 5_000)))[0]);
			expect(await mark([{ key: 'r-send', step: 'mail', fence: held.fence }])).toEqual([true]);
			expect(await renew([{ key: 'r-send', step: 'mail', fence: held.fence }], 10_000)).toEqual([true]);
			expect((await ledger.get(ns, 'r-send'))[0]).toMatchObject({ phase: 'sending', expiresAt: new Date('9999-12-31T00:00:00Z') });
		});

		test('reclaimOwnLease: the same holder takes over its own live lease and learns the phase; nobody else does', async () => {
			const [own] = (await ledger.claim([req('own-sent'), req('own-early')], lease('exec-1'))).map(claimedRecord);
			expect(await mark([{ key: 'own-sent', fence: own.fence }])).toEqual([true]);
			// Without the option the holder's own live lease blocks it, like anyone else's.
			expect((await ledger.claim([req('own-sent')], lease('exec-1')))[0].kind).toBe('in_progress');
			// Another holder may not use the option to take it.
			expect((await ledger.claim([req('own-sent')], { ...lease('exec-2'), reclaimOwnLease: true }))[0].kind).toBe('in_progress');
			const [sent, early] = await ledger.claim([req('own-sent'), req('own-early')], { ...lease('exec-1'), reclaimOwnLease: true });
			expect(sent).toMatchObject({ kind: 'claimed', previousStatus: 'in_progress', previousPhase: 'sending' });
			expect(early).toMatchObject({ kind: 'claimed', previousStatus: 'in_progress', previousPhase: null });
			expect(sent.kind === 'claimed' && sent.record.attempts).toBe(2);
			expect(claimedRecord(sent).fence).toBeGreaterThan(own.fence!);
			// Settled rows stay settled: the option only concerns live leases.
			await ledger.record([{ namespace: ns, key: 'own-sent', step: '', status: 'completed', fence: claimedRecord(sent).fence }], { holder: 'exec-1', ttlMs: DAY });
			expect((await ledger.claim([req('own-sent')], { ...lease('exec-1'), reclaimOwnLease: true }))[0].kind).toBe('duplicate');
		});

		test('a reclaim reports the phase the lapsed claim reached; "sending" stays on the row until it is settled', async () => {
			const [dead] = (await ledger.claim([req('crash-sent'), req('crash-early')], lease('dead', 300))).map(claimedRecord);
			expect(await mark([{ key: 'crash-sent', fence: dead.fence }])).toEqual([true]);
			await sleep(500);
			const [sent, early] = await ledger.claim([req('crash-sent'), req('crash-early')], lease('next', 300, 300));
			expect(sent).toMatchObject({ kind: 'claimed', previousStatus: 'in_progress', previousPhase: 'sending' });
			expect(early).toMatchObject({ kind: 'claimed', previousStatus: 'in_progress', previousPhase: null, record: { phase: null } });
			expect(claimedRecord(sent)).toMatchObject({ phase: 'sending', expiresAt: new Date('9999-12-31T00:00:00Z') });
			expect((await ledger.get(ns, 'crash-sent'))[0]).toMatchObject({ leaseHolder: 'next', phase: 'sending' });
			// The run that took it over dies too, before recording anything, and its retention passes:
			// the third claim still learns that the message may have gone out.
			await sleep(700);
			const [third] = await ledger.claim([req('crash-sent')], lease('third'));
			expect(third).toMatchObject({ kind: 'claimed', previousStatus: 'in_progress', previousPhase: 'sending' });
			// The step that never reached sending, claimed with the same retention, did expire.
			expect(await ledger.get(ns, 'crash-early')).toEqual([]);
		});

		test('record clears the phase; a failed_retryable row is reclaimed with no previous phase', async () => {
			const first = claimedRecord((await ledger.claim([req('fr')], lease('run-1')))[0]);
			await mark([{ key: 'fr', fence: first.fence }]);
			const [written] = await ledger.record([{ namespace: ns, key: 'fr', step: '', status: 'failed_retryable', fence: first.fence }], { ttlMs: DAY, holder: 'run-1' });
			expect(writtenRecord(written)).toMatchObject({ status: 'failed_retryable', phase: null });
			const [again] = await ledger.claim([req('fr')], lease('run-2'));
			expect(again).toMatchObject({ kind: 'claimed', previousStatus: 'failed_retryable', previousPhase: null });
			expect(await mark([{ key: 'fr', fence: first.fence }])).toEqual([false]);
		});

		test('an expired row that never reached sending is reclaimed with no previous phase', async () => {
			await ledger.claim([req('ex')], { ...seen, ttlMs: 300 });
			await sleep(500);
			const [again] = await ledger.claim([req('ex')], lease('new'));
			expect(again).toMatchObject({ kind: 'claimed', previousStatus: null, previousPhase: null });
		});

		// The n8n host's clock is not the ledger's. Every verdict must come from the server.
		describe.each([30_000, -30_000])('with the n8n host clock %i ms off', (skewMs) => {
			test('a live lease is in progress, a lapsed one is taken over, and the answer says how long the lease has left', async () => {
				await withHostClockSkew(skewMs, async () => {
					await ledger.claim([req('sk-live'), req('sk-lapsed')], lease('a', 10_000));
					await ledger.claim([req('sk-short', { fingerprint: 'one' })], lease('a', 300));
					await sleep(500);
					const [live, short, mismatch] = await ledger.claim(
						[req('sk-live'), req('sk-short', { fingerprint: 'one' }), req('sk-mm', { fingerprint: 'x' })],
						lease('b', 10_000),
					);
					expect(live.kind).toBe('in_progress');
					const remaining = live.kind === 'in_progress' ? live.record.leaseRemainingMs! : -1;
					expect(remaining).toBeGreaterThan(8_000);
					expect(remaining).toBeLessThanOrEqual(10_000);
					expect(short).toMatchObject({ kind: 'claimed', previousStatus: 'in_progress' });
					expect(claimedRecord(short).leaseRemainingMs).toBe(10_000);
					expect(mismatch.kind).toBe('claimed');
				});
			});

			test('a lapsed lease whose payload differs is a mismatch, not "in progress"', async () => {
				await withHostClockSkew(skewMs, async () => {
					await ledger.claim([req('sk-fp', { fingerprint: 'one' })], lease('a', 300));
					await sleep(500);
					const [out] = await ledger.claim([req('sk-fp', { fingerprint: 'two' })], lease('b'));
					expect(out.kind).toBe('mismatch');
					if (out.kind === 'mismatch') expect(out.record.leaseRemainingMs).toBe(0);
				});
			});

			test('renewLeases: a live lease is renewed and a lapsed one is not, by the ledger clock', async () => {
				await withHostClockSkew(skewMs, async () => {
					const live = claimedRecord((await ledger.claim([req('sk-renew')], lease('a', 2_000)))[0]);
					const lapsed = claimedRecord((await ledger.claim([req('sk-lapse')], lease('a', 300)))[0]);
					await sleep(500);
					expect(await renew([{ key: 'sk-renew', fence: live.fence }, { key: 'sk-lapse', fence: lapsed.fence }], 10_000)).toEqual([true, false]);
					const [row] = await ledger.get(ns, 'sk-renew');
					expect(row.leaseRemainingMs).toBeGreaterThan(8_000);
					expect(row.leaseRemainingMs).toBeLessThanOrEqual(10_000);
					expect((await ledger.claim([req('sk-renew'), req('sk-lapse')], lease('b'))).map((o) => o.kind)).toEqual(['in_progress', 'claimed']);
				});
			});

			test('stuck rows and "not updated for" are judged by the ledger clock', async () => {
				await withHostClockSkew(skewMs, async () => {
					await ledger.claim([req('st-old')], lease('a', 300));
					await ledger.claim([req('st-live')], lease('a', 60_000));
					await sleep(600);
					const stuck = await ledger.list({ namespace: ns, status: 'in_progress', stuckOnly: true, limit: 10 });
					expect(stuck.records.map((r) => r.key)).toEqual(['st-old']);
					const quiet = await ledger.list({ namespace: ns, notUpdatedForMs: 400, limit: 10 });
					expect(quiet.records.map((r) => r.key).sort()).toEqual(['st-live', 'st-old']);
					expect((await ledger.list({ namespace: ns, notUpdatedForMs: 20_000, limit: 10 })).records).toEqual([]);
				});
			});
		});

		test('a late write from a run that lost its lease changes nothing', async () => {
			const a = claimedRecord((await ledger.claim([req('lw')], lease('run-a', 300)))[0]);
			await sleep(500);
			const b = claimedRecord((await ledger.claim([req('lw')], lease('run-b')))[0]);
			expect(b.fence).toBeGreaterThan(a.fence!);
			const [done] = await ledger.record([{ ...id('lw'), status: 'completed', externalId: 'crm-42', fence: b.fence }], { ttlMs: DAY, holder: 'run-b' });
			expect(writtenRecord(done)).toMatchObject({ status: 'completed', externalId: 'crm-42', fence: b.fence });
			// Run A wakes up: with its fence, and without one (by holder), it is refused.
			const late = await ledger.record(
				[
					{ ...id('lw'), status: 'failed_retryable', fence: a.fence },
					{ ...id('lw-other'), status: 'completed' },
				],
				{ ttlMs: DAY, holder: 'run-a' },
			);
			expect(late[0]).toEqual({ kind: 'lost_lease' });
			expect(late[1].kind).toBe('written');
			expect(await mark([{ key: 'lw', fence: a.fence }])).toEqual([false]);
			const [row] = await ledger.get(ns, 'lw');
			expect(row).toMatchObject({ status: 'completed', externalId: 'crm-42' });
			// Nobody can claim it again and send a second time.
			expect((await ledger.claim([req('lw')], lease('run-c')))[0].kind).toBe('duplicate');
		});

		test('issue 32: a late step write for a unit claim another run took over changes nothing; other rows of the batch are written', async () => {
			// Run A's gate claims the unit under a short lease, and the lease lapses.
			const a = claimedRecord((await ledger.claim([req('ul')], lease('run-a', 300)))[0]);
			await sleep(500);
			// Run B takes the unit over and records the CRM step for its claim.
			const b = claimedRecord((await ledger.claim([req('ul')], lease('run-b')))[0]);
			const [done] = await ledger.record(
				[{ ...id('ul', 'crm'), status: 'completed', externalId: 'crm-42', claim: { step: '', fence: b.fence! } }],
				{ ttlMs: DAY, holder: 'run-b' },
			);
			expect(writtenRecord(done)).toMatchObject({ status: 'completed', externalId: 'crm-42' });
			// Run A wakes up and records that step (and one nobody wrote yet) for its own unit claim:
			// with its holder, without a fence of the step row.
			const late = await ledger.record(
				[
					{ ...id('ul', 'crm'), status: 'failed_retryable', result: { error: 'timeout' }, claim: { step: '', fence: a.fence! } },
					{ ...id('ul', 'email'), status: 'completed', claim: { step: '', fence: a.fence! } },
					{ ...id('ul-other'), status: 'completed' },
				],
				{ ttlMs: DAY, holder: 'run-a' },
			);
			expect(late.map((o) => o.kind)).toEqual(['lost_lease', 'lost_lease', 'written']);
			expect((await ledger.get(ns, 'ul')).map((r) => [r.step, r.status, r.externalId])).toEqual([
				['', 'in_progress', null],
				['crm', 'completed', 'crm-42'],
			]);
			// The next delivery finds the step done: nothing is sent again.
			expect((await ledger.claim([req('ul', { step: 'crm' })], lease('run-c')))[0].kind).toBe('duplicate');
		});

		test('a write made for a claim lands while the claimed row carries its fence, settled or not; never once another claim, a release or the expiry ended it', async () => {
			// A gate that claims a named step ('order'), not the unit: writes to other steps name that step.
			const a = claimedRecord((await ledger.claim([req('cl', { step: 'order' })], lease('run-a', 300)))[0]);
			const asA = { step: 'order', fence: a.fence! };
			const [early] = await ledger.record([{ ...id('cl', 'crm'), status: 'completed', externalId: 'crm-1', claim: asA }], { ttlMs: DAY, holder: 'run-a' });
			expect(writtenRecord(early)).toMatchObject({ status: 'completed', externalId: 'crm-1' });
			await sleep(500);
			const b = claimedRecord((await ledger.claim([req('cl', { step: 'order' })], lease('run-b')))[0]);
			const asB = { step: 'order', fence: b.fence! };
			// B settles the row it claimed, then records a step: its claim still holds (the row keeps its fence).
			await ledger.record([{ ...id('cl', 'order'), status: 'completed', fence: b.fence }], { ttlMs: DAY, holder: 'run-b' });
			const [later] = await ledger.record([{ ...id('cl', 'crm'), status: 'completed', externalId: 'crm-2', claim: asB }], { ttlMs: DAY, holder: 'run-b' });
			expect(writtenRecord(later)).toMatchObject({ status: 'completed', externalId: 'crm-2' });
			// A's claim is over, whether B's row is held or settled: nothing written for it lands, with a holder or without.
			for (const holder of ['run-a', undefined]) {
				expect(await ledger.record([{ ...id('cl', 'crm'), status: 'failed_retryable', claim: asA }], { ttlMs: DAY, holder })).toEqual([{ kind: 'lost_lease' }]);
			}
			// A claim whose fence is not a number holds nothing; the batch is still answered row by row.
			const odd = await ledger.record(
				[
					{ ...id('cl', 'crm'), status: 'failed_retryable', claim: { step: 'order', fence: Number.NaN } },
					{ ...id('cl', 'note'), status: 'completed', claim: asB },
				],
				{ ttlMs: DAY },
			);
			expect(odd.map((o) => o.kind)).toEqual(['lost_lease', 'written']);
			expect((await ledger.get(ns, 'cl')).find((r) => r.step === 'crm')).toMatchObject({ status: 'completed', externalId: 'crm-2' });

			// Released by an operator: the claim is gone, and what is written for it creates nothing.
			const c = claimedRecord((await ledger.claim([req('cr')], lease('run-c')))[0]);
			await release('cr', null, { evenIfHeld: true });
			expect(await ledger.record([{ ...id('cr', 'crm'), status: 'completed', claim: { step: '', fence: c.fence! } }], { ttlMs: DAY, holder: 'run-c' })).toEqual([
				{ kind: 'lost_lease', missing: true },
			]);
			expect(await ledger.get(ns, 'cr')).toEqual([]);
			// Expired: the same.
			const d = claimedRecord((await ledger.claim([req('ce')], { ...seen, ttlMs: 300 }))[0]);
			await sleep(500);
			expect(await ledger.record([{ ...id('ce', 'crm'), status: 'completed', claim: { step: '', fence: d.fence! } }], { ttlMs: DAY })).toEqual([{ kind: 'lost_lease', missing: true }]);
			expect(await ledger.get(ns, 'ce')).toEqual([]);
		});

		test('a write with a fence of its own and a claim needs both to hold', async () => {
			const [unit, mail] = (await ledger.claim([req('fc'), req('fc', { step: 'mail' })], lease('run'))).map(claimedRecord);
			const [stale] = await ledger.record([{ ...id('fc', 'mail'), status: 'completed', fence: mail.fence, claim: { step: '', fence: unit.fence! - 1 } }], { ttlMs: DAY, holder: 'run' });
			expect(stale).toEqual({ kind: 'lost_lease' });
			expect((await ledger.get(ns, 'fc')).map((r) => [r.step, r.status])).toEqual([['', 'in_progress'], ['mail', 'in_progress']]);
			const [ok] = await ledger.record([{ ...id('fc', 'mail'), status: 'completed', fence: mail.fence, claim: { step: '', fence: unit.fence! } }], { ttlMs: DAY, holder: 'run' });
			expect(writtenRecord(ok)).toMatchObject({ step: 'mail', status: 'completed', fence: mail.fence });
		});

		test('only the operator overwrites what claims wrote: release and "it was sent" act whichever claim holds the key, and each leaves an audit row', async () => {
			const a = claimedRecord((await ledger.claim([req('op')], lease('run-a', 300)))[0]);
			await sleep(500);
			const b = claimedRecord((await ledger.claim([req('op')], lease('run-b')))[0]);
			await ledger.record([{ ...id('op', 'crm'), status: 'completed', externalId: 'crm-42', claim: { step: '', fence: b.fence! } }], { ttlMs: DAY, holder: 'run-b' });
			expect(await ledger.record([{ ...id('op', 'crm'), status: 'failed_retryable', claim: { step: '', fence: a.fence! } }], { ttlMs: DAY, holder: 'run-a' })).toEqual([
				{ kind: 'lost_lease' },
			]);
			// The operator's word on the step B settled, then the release of the unit B still holds.
			expect(await release('op', 'crm', { resolution: 'sent' })).toEqual([{ step: 'crm', status: 'completed', phase: null, action: 'recorded_sent' }]);
			expect(await release('op', '', { evenIfHeld: true })).toEqual([{ step: '', status: 'in_progress', phase: null, action: 'released' }]);
			const rows = await ledger.get(ns, 'op');
			expect(rows.map((r) => [r.step, r.status, r.externalId])).toEqual([['crm', 'completed', 'crm-42']]);
			expect(rows[0].result).toMatchObject({ resolution: 'sent', resolvedBy: 'alice' });
			expect(await fx.audit(ns)).toEqual([
				{ key: 'op', step: 'crm', action: 'resolve_sent', actor: 'alice', status: 'completed', leaseHolder: null, fence: null },
				{ key: 'op', step: '', action: 'release', actor: 'alice', status: 'in_progress', leaseHolder: 'run-b', fence: b.fence },
			]);
			// B's claim ended with the release: what it writes for it changes nothing now.
			expect(await ledger.record([{ ...id('op', 'crm'), status: 'failed_retryable', claim: { step: '', fence: b.fence! } }], { ttlMs: DAY, holder: 'run-b' })).toEqual([
				{ kind: 'lost_lease', missing: true },
			]);
		});

		test('a write for a claim whose row was released or expired never recreates it', async () => {
			const a = claimedRecord((await ledger.claim([req('gone')], lease('run-a', 60_000)))[0]);
			await release('gone', null, { evenIfHeld: true });
			const [late] = await ledger.record([{ ...id('gone'), status: 'completed', fence: a.fence }], { ttlMs: DAY });
			expect(late).toEqual({ kind: 'lost_lease', missing: true });
			expect(await ledger.get(ns, 'gone')).toEqual([]);
		});

		test('onlyInProgress closes open claims and leaves a claim that a later node settled as it was', async () => {
			const [settled, open, failing] = (await ledger.claim([req('oip-settled'), req('oip-open'), req('oip-failing')], lease('run'))).map(claimedRecord);
			await ledger.record([{ ...id('oip-settled'), status: 'completed', externalId: 'msg-7', result: { ok: 1 }, fence: settled.fence }], { ttlMs: DAY });
			const closed = await ledger.record(
				[
					{ ...id('oip-settled'), status: 'completed', fence: settled.fence },
					{ ...id('oip-open'), status: 'completed', fence: open.fence },
				],
				{ ttlMs: DAY, onlyInProgress: true },
			);
			expect(closed[0]).toEqual({ kind: 'lost_lease' });
			expect(writtenRecord(closed[1])).toMatchObject({ status: 'completed', leaseHolder: null, fence: open.fence });
			expect((await ledger.get(ns, 'oip-settled'))[0]).toMatchObject({ status: 'completed', externalId: 'msg-7', result: { ok: 1 } });
			expect((await ledger.claim([req('oip-open')], lease('next')))[0].kind).toBe('duplicate');
			// A run that failed frees its claim at once; the next run takes the key.
			const [freed] = await ledger.record([{ ...id('oip-failing'), status: 'failed_retryable', fence: failing.fence }], { ttlMs: DAY, onlyInProgress: true });
			expect(freed.kind).toBe('written');
			expect((await ledger.claim([req('oip-failing')], lease('next')))[0].kind).toBe('claimed');
			// A stale fence is refused as before.
			const [stale] = await ledger.record([{ ...id('oip-failing'), status: 'completed', fence: failing.fence }], { ttlMs: DAY, onlyInProgress: true });
			expect(stale).toEqual({ kind: 'lost_lease' });
		});

		test('fencing tokens only grow, across release and re-claim', async () => {
			const fences: number[] = [];
			for (let round = 0; round < 3; round++) {
				const r = claimedRecord((await ledger.claim([req('fg')], lease('r', 60_000)))[0]);
				fences.push(r.fence!);
				await release('fg', null, { evenIfHeld: true });
			}
			const other = claimedRecord((await ledger.claim([req('fg2')], seen))[0]);
			fences.push(other.fence!);
			expect(fences.every((f, i) => i === 0 || f > fences[i - 1])).toBe(true);
		});

		test('a row never expires while its lease is live, whatever the retention', async () => {
			const held = claimedRecord((await ledger.claim([req('rt')], lease('slow', 5_000, 300)))[0]);
			expect(held.expiresAt.getTime()).toBeGreaterThanOrEqual(held.leaseExpiresAt!.getTime());
			await sleep(700);
			expect(await ledger.get(ns, 'rt')).toHaveLength(1);
			expect((await ledger.claim([req('rt')], lease('other')))[0].kind).toBe('in_progress');
		});

		test('a step that may have been sent outlives its retention; the next claim learns it reached sending', async () => {
			const dead = claimedRecord((await ledger.claim([req('keep', { step: 'slack' })], lease('dead', 300, 300)))[0]);
			expect(await mark([{ key: 'keep', step: 'slack', fence: dead.fence }])).toEqual([true]);
			await sleep(800);
			const stuck = await ledger.list({ namespace: ns, stuckOnly: true, sending: true, limit: 10 });
			expect(stuck.records.map((r) => [r.key, r.phase])).toEqual([['keep', 'sending']]);
			expect((await ledger.list({ namespace: ns, stuckOnly: true, sending: false, limit: 10 })).records).toEqual([]);
			const [next] = await ledger.claim([req('keep', { step: 'slack' })], lease('next'));
			expect(next).toMatchObject({ kind: 'claimed', previousStatus: 'in_progress', previousPhase: 'sending' });
		});

		test('needs_review keeps the sending phase and stays until a person resolves it', async () => {
			const dead = claimedRecord((await ledger.claim([req('nr', { step: 'mail' })], lease('dead', 300)))[0]);
			await mark([{ key: 'nr', step: 'mail', fence: dead.fence }]);
			await sleep(500);
			const next = claimedRecord((await ledger.claim([req('nr', { step: 'mail' })], lease('next')))[0]);
			const [review] = await ledger.record([{ ...id('nr', 'mail'), status: 'needs_review', fence: next.fence, result: { reason: 'ambiguous' } }], { ttlMs: 300 });
			expect(writtenRecord(review)).toMatchObject({ status: 'needs_review', phase: 'sending' });
			await sleep(500);
			expect((await ledger.get(ns, 'nr')).map((r) => [r.status, r.phase])).toEqual([['needs_review', 'sending']]);
			expect((await release('nr', null)).map((s) => s.reason)).toEqual(['may_have_sent']);
			// A needs_review row that never reached sending keeps the usual retention.
			await ledger.record([{ ...id('nr2'), status: 'needs_review' }], { ttlMs: 300 });
			await sleep(500);
			expect(await ledger.get(ns, 'nr2')).toEqual([]);
		});

		test('failed_retryable with keepSending keeps the sending phase: the next claim takes it at once and learns it may have gone out', async () => {
			const dead = claimedRecord((await ledger.claim([req('ks', { step: 'slack' })], lease('dead', 300)))[0]);
			await mark([{ key: 'ks', step: 'slack', fence: dead.fence }]);
			await sleep(500);
			const checker = claimedRecord((await ledger.claim([req('ks', { step: 'slack' })], lease('checker')))[0]);
			const [later] = await ledger.record(
				[{ ...id('ks', 'slack'), status: 'failed_retryable', fence: checker.fence, keepSending: true, result: { reason: 'check_later', checks: 1 } }],
				{ ttlMs: 300 },
			);
			expect(writtenRecord(later)).toMatchObject({ status: 'failed_retryable', phase: 'sending', leaseHolder: null });
			// Kept past its retention, and not freed without a resolution.
			await sleep(500);
			expect((await ledger.get(ns, 'ks')).map((r) => [r.status, r.phase])).toEqual([['failed_retryable', 'sending']]);
			expect((await ledger.list({ namespace: ns, sending: true, limit: 10 })).records.map((r) => r.key)).toEqual(['ks']);
			const [next] = await ledger.claim([req('ks', { step: 'slack' })], lease('next'));
			expect(next).toMatchObject({
				kind: 'claimed',
				previousStatus: 'failed_retryable',
				previousPhase: 'sending',
				record: { phase: 'sending', result: { reason: 'check_later', checks: 1 } },
			});
			// Without keepSending (or on another status) the phase is cleared as before.
			const plain = claimedRecord((await ledger.claim([req('ks2', { step: 'slack' })], lease('a')))[0]);
			await mark([{ key: 'ks2', step: 'slack', fence: plain.fence }]);
			const [cleared] = await ledger.record([{ ...id('ks2', 'slack'), status: 'failed_retryable', fence: plain.fence }], { ttlMs: DAY });
			expect(writtenRecord(cleared)).toMatchObject({ status: 'failed_retryable', phase: null });
			const done = claimedRecord((await ledger.claim([req('ks3', { step: 'slack' })], lease('a')))[0]);
			await mark([{ key: 'ks3', step: 'slack', fence: done.fence }]);
			const [completed] = await ledger.record([{ ...id('ks3', 'slack'), status: 'completed', fence: done.fence, keepSending: true }], { ttlMs: DAY });
			expect(writtenRecord(completed)).toMatchObject({ status: 'completed', phase: null });
		});

		describe('daily counters', () => {
			const today = async (namespace = ns) => {
				const days = await ledger.readCounts(namespace, 1);
				expect(days).toHaveLength(1);
				return days[0];
			};
			/** Round trips of one call. */
			const trips = async (call: () => Promise<unknown>) => {
				const before = ledger.roundTrips;
				await call();
				return ledger.roundTrips - before;
			};

			test('adds accumulate on today: integers, fractions (0.1 + 0.2 is 0.3), negatives and 0', async () => {
				await ledger.addCounts([{ namespace: ns, counts: { hits: 1, costUsd: 0.1, tokens: 1200 } }]);
				await ledger.addCounts([{ namespace: ns, counts: { hits: 2, costUsd: 0.2, misses: 0, refunds: -2.5 } }]);
				for (let i = 0; i < 10; i++) await ledger.addCounts([{ namespace: ns, counts: { cents: 0.01 } }]);
				const day = await today();
				expect(day.day).toMatch(/^\d{4}-\d{2}-\d{2}$/);
				expect(Object.keys(day.counts).sort()).toEqual(['cents', 'costUsd', 'hits', 'misses', 'refunds', 'tokens']);
				expect(day.counts).toMatchObject({ hits: 3, tokens: 1200, misses: 0, refunds: -2.5 });
				expectAbout(day.counts.costUsd, 0.3);
				expectAbout(day.counts.cents, 0.1);
			});

			test('several namespaces in one call: one round trip; nothing to add costs none', async () => {
				const [a, b, c] = [`${ns}-a`, `${ns}-b`, `${ns}-c`];
				expect(await trips(() => ledger.addCounts([
					{ namespace: b, counts: { hits: 5, tokens: 1200 } },
					{ namespace: a, counts: { hits: 1 } },
					{ namespace: c, counts: {} },
				]))).toBe(fx.addCountsTrips?.(2) ?? 1);
				expect((await today(a)).counts).toEqual({ hits: 1 });
				expect((await today(b)).counts).toEqual({ hits: 5, tokens: 1200 });
				expect(await ledger.readCounts(c, 7)).toEqual([]);
				expect(await trips(() => ledger.addCounts([]))).toBe(0);
				expect(await trips(() => ledger.addCounts([{ namespace: c, counts: {} }]))).toBe(0);
				expect(await ledger.readCounts(c, 7)).toEqual([]);
			});

			test('increments of one namespace in one call are merged', async () => {
				const other = `${ns}-other`;
				expect(await trips(() => ledger.addCounts([
					{ namespace: ns, counts: { hits: 1, costUsd: 0.1 } },
					{ namespace: other, counts: { hits: 7 } },
					{ namespace: ns, counts: { hits: 1, costUsd: 0.2, misses: 1 } },
					// Names that are also members of every JavaScript object are counters like any other.
					{ namespace: ns, counts: { hits: 3, constructor: 2, toString: 1 } },
				]))).toBe(fx.addCountsTrips?.(2) ?? 1);
				const { counts } = await today();
				expect(counts).toMatchObject({ hits: 5, misses: 1, constructor: 2, toString: 1 });
				expectAbout(counts.costUsd, 0.3);
				expect((await today(other)).counts).toEqual({ hits: 7 });
			});

			test('concurrent adds from 20 ledgers (separate connections) lose nothing', async () => {
				const [a, b] = [`${ns}-a`, `${ns}-b`];
				const others = await Promise.all(Array.from({ length: 20 }, () => fx.another()));
				try {
					await Promise.all(
						others.map(async (other, i) => {
							for (let round = 0; round < 3; round++) {
								const batch: CountIncrement[] = [
									{ namespace: a, counts: { hits: 1, costUsd: 0.1 } },
									{ namespace: b, counts: { hits: 2, [`only${i % 4}`]: 1 } },
								];
								// Half the writers name the namespaces in the other order: the ledger, not the caller, orders the writes.
								await other.addCounts(i % 2 === 0 ? batch : batch.reverse());
							}
						}),
					);
				} finally {
					await Promise.all(others.map((other) => other.close()));
				}
				const countsA = (await today(a)).counts;
				expect(countsA.hits).toBe(60);
				expectAbout(countsA.costUsd, 6);
				expect((await today(b)).counts).toEqual({ hits: 120, only0: 15, only1: 15, only2: 15, only3: 15 });
			});

			test('readCounts answers the last `days` days up to today, oldest first, leaving out days without counts', async () => {
				await fx.putPastCounts(ns, COUNTS_KEPT_DAYS - 1, { hits: 399 });
				await fx.putPastCounts(ns, 6, { hits: 6 });
				await fx.putPastCounts(ns, 3, { hits: 3, costUsd: 0.5 });
				await fx.putPastCounts(ns, 1, { hits: 1 });
				await fx.putPastCounts(`${ns}-other`, 2, { hits: 2 });
				await ledger.addCounts([{ namespace: ns, counts: { hits: 10 } }]);
				const day0 = (await today()).day;
				const days = async (n: number) => (await ledger.readCounts(ns, n)).map((d) => d.day);
				expect(await days(2)).toEqual([shiftDay(day0, -1), day0]);
				expect(await days(3)).toEqual([shiftDay(day0, -1), day0]);
				expect(await days(4)).toEqual([shiftDay(day0, -3), shiftDay(day0, -1), day0]);
				expect(await ledger.readCounts(ns, 7)).toEqual<DailyCounts[]>([
					{ day: shiftDay(day0, -6), counts: { hits: 6 } },
					{ day: shiftDay(day0, -3), counts: { hits: 3, costUsd: 0.5 } },
					{ day: shiftDay(day0, -1), counts: { hits: 1 } },
					{ day: day0, counts: { hits: 10 } },
				]);
				expect(await days(COUNTS_KEPT_DAYS - 1)).toHaveLength(4);
				expect(await days(COUNTS_KEPT_DAYS)).toEqual([shiftDay(day0, -(COUNTS_KEPT_DAYS - 1)), ...(await days(7))]);
				expect(await ledger.readCounts(`${ns}-nobody`, COUNTS_KEPT_DAYS)).toEqual([]);
				for (const bad of [0, -1, 1.5, COUNTS_KEPT_DAYS + 1, Number.NaN, '7' as unknown as number]) {
					await expect(ledger.readCounts(ns, bad)).rejects.toBeInstanceOf(LedgerInputError);
				}
			});

			test('a bad counter name, amount or namespace is refused in words, and nothing of the call is written', async () => {
				const bad: unknown[] = [
					{ namespace: ns, counts: { 'cache-hits': 1 } },
					{ namespace: ns, counts: { '': 1 } },
					{ namespace: ns, counts: { '1st': 1 } },
					{ namespace: ns, counts: { _hidden: 1 } },
					{ namespace: ns, counts: { 'with space': 1 } },
					{ namespace: ns, counts: { naïve: 1 } },
					{ namespace: ns, counts: { ['a'.repeat(65)]: 1 } },
					{ namespace: ns, counts: JSON.parse('{"__proto__": 1}') },
					{ namespace: ns, counts: { hits: Number.NaN } },
					{ namespace: ns, counts: { hits: Number.POSITIVE_INFINITY } },
					{ namespace: ns, counts: { hits: Number.NEGATIVE_INFINITY } },
					{ namespace: ns, counts: { hits: '1' } },
					{ namespace: ns, counts: { hits: null } },
					{ namespace: ns, counts: { hits: 1n } },
					{ namespace: ns, counts: null },
					{ namespace: ns, counts: [1] },
					{ namespace: '', counts: { hits: 1 } },
					{ namespace: 7, counts: { hits: 1 } },
					null,
				];
				for (const increment of bad) {
					const before = ledger.roundTrips;
					// A good increment first: the bad one refuses the whole call.
					const error = await ledger
						.addCounts([{ namespace: ns, counts: { hits: 1 } }, increment as CountIncrement])
						.catch((e: unknown) => e);
					expect(error).toBeInstanceOf(LedgerInputError);
					expect((error as LedgerInputError).hint).toEqual(expect.any(String));
					expect(ledger.roundTrips).toBe(before);
				}
				await expect(ledger.addCounts('hits' as never)).rejects.toBeInstanceOf(LedgerInputError);
				const refusal = (increments: CountIncrement[]) => ledger.addCounts(increments).then(() => new LedgerInputError('accepted'), (e: LedgerInputError) => e);
				const nameError = await refusal([{ namespace: ns, counts: { 'cache-hits': 1 } }]);
				const amountError = await refusal([{ namespace: ns, counts: { hits: Number.NaN } }]);
				expect(nameError.message).toBe('The counter name "cache-hits" is not valid');
				expect(nameError.hint).toMatch(/letters, digits and underscores/);
				expect(amountError.message).toBe('The amount for the counter "hits" must be a finite number, but it is NaN');
				expect(await ledger.readCounts(ns, COUNTS_KEPT_DAYS)).toEqual([]);
				// The longest name allowed is fine.
				await ledger.addCounts([{ namespace: ns, counts: { [`a${'_'.repeat(63)}`]: 1 } }]);
				expect(Object.keys((await today()).counts)).toEqual([`a${'_'.repeat(63)}`]);
			});

			// The n8n host's clock is not the ledger's: "today" is the server's UTC day.
			test.each([2 * DAY, -2 * DAY])('with the n8n host clock %i ms off, counts land on the ledger\'s today', async (skewMs) => {
				const before = await fx.ledgerToday();
				const answered = await withHostClockSkew(skewMs, async () => {
					const hostDay = new Date().toISOString().slice(0, 10);
					expect(hostDay).not.toBe(before);
					await ledger.addCounts([{ namespace: ns, counts: { hits: 1 } }]);
					await ledger.addCounts([{ namespace: ns, counts: { hits: 1 } }]);
					const read = await ledger.readCounts(ns, 1);
					// The host's "two days ago" window would hold nothing; the ledger's today holds both adds.
					expect(await ledger.readCounts(ns, 2)).toEqual(read);
					return read;
				});
				const after = await fx.ledgerToday();
				expect(answered).toHaveLength(1);
				expect(answered[0].counts).toEqual({ hits: 2 });
				// The server's day, read apart from the ledger (either side of a midnight during the test).
				expect([before, after]).toContain(answered[0].day);
			});
		});

		test('large batches are claimed in chunks with every outcome in order', async () => {
			const keys = Array.from({ length: 12_000 }, (_, i) => req(`big-${i}`));
			const before = ledger.roundTrips;
			const first = await ledger.claim(keys, seen);
			expect(first.filter((o) => o.kind === 'claimed')).toHaveLength(12_000);
			const trips = ledger.roundTrips - before;
			expect(trips).toBeLessThanOrEqual(4);
			const mixed = [...keys.slice(0, 100), req('big-new')];
			const second = await ledger.claim(mixed, seen);
			expect(second.slice(0, 100).every((o) => o.kind === 'duplicate')).toBe(true);
			expect(second[100].kind).toBe('claimed');
		});
	});
}
