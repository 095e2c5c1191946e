import { describeLedgerContract } from './ledger.contract';
import { COUNTS_KEPT_DAYS, PostgresLedger, type ClaimOptions, type ClaimOutcome } from '../../lib/ledger';
import type { Pool } from 'pg';
import { claimFunctionPrefix } from '../../lib/ledger/postgres/schema';
import { randomBytes } from 'crypto';
import { databaseUrl, dropLedgerTables, freshPostgresLedger, newPool, uniqueTable } from '../support/db';

describeLedgerContract('PostgreSQL', freshPostgresLedger);

describe('PostgreSQL ledger: the webhook case', () => {
	test('a one-key claim is one statement, new or duplicate, whatever its namespace and step', async () => {
		const fx = await freshPostgresLedger();
		try {
			await fx.ledger.ensureSchema();
			const lease = { mode: 'lease' as const, holder: 'run-1', leaseMs: 60_000, ttlMs: 86_400_000 };
			for (const [step, expected] of [['', 'claimed'], ['', 'in_progress'], ['email', 'claimed']] as const) {
				const before = fx.ledger.roundTrips;
				const [outcome] = await fx.ledger.claim([{ namespace: 'one', key: 'evt_1', step, fingerprint: 'f' }], lease);
				expect(outcome.kind).toBe(expected);
				expect(fx.ledger.roundTrips - before).toBe(1);
			}
		} finally {
			await fx.dispose();
		}
	});
});

describe('PostgreSQL ledger: one key, one function call', () => {
	// A one-key claim runs in a function of the ledger's (claimOneFunction), a batch in claimSql.
	// Both must apply one rule: each case sets up the same row under two keys, then claims one
	// alone and the other beside a new key, and the answers must agree in all but key, fence and time.
	const lease = (holder: string, leaseMs = 60_000) => ({ mode: 'lease' as const, holder, leaseMs, ttlMs: 86_400_000 });
	const seen = { mode: 'seen' as const, holder: 's', leaseMs: 0, ttlMs: 86_400_000 };
	type Setup = (ledger: PostgresLedger, key: string) => Promise<void>;
	const claimed = async (ledger: PostgresLedger, key: string, options: ClaimOptions, fingerprint: string | null = 'f', version?: string) => {
		const [outcome] = await ledger.claim([{ namespace: 'agree', key, step: 'send', fingerprint, version }], options);
		if (outcome.kind !== 'claimed') throw new Error(`setup claim of ${key}: ${outcome.kind}`);
		return outcome.record.fence as number;
	};
	const recorded = (status: 'completed' | 'failed_retryable' | 'needs_review', extra: object = {}): Setup => async (ledger, key) => {
		const fence = await claimed(ledger, key, lease('setup'));
		await ledger.record([{ namespace: 'agree', key, step: 'send', status, fence, externalId: 'ext-1', result: { id: 7 }, ...extra }], { ttlMs: 86_400_000 });
	};
	const cases: Array<[string, Setup, ClaimOptions, { fingerprint?: string | null; version?: string }?]> = [
		['a new key, seen', async () => undefined, seen],
		['a new key, leased', async () => undefined, lease('b')],
		['a completed step', recorded('completed'), lease('b')],
		['a completed step with other content', recorded('completed'), lease('b'), { fingerprint: 'g' }],
		['a step that failed, retryable', recorded('failed_retryable'), lease('b')],
		['a step on Needs Review', recorded('needs_review'), lease('b')],
		['a live lease of another run', async (l, k) => void (await claimed(l, k, lease('a'))), lease('b')],
		['a live lease of the same run, reclaimed', async (l, k) => void (await claimed(l, k, lease('a'))), { ...lease('a'), reclaimOwnLease: true }],
		['a lapsed lease', async (l, k) => void (await claimed(l, k, lease('a', 50))), lease('b')],
		['a lapsed lease that may have sent', async (l, k) => {
			const fence = await claimed(l, k, lease('a', 50));
			await l.markPhase([{ namespace: 'agree', key: k, step: 'send', fence }], 'sending');
		}, lease('b')],
		['an expired row', async (l, k) => {
			await l.claim([{ namespace: 'agree', key: k, step: 'send', fingerprint: 'f' }], { ...seen, ttlMs: 50 });
		}, lease('b')],
		['a newer version', async (l, k) => void (await claimed(l, k, { ...seen, mode: 'newer' }, 'f', '1')), { ...seen, mode: 'newer' }, { version: '2', fingerprint: 'g' }],
		['an older version', async (l, k) => void (await claimed(l, k, { ...seen, mode: 'newer' }, 'f', '2')), { ...seen, mode: 'newer' }, { version: '1', fingerprint: 'g' }],
	];
	const comparable = (outcome: ClaimOutcome) => {
		if (outcome.kind === 'batch_duplicate') return outcome;
		const { namespace, key, fence, firstSeenAt, updatedAt, expiresAt, leaseExpiresAt, leaseRemainingMs, ...rest } = outcome.record;
		return { ...outcome, record: { ...rest, leased: leaseExpiresAt !== null, kept: expiresAt.getUTCFullYear() === 9999 } };
	};

	test('one key and the same key in a batch get the same answer, case by case, in one round trip', async () => {
		const fx = await freshPostgresLedger();
		try {
			for (const [name, setup] of cases) {
				await setup(fx.ledger, `${name}/one`);
				await setup(fx.ledger, `${name}/batch`);
			}
			await new Promise((r) => setTimeout(r, 120));
			for (const [name, , options, request] of cases) {
				const claim = (key: string) => ({ namespace: 'agree', key, step: 'send', fingerprint: request?.fingerprint ?? 'f', version: request?.version });
				const before = fx.ledger.roundTrips;
				const [one] = await fx.ledger.claim([claim(`${name}/one`)], options);
				expect({ name, trips: fx.ledger.roundTrips - before }).toEqual({ name, trips: 1 });
				const [batch, companion] = await fx.ledger.claim([claim(`${name}/batch`), claim(`${name}/new`)], options);
				expect(companion.kind).toBe('claimed');
				expect({ name, ...comparable(one) }).toEqual({ name, ...comparable(batch) });
			}
			// Blocked, once each way: the completed step, its other content, Needs Review, the other run's lease, the older version.
			const blocked = (await fx.pool.query(`SELECT duplicates_blocked AS n FROM "${fx.table}_counters" WHERE namespace = 'agree'`)).rows[0].n;
			expect(Number(blocked)).toBe(2 * 5);
		} finally {
			await fx.dispose();
		}
	});
});

