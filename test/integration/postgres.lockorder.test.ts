import path from 'path';

import { databaseUrl, newPool } from '../support/db';
import { race, racer } from '../support/racer';

const CHILD = path.join(__dirname, 'fixtures', 'pg-lockorder-child.js');
const PROCESSES = 4;
const ROUNDS = 200;

/**
 * Keys whose order differs between byte order and a linguistic collation: case, accents,
 * punctuation, digits and a character beyond the Basic Multilingual Plane. On a database created
 * with ICU en-US (what the official PostgreSQL image gives), a statement that sorts rows by the
 * column's collation locks them in another order than one that sorts them in JavaScript.
 */
const KEYS = [
	'a', 'B', 'c', 'D', 'é', 'E', 'e-1', 'e_1', 'e 1', 'E1', '10', '9', 'ä', 'z', 'Z', '_x', '-x', 'x',
	'Order#1', 'order#2', 'ORDER#3', 'ß', 'ss', '\u{1F600}', '\uFFFD', 'ｚ', 'k.1', 'k-1', 'K1', 'k1',
];

/**
 * 270 keys made of those: enough that a racer's random half, new every round, is a claim of 100 or
 * more keys that finds none of its rows, which PostgresLedger inserts plainly (no ON CONFLICT).
 */
const MANY_KEYS = [...new Set(KEYS.flatMap((k) => [k, `${k.toUpperCase()}x`, `é${k}`, `${k} 2`, `_${k}`, `${k}-b`, `Z${k}`, `${k}ß`, `a${k}`]))];
const FRESH_ROUNDS = 80;

async function createDatabase(name: string, locale: string): Promise<string> {
	const admin = newPool(1);
	try {
		await admin.query(`DROP DATABASE IF EXISTS "${name}"`);
		await admin.query(`CREATE DATABASE "${name}" ${locale} TEMPLATE template0`);
	} finally {
		await admin.end();
	}
	const url = new URL(databaseUrl());
	url.pathname = `/${name}`;
	return url.toString();
}

async function dropDatabase(name: string) {
	const admin = newPool(1);
	try {
		await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
	} finally {
		await admin.end();
	}
}

type RacerReport = { calls: number; errors: Record<string, number>; statementErrors: Record<string, number>; plainOffers: number };

const sum = (reports: RacerReport[], field: 'errors' | 'statementErrors') => {
	const total: Record<string, number> = {};
	for (const r of reports) for (const [code, n] of Object.entries(r[field])) total[code] = (total[code] ?? 0) + n;
	return total;
};

/**
 * Several processes run claims, marks, lease renewals and records over overlapping keys, on a
 * database with an ICU en-US collation and on one with C: over one pool of keys for 200 rounds
 * each, and over new keys every round, where claims of 100 or more keys take the plain INSERT
 * and race each other's. No deadlock may reach a caller, and PostgreSQL itself must report none
 * (pg_stat_database): every statement locks rows in one order.
 */
describe.each([
	['ICU en-US', `LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'`],
	['C', `LOCALE 'C'`],
])('PostgreSQL lock order on a database with the %s collation', (label, locale) => {
	const name = `idem_lockorder_${label === 'C' ? 'c' : 'icu'}_${process.pid}`;
	let url: string;
	beforeAll(async () => {
		url = await createDatabase(name, locale);
	});
	afterAll(async () => dropDatabase(name));

	const check = async (reports: RacerReport[]) => {
		const errors = sum(reports, 'errors');
		// Each backend reports its deadlocks to the statistics when it ends; give that a moment.
		await new Promise((r) => setTimeout(r, 1500));
		const pool = newPool(1);
		try {
			const collation = (await pool.query(`SELECT datlocprovider, datcollate, coalesce(to_jsonb(d) ->> 'daticulocale', to_jsonb(d) ->> 'datlocale') AS daticulocale FROM pg_database d WHERE datname = $1`, [name])).rows[0];
			const stats = (await pool.query(`SELECT deadlocks::int AS n FROM pg_stat_database WHERE datname = $1`, [name])).rows[0];
			console.log(`${label}: ${JSON.stringify(collation)}; ${reports.reduce((n, r) => n + r.calls, 0)} calls, errors ${JSON.stringify(errors)}, statements met ${JSON.stringify(sum(reports, 'statementErrors'))}, server deadlocks ${stats.n}`);
			if (label !== 'C') expect(collation).toMatchObject({ datlocprovider: 'i', daticulocale: 'en-US' });
			expect(errors).toEqual({});
			expect(stats.n).toBe(0);
		} finally {
			await pool.end();
		}
	};

	test(`${PROCESSES} processes x ${ROUNDS} rounds of claim, mark, renew and record: no deadlock`, async () => {
		await check(
			await race(Array.from({ length: PROCESSES }, (_, p) => racer<RacerReport>(CHILD, [url, 'ledger', String(ROUNDS), String(p + 1), JSON.stringify(KEYS)]))),
		);
	}, 180_000);

	test(`${PROCESSES} processes x ${FRESH_ROUNDS} rounds over new keys each round, plain inserts racing: no deadlock`, async () => {
		const reports = await race(
			Array.from({ length: PROCESSES }, (_, p) =>
				racer<RacerReport>(CHILD, [url, 'ledger_fresh', String(FRESH_ROUNDS), String(p + 1), JSON.stringify(MANY_KEYS), 'fresh']),
			),
		);
		await check(reports);
		// Claims of 100 keys or more were offered the plain INSERT, and some that took it lost a race
		// to another racer's and ran again (a unique violation the ledger answers itself).
		console.log(`${label}: ${reports.reduce((n, r) => n + r.plainOffers, 0)} claim statements that may insert plainly`);
		expect(reports.reduce((n, r) => n + r.plainOffers, 0)).toBeGreaterThan(0);
		expect(sum(reports, 'statementErrors')['23505']).toBeGreaterThan(0);
	}, 180_000);
});
