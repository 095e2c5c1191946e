import type { ICredentialDataDecryptedObject } from 'n8n-workflow';

import { closeAllPostgresLedgers, closeAllRedisLedgers, type Ledger } from '../../lib/ledger';
import { LEASE_KEEPING } from '../../lib/n8n/leaseKeeper';
import { dropLedgerTables, freshPostgresLedger, newPool, settingsFromUrl, uniqueTable } from './db';
import { freshRedisLedger, suiteRedisCredential, uniquePrefix } from './redis';

type Credentials = Record<string, ICredentialDataDecryptedObject>;

/** An open ledger of an engine test, with the node credentials that reach it. */
export interface OpenLedger {
	ledger: Ledger;
	credentials: Credentials;
	dispose(): Promise<void>;
}

/** A fresh ledger for an engine test, with the node credentials that reach it. */
export interface EngineBackend<T extends OpenLedger = OpenLedger> {
	name: string;
	/** The value of our nodes' "Ledger" parameter. */
	parameter: 'postgres' | 'redis';
	open(): Promise<T>;
}

/** freshPostgresLedger's fixture (ledger, pool, table and helpers) and the node credential for its table. */
export type OpenPostgresLedger = Awaited<ReturnType<typeof freshPostgresLedger>> & {
	credentials: { idempotencyPostgresApi: ReturnType<typeof settingsFromUrl> };
};

/** A new ledger table on the suite's PostgreSQL. */
export const postgresBackend: EngineBackend<OpenPostgresLedger> = {
	name: 'PostgreSQL',
	parameter: 'postgres',
	async open() {
		const fx = await freshPostgresLedger();
		return { ...fx, credentials: { idempotencyPostgresApi: settingsFromUrl(fx.table) } };
	},
};

/** A new key prefix (starting with `prefixStem`) on the suite's Redis. */
export const redisBackend = (prefixStem: string): EngineBackend => ({
	name: 'Redis',
	parameter: 'redis',
	async open() {
		const fx = await freshRedisLedger(uniquePrefix(prefixStem));
		return { ledger: fx.ledger, credentials: { idempotencyRedisApi: suiteRedisCredential(fx.prefix) }, dispose: () => fx.dispose() };
	},
});

/** The Slack credential of the tests' local Slack (test/support/destinations.ts slackServer). */
export const SLACK_CREDENTIAL: Credentials = { slackApi: { accessToken: 'xoxb-test-token' } };

/**
 * What a test file or describe block's tests share (a ledger, a local destination), set up in one
 * place: `start()` before the block's tests (beforeAll), `stop` after them (afterAll; it gets
 * undefined when the start failed). The answer stands for what `start` gave: read its fields
 * inside tests and hooks, once it is started.
 */
export function useStarted<T extends object>(what: string, start: () => Promise<T>, stop: (value: T | undefined) => Promise<unknown>): T {
	let value: T | undefined;
	beforeAll(async () => {
		value = await start();
	});
	afterAll(async () => {
		await stop(value);
	});
	const started = () => {
		if (!value) throw new Error(`${what} of this test is not started: read it inside a test or hook`);
		return value;
	};
	return new Proxy({} as T, {
		get: (_target, field) => Reflect.get(started(), field),
		set: (_target, field, to) => Reflect.set(started(), field, to),
	});
}

/** A local server (test/support/destinations.ts) for the tests of a file or block, closed after them. */
export const useServer = <T extends { close(): Promise<unknown> }>(start: () => Promise<T>): T =>
	useStarted('The server', start, async (server) => server?.close());

/**
 * The ledger of an engine test file or describe block: opened on `backend` before the block's
 * tests, and after them the nodes' cached ledger connections closed and the ledger dropped. Read
 * its fields (`ledger`, `credentials`, and for PostgreSQL `table`, `pool`...) inside tests and
 * hooks. `credentials` are the ledger's, then `extra()`'s (a destination's: read at each use, since
 * a server started in a later beforeAll knows its own only then).
 */
export function useEngineLedger<T extends OpenLedger>(backend: EngineBackend<T>, extra: () => Credentials = () => ({})): T {
	const opened = useStarted(`The ${backend.name} ledger`, () => backend.open(), async (ledger) => {
		await closeAllPostgresLedgers();
		await closeAllRedisLedgers();
		await ledger?.dispose();
	});
	return new Proxy(opened, {
		get: (target, field) => (field === 'credentials' ? { ...target.credentials, ...extra() } : Reflect.get(target, field)),
	});
}

/**
 * A ledger table that the nodes create themselves on their first run (its name is chosen here,
 * nothing is made), for the engine test files that run on it from their first node call; after
 * the file's tests the nodes' cached connections are closed and the table's tables dropped.
 * `pool` is two connections of the test's own on the suite's PostgreSQL.
 */
export function useNodeCreatedTable(prefix: string) {
	const table = uniqueTable(prefix);
	const pool = newPool(2);
	afterAll(async () => {
		await closeAllPostgresLedgers();
		await dropLedgerTables(pool, table);
		await pool.end();
	});
	return { table, pool, credentials: { idempotencyPostgresApi: settingsFromUrl(table) } };
}

/** The lease keeper's timing set to `timing` for the tests of a file or block, and put back after them. */
export function useLeaseKeeping(timing: Partial<typeof LEASE_KEEPING>): void {
	const saved = { ...LEASE_KEEPING };
	beforeAll(() => {
		Object.assign(LEASE_KEEPING, timing);
	});
	afterAll(() => {
		Object.assign(LEASE_KEEPING, saved);
	});
}