describe('PostgreSQL ledger: the one-key claim function', () => {
	const functions = async (pool: Pool, table: string) =>
		(await pool.query(`SELECT proname FROM pg_proc WHERE left(proname, $2) = $1`, [claimFunctionPrefix(table), claimFunctionPrefix(table).length])).rows.map((r) => r.proname as string);

	test('a ledger whose schema is current but lacks this version\'s function (another version made it, or it was dropped) creates it; dropping the ledger drops it', async () => {
		const fx = await freshPostgresLedger();
		const second = await fx.another();
		const admin = newPool(1);
		try {
			expect(await functions(fx.pool, fx.table)).toHaveLength(1);
			// Another version of the package made the ledger: its function has another name.
			const [mine] = await functions(fx.pool, fx.table);
			await fx.pool.query(`ALTER FUNCTION "${mine}" RENAME TO "${claimFunctionPrefix(fx.table)}000000000000"`);
			await second.ensureSchema();
			expect((await functions(fx.pool, fx.table)).sort()).toEqual([`${claimFunctionPrefix(fx.table)}000000000000`, mine].sort());
			const [outcome] = await second.claim([{ namespace: 'fn', key: 'k', step: '', fingerprint: null }], { mode: 'seen', holder: 'h', leaseMs: 0, ttlMs: 60_000 });
			expect(outcome.kind).toBe('claimed');
			await second.close();
			await fx.dispose();
			expect(await functions(admin, fx.table)).toEqual([]);
		} finally {
			await admin.end();
		}
	});
});

