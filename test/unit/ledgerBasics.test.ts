import { fingerprint, normalize } from '../../lib/ledger/fingerprint';
import { toMilliseconds } from '../../lib/ledger/duration';
import { assertIdentifier, assertKey, MAX_KEY_LENGTH } from '../../lib/ledger/validate';
import { PostgresLedger } from '../../lib/ledger/postgres/PostgresLedger';
import { postgresSettingsFrom } from '../../lib/n8n/postgresCredential';

describe('normalization and fingerprints', () => {
	test('key order and surrounding whitespace do not matter', () => {
		expect(normalize({ b: 1, a: { d: ' x ', c: [2, 1] } })).toBe(normalize({ a: { c: [2, 1], d: 'x' }, b: 1 }));
		expect(fingerprint({ text: 'a\r\nb' })).toBe(fingerprint({ text: 'a\nb' }));
	});
	test('content does matter', () => {
		expect(fingerprint({ a: 1 })).not.toBe(fingerprint({ a: 2 }));
		expect(fingerprint([1, 2])).not.toBe(fingerprint([2, 1]));
		expect(fingerprint({ a: '1' })).not.toBe(fingerprint({ a: 1 }));
	});
	test('undefined members are dropped, like JSON', () => {
		expect(normalize({ a: 1, b: undefined })).toBe(normalize({ a: 1 }));
	});
	// Fingerprints are stored in the ledger: a change of format would make every payload seen
	// before an upgrade count as different. These values come from the implementation before
	// the speed-up of 2026-11-23.
	test('the canonical form and its hash do not change between versions', () => {
		const value = {
			z: [1, 'two', null, undefined, { b: ' padded\r\n', a: true }],
			'naïve "key"': 1.5e-7,
			a: { when: new Date(Date.UTC(2026, 10, 23, 12, 0, 0, 5)), n: 12345678901234567890n, skip: () => 1, nan: NaN, empty: {}, list: [] },
		};
		expect(normalize(value)).toBe(
			'{"a":{"empty":{},"list":[],"n":12345678901234567890,"nan":null,"when":"2026-11-23T12:00:00.005Z"},"naïve \\"key\\"":1.5e-7,"z":[1,"two",null,null,{"a":true,"b":"padded"}]}',
		);
		expect(fingerprint(value)).toBe('a2757fbf6698a63931ff10a057fdaad02f6a0c9e8a7e61190fcf2b2014e443d4');
		expect(fingerprint({ id: 'evt_1', amount: 1 })).toBe('58d6ef16e8cf492b6ed4b76b51556cdea16f6a6a18ed4f0abe7ea62bc12061ff');
	});
});

describe('validation', () => {
	test.each(['idempotency_ledger', '_x', 'A1'])('identifier %s is accepted', (name) => {
		expect(assertIdentifier(name, 'table name')).toBe(name);
	});
	test.each(['', '1abc', 'a-b', 'a;drop table x', 'a"b', 'x'.repeat(64), null])('identifier %j is refused', (name) => {
		expect(() => assertIdentifier(name, 'table name')).toThrow(/not a valid name/);
	});
	test('a ledger refuses a bad schema or table name before any SQL', () => {
		expect(() => new PostgresLedger({ pool: {} as never, table: 'x; DROP TABLE y' })).toThrow(/table name/);
		expect(() => new PostgresLedger({ pool: {} as never, schema: 'bad schema' })).toThrow(/schema name/);
	});
	test('keys', () => {
		expect(assertKey('k')).toBe('k');
		expect(() => assertKey('')).toThrow(/empty/);
		expect(() => assertKey('   ')).toThrow(/empty/);
		expect(() => assertKey('\u3000\t')).toThrow(/empty/);
		// Leading space alone is not blank, and a blank key right after one is still caught: the
		// check is one shared RegExp, which must keep no state between keys.
		expect(['  k', ' k', '\u00a0k'].map((k) => assertKey(k))).toEqual(['  k', ' k', '\u00a0k']);
		expect(() => assertKey('  ')).toThrow(/empty/);
		expect(() => assertKey(7)).toThrow(/must be text/);
		expect(() => assertKey('x'.repeat(MAX_KEY_LENGTH + 1))).toThrow(/limit is 512/);
	});
	test('durations', () => {
		expect(toMilliseconds(30, 'days', 'retention')).toBe(30 * 86_400_000);
		expect(toMilliseconds('1.5', 'hours', 'lease')).toBe(5_400_000);
		expect(() => toMilliseconds(0, 'days', 'retention')).toThrow(/positive number of days/);
		expect(() => toMilliseconds('abc', 'days', 'retention')).toThrow(/positive/);
	});
	test('credential settings', () => {
		expect(postgresSettingsFrom({ host: 'db', port: 5433, schema: 'ledger', table: 'keys' })).toMatchObject({
			host: 'db',
			port: 5433,
			ssl: 'disable',
			poolSize: 10,
		});
		expect(() => postgresSettingsFrom({ host: '' })).toThrow(/no host/);
		expect(() => postgresSettingsFrom({ host: 'db', port: 70000 })).toThrow(/not a port/);
		expect(() => postgresSettingsFrom({ host: 'db', table: 'bad-name' })).toThrow(/table name/);
	});
});

describe('PostgreSQL statements that meet a deadlock or serialization failure', () => {
	/** A pool whose statements fail with `code` the first `failures` times (the schema check always answers: current, its claim function there). */
	function stubPool(code: string, failures: number) {
		let calls = 0;
		const pool = {
			query: async (text: string) => {
				if (text.includes('_migrations')) return { rows: [{ v: 99, claim_one: true }] };
				calls++;
				if (calls <= failures) throw Object.assign(new Error(`driver text ${code}`), { code });
				return { rows: [] };
			},
			end: async () => undefined,
		};
		return { pool: pool as never, calls: () => calls };
	}

	test.each(['40P01', '40001'])('%s: run again, and the caller never sees it when a retry succeeds', async (code) => {
		const stub = stubPool(code, 3);
		const ledger = new PostgresLedger({ pool: stub.pool });
		expect(await ledger.get('ns', 'k')).toEqual([]);
		expect(stub.calls()).toBe(4);
	});

	test('still failing after the retries: a readable error, no driver text', async () => {
		const stub = stubPool('40P01', 100);
		const ledger = new PostgresLedger({ pool: stub.pool });
		const error = await ledger.get('ns', 'k').then(
			() => null,
			(e: Error & { hint?: string }) => e,
		);
		expect(error?.message).toBe('The ledger database kept stopping this write because concurrent runs were changing the same keys');
		expect(error?.hint).toMatch(/Run the execution again/);
		expect(error?.message).not.toMatch(/driver text/);
		expect(stub.calls()).toBe(5);
	});

	test('other errors are not retried', async () => {
		const stub = stubPool('23505', 1);
		const ledger = new PostgresLedger({ pool: stub.pool });
		await expect(ledger.get('ns', 'k')).rejects.toBeDefined();
		expect(stub.calls()).toBe(1);
	});
});