describe('PostgreSQL ledger: a ledger user that may not create anything', () => {
	test('claims one key with the batch statement when an administrator made the tables with another version', async () => {
		const admin = newPool(1);
		const suffix = randomBytes(4).toString('hex');
		const schema = `s_${suffix}`;
		const role = `idem_user_${suffix}`;
		const table = uniqueTable('granted');
		await admin.query(`CREATE SCHEMA ${schema}`);
		await new PostgresLedger({ pool: admin, schema, table }).ensureSchema();
		// The administrator ran another version: its claim function has another name.
		const [made] = (await admin.query(`SELECT p.oid::regprocedure AS f FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1`, [schema])).rows;
		await admin.query(`ALTER FUNCTION ${made.f} RENAME TO "${claimFunctionPrefix(table)}000000000000"`);
		await admin.query(`CREATE ROLE ${role} LOGIN`);
		await admin.query(`GRANT USAGE ON SCHEMA ${schema} TO ${role}`);
		await admin.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ${schema} TO ${role}`);
		await admin.query(`GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA ${schema} TO ${role}`);
		const url = new URL(databaseUrl());
		url.username = role;
		url.password = '';
		const user = new PostgresLedger({ pool: newPool(2, url.toString()), schema, table });
		try {
			const seen = { mode: 'seen' as const, holder: 'h', leaseMs: 0, ttlMs: 60_000 };
			const claim = () => user.claim([{ namespace: 'granted', key: 'k', step: '', fingerprint: null }], seen);
			expect((await claim())[0].kind).toBe('claimed');
			expect((await claim())[0].kind).toBe('duplicate');
			const functions = (await admin.query(`SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1`, [schema])).rows;
			expect(functions.map((f) => f.proname)).toEqual([`${claimFunctionPrefix(table)}000000000000`]);
		} finally {
			await user.close();
			await admin.query(`DROP SCHEMA ${schema} CASCADE`);
			await admin.query(`DROP ROLE ${role}`);
			await admin.end();
		}
	});
});

describe('PostgreSQL ledger: background purge', () => {
	test('a claim starts a turn once the interval has passed: batches while each comes back full, at most maxBatches', async () => {
		const pool = newPool(2);
		const table = uniqueTable('purge');
		const ledger = new PostgresLedger({ pool, table, autoPurge: { everyMs: 300, batch: 2, maxBatches: 2 } });
		try {
			const seen = { mode: 'seen' as const, holder: 'h', leaseMs: 0, ttlMs: 100 };
			await ledger.claim(Array.from({ length: 5 }, (_, i) => ({ namespace: 'p', key: `old${i}`, step: '', fingerprint: null })), seen);
			await new Promise((r) => setTimeout(r, 400));
			const count = async () => (await pool.query(`SELECT count(*)::int AS n FROM "${table}"`)).rows[0].n as number;
			expect(await count()).toBe(5);
			await ledger.claim([{ namespace: 'p', key: 'fresh', step: '', fingerprint: null }], { ...seen, ttlMs: 60_000 });
			// The turn runs after the claim returned, off the caller's path: two full batches of 2, then
			// the bound of the turn; one old row waits for the next turn.
			for (let i = 0; i < 50 && (await count()) > 2; i++) await new Promise((r) => setTimeout(r, 20));
			expect(await count()).toBe(2);
			// Not again before the interval.
			await ledger.claim([{ namespace: 'p', key: 'fresh2', step: '', fingerprint: null }], { ...seen, ttlMs: 60_000 });
			await new Promise((r) => setTimeout(r, 100));
			expect(await count()).toBe(3);
		} finally {
			await dropLedgerTables(pool, table);
			await pool.end();
		}
	});
});

describe('PostgreSQL ledger: a takeover committed while a write for the old claim waits', () => {
	test('the write reads the claim as the takeover left it, changes nothing, and the step keeps what the new claim recorded', async () => {
		const pool = newPool(3);
		const table = uniqueTable('takeover');
		const ledger = new PostgresLedger({ pool, table });
		const other = await pool.connect();
		try {
			const [a] = await ledger.claim([{ namespace: 'to', key: 'k', step: '', fingerprint: null }], { mode: 'lease', holder: 'run-a', leaseMs: 60_000, ttlMs: 86_400_000 });
			const fenceA = a.kind === 'claimed' ? a.record.fence! : -1;
			// Run B takes the unit over and records the step, in a transaction that has not committed
			// yet: the write's snapshot shows the unit still under A's claim, and no step row.
			await other.query('BEGIN');
			await other.query(`UPDATE "${table}" SET fence = fence + 1000, lease_holder = 'run-b' WHERE namespace = 'to' AND key = 'k' AND step = ''`);
			await other.query(`INSERT INTO "${table}" (namespace, key, step, status, external_id, expires_at) VALUES ('to', 'k', 'crm', 'completed', 'crm-42', now() + interval '1 day')`);
			const writing = ledger.record(
				[{ namespace: 'to', key: 'k', step: 'crm', status: 'failed_retryable', claim: { step: '', fence: fenceA } }],
				{ ttlMs: 86_400_000, holder: 'run-a' },
			);
			const waiting = async () =>
				(await pool.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%locked AS MATERIALIZED%' AND datname = current_database()`)).rows[0].n;
			for (let i = 0; i < 200 && (await waiting()) === 0; i++) await new Promise((r) => setTimeout(r, 10));
			expect(await waiting()).toBe(1);
			await other.query('COMMIT');
			expect(await writing).toEqual([{ kind: 'lost_lease' }]);
			expect((await ledger.get('to', 'k')).map((r) => [r.step, r.status, r.externalId])).toEqual([
				['', 'in_progress', null],
				['crm', 'completed', 'crm-42'],
			]);
		} finally {
			other.release();
			await dropLedgerTables(pool, table);
			await pool.end();
		}
	});
});

describe('PostgreSQL ledger: rows committed while a claim waits', () => {
	// Under 100 keys a statement re-checks every row under its lock and reads the late rows afresh;
	// from 100 keys, one whose snapshot shows none of its rows inserts them plainly, fails whole on
	// the late rows' unique violation, and runs again (see PostgresLedger.claimSql).
	test.each([
		['3 keys', 3, []],
		['150 keys', 150, ['23505']],
	])('a batch of %s: are answered as they are, and the other rows of the batch are still claimed', async (_, size, failures) => {
		const pool = newPool(3);
		const table = uniqueTable('late');
		const ledger = new PostgresLedger({ pool, table });
		const other = await pool.connect();
		// The error codes of the ledger's statements, before the ledger sees them.
		const met: string[] = [];
		const query = pool.query.bind(pool) as (...args: unknown[]) => Promise<unknown>;
		(pool as unknown as { query: (...args: unknown[]) => Promise<unknown> }).query = (...args) =>
			query(...args).catch((error: { code?: string }) => {
				met.push(String(error.code));
				throw error;
			});
		try {
			await ledger.ensureSchema();
			met.length = 0;
			// Another run inserts two rows and has not committed yet: the claim's snapshot cannot see
			// them, and its insert waits on their locks.
			await other.query('BEGIN');
			await other.query(
				`INSERT INTO "${table}" (namespace, key, step, status, lease_holder, lease_expires_at, fingerprint, expires_at) VALUES
				 ('late', 'done', '', 'completed', NULL, NULL, 'fp-done', now() + interval '1 day'),
				 ('late', 'held', '', 'in_progress', 'other-run', now() + interval '1 hour', 'fp-held', now() + interval '1 day')`,
			);
			const freshKeys = Array.from({ length: size - 2 }, (_, i) => `fresh${i}`);
			const claiming = ledger.claim(
				['done', 'held', ...freshKeys].map((key) => ({ namespace: 'late', key, step: '', fingerprint: `fp-${key}` })),
				{ mode: 'lease', holder: 'this-run', leaseMs: 60_000, ttlMs: 86_400_000 },
			);
			const waiting = async () =>
				(await pool.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%WITH input AS%' AND datname = current_database()`)).rows[0].n;
			for (let i = 0; i < 200 && (await waiting()) === 0; i++) await new Promise((r) => setTimeout(r, 10));
			expect(await waiting()).toBe(1);
			await other.query('COMMIT');

			const [done, held, ...fresh] = await claiming;
			expect(done).toMatchObject({ kind: 'duplicate', record: { status: 'completed', fingerprint: 'fp-done' } });
			expect(held).toMatchObject({ kind: 'in_progress', record: { status: 'in_progress', leaseHolder: 'other-run' } });
			expect(fresh).toHaveLength(size - 2);
			for (const outcome of fresh) {
				expect(outcome).toMatchObject({ kind: 'claimed', previousStatus: null, record: { status: 'in_progress', leaseHolder: 'this-run', attempts: 1 } });
			}
			expect(met).toEqual(failures);
			const rows = (await pool.query(`SELECT key, lease_holder FROM "${table}" ORDER BY key`)).rows;
			expect(rows).toEqual(
				[
					{ key: 'done', lease_holder: null },
					...freshKeys.map((key) => ({ key, lease_holder: 'this-run' })),
					{ key: 'held', lease_holder: 'other-run' },
				].sort((a, b) => (a.key < b.key ? -1 : 1)),
			);
			// The two late rows are counted as blocked once, whichever way the claim went.
			const counted = (await pool.query(`SELECT duplicates_blocked::int AS n FROM "${table}_counters" WHERE namespace = 'late'`)).rows;
			expect(counted).toEqual([{ n: 2 }]);
		} finally {
			await other.query('ROLLBACK');
			other.release();
			await dropLedgerTables(pool, table);
			await pool.end();
		}
	});
});

describe('PostgreSQL ledger: daily counters', () => {
	let fx: Awaited<ReturnType<typeof freshPostgresLedger>>;
	beforeAll(async () => {
		fx = await freshPostgresLedger();
	});
	afterAll(async () => fx && (await fx.dispose()));
	const daily = () => `"public"."${fx.table}_daily"`;

	test('an add is one autocommit statement, whatever the namespaces, and sums as exact numerics', async () => {
		// What the pool is asked to run, apart from the ledger's own round-trip count.
		const sent: string[] = [];
		const query = fx.pool.query.bind(fx.pool) as (...args: unknown[]) => unknown;
		const spy = jest.spyOn(fx.pool, 'query').mockImplementation(((text: unknown, ...rest: unknown[]) => {
			sent.push(typeof text === 'string' ? text : (text as { text: string }).text);
			return query(text, ...rest);
		}) as never);
		try {
			for (let i = 0; i < 10; i++) {
				await fx.ledger.addCounts([
					{ namespace: 'exact-b', counts: { costUsd: 0.1 } },
					{ namespace: 'exact-a', counts: { costUsd: 0.05, hits: 1 } },
					{ namespace: 'exact-b', counts: { hits: 1 } },
					{ namespace: 'exact-a', counts: { costUsd: 0.05 } },
				]);
			}
			// The pool saw one statement per add: no BEGIN, nothing held across statements (PgBouncer transaction mode).
			expect(sent).toHaveLength(10);
			expect(sent.every((text) => /^\s*WITH input AS/.test(text))).toBe(true);
			await fx.ledger.addCounts([]);
			expect(sent).toHaveLength(10);
		} finally {
			spy.mockRestore();
		}
		const { rows } = await fx.pool.query(`SELECT namespace, counts ->> 'costUsd' AS cost, counts ->> 'hits' AS hits FROM ${daily()} WHERE namespace LIKE 'exact-%' ORDER BY namespace`);
		// Stored as numeric sums: exactly 1.00, not 0.9999999999999999.
		expect(rows.map((r) => [r.namespace, Number(r.cost) === 1 && /^1\.0*$/.test(r.cost), r.hits])).toEqual([
			['exact-a', true, '10'],
			['exact-b', true, '10'],
		]);
		const [day] = await fx.ledger.readCounts('exact-a', 1);
		expect(day.counts).toEqual({ costUsd: 1, hits: 10 });
	});

	test('days older than COUNTS_KEPT_DAYS are purged, oldest first, within the purge limit; the last kept day stays', async () => {
		for (const daysAgo of [COUNTS_KEPT_DAYS + 5, COUNTS_KEPT_DAYS + 1, COUNTS_KEPT_DAYS, 0]) {
			await fx.putPastCounts('retention', daysAgo, { hits: daysAgo });
		}
		// Two expired ledger rows beside them.
		await fx.ledger.claim(['x1', 'x2'].map((key) => ({ namespace: 'retention', key, step: '', fingerprint: null })), {
			mode: 'seen', holder: 'h', leaseMs: 0, ttlMs: 1,
		});
		await new Promise((r) => setTimeout(r, 20));
		const kept = async () =>
			(await fx.pool.query(`SELECT (now() AT TIME ZONE 'UTC')::date - day AS age FROM ${daily()} WHERE namespace = 'retention' ORDER BY day`)).rows.map((r) => r.age);
		expect(await fx.ledger.purgeExpired(1)).toBe(1);
		expect(await kept()).toEqual([COUNTS_KEPT_DAYS + 1, COUNTS_KEPT_DAYS, 0]);
		// Old days first, then ledger rows, together at most the limit.
		expect(await fx.ledger.purgeExpired(2)).toBe(2);
		expect(await kept()).toEqual([COUNTS_KEPT_DAYS, 0]);
		expect(await fx.ledger.purgeExpired(10)).toBe(1);
		expect(await fx.ledger.purgeExpired(10)).toBe(0);
		expect(await kept()).toEqual([COUNTS_KEPT_DAYS, 0]);
	});

	test('the background purge runs after an add too', async () => {
		const pool = newPool(2);
		const ledger = new PostgresLedger({ pool, table: fx.table, autoPurge: { everyMs: 0, batch: 10 } });
		try {
			await fx.putPastCounts('background', COUNTS_KEPT_DAYS + 1, { hits: 1 });
			await ledger.addCounts([{ namespace: 'background', counts: { hits: 1 } }]);
			const old = async () => (await pool.query(`SELECT count(*)::int AS n FROM ${daily()} WHERE namespace = 'background'`)).rows[0].n;
			for (let i = 0; i < 50 && (await old()) > 1; i++) await new Promise((r) => setTimeout(r, 20));
			expect(await old()).toBe(1);
		} finally {
			await pool.end();
		}
	});
});
