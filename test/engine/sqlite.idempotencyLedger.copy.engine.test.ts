/**
 * Idempotency Ledger's "Copy Into Another Ledger" from the Built-in ledger (issue 29's main case)
 * through n8n-core's real engine: the node resolves the Built-in credential and the target's (n8n
 * checks each against its display rules), copies into the real PostgreSQL or Redis, and copies
 * nothing the second time. node:sqlite: runs on Node 22.13+ only (jest.config.js), i.e. in
 * `npm test`'s Node 24 step (scripts/test-vm-engine.js), under n8n's vm expression engine.
 */
import { rmSync } from 'fs';
import { join } from 'path';
import type { INodeParameters } from 'n8n-workflow';

import { closeAllPostgresLedgers } from '../../lib/ledger';
import { closeAllRedisLedgers } from '../../lib/ledger/redis';
import { closeAllSqliteLedgers } from '../../lib/ledger/sqlite/connect';
import { SqliteLedger } from '../../lib/ledger/sqlite/SqliteLedger';
import { expectCopiedIntoRedis, FIRST_COPY, ledgerFixture, SECOND_COPY, seedCopySource, type LedgerFixture } from '../integration/idempotencyLedger.support';
import { deletePrefix, describeIfRedis, newRedisClient, SUITE_REDIS_ACCEPTS_LOSS, uniquePrefix } from '../support/redis';
import { freshSqliteDir } from '../support/sqlite';

const NS = 'copy-builtin-engine';
const copy: INodeParameters = { resource: 'ledger', operation: 'copyInto', backend: 'builtinIntoPostgres' };

let dir: string;
let file: string;
let builtin: { idempotencyBuiltinApi: { file: string; sweepExpired: boolean } };

beforeAll(async () => {
	dir = freshSqliteDir('idem-builtinxfer-');
	file = join(dir, 'ledger.sqlite');
	builtin = { idempotencyBuiltinApi: { file, sweepExpired: false } };
	// The source, as the Built-in ledger of the n8n that runs the copy holds it.
	const source = new SqliteLedger({ file });
	try {
		await seedCopySource(source, NS);
	} finally {
		await source.close();
	}
});

afterAll(async () => {
	await closeAllSqliteLedgers();
	await closeAllPostgresLedgers();
	await closeAllRedisLedgers();
	rmSync(dir, { recursive: true, force: true });
});

describe('Idempotency Ledger: Copy Built-in Into PostgreSQL', () => {
	let f: LedgerFixture;
	beforeAll(async () => {
		f = await ledgerFixture('copybi');
	});
	afterAll(async () => f && (await f.dispose()));

	test('one item with the counts, every row in the PostgreSQL table; the second run copies nothing', async () => {
		const credentials = { ...builtin, ...f.credentials };
		const first = f.out(await f.run([{}, {}], copy, { credentials }));
		expect(first).toHaveLength(1);
		expect(first[0].json).toMatchObject({ from: 'Built-in', into: 'PostgreSQL', ...FIRST_COPY });
		expect(await f.count(`SELECT count(*) AS n FROM {t} WHERE namespace = '${NS}'`)).toBe(3);
		expect((await f.ledger.get(NS, 'evt_done'))[0]).toMatchObject({ status: 'completed', externalId: 'msg_1', result: { ok: true } });
		expect((await f.ledger.get(NS, 'evt_review'))[0]).toMatchObject({ status: 'needs_review' });
		expect((await f.ledger.getCheckpoint(NS, 'cursor'))?.value).toBe('42');
		const second = f.out(await f.run([{}], copy, { credentials }));
		expect(second[0].json).toMatchObject(SECOND_COPY);
	});

	test('no Built-in credential: a clear item error naming it (continue on fail)', async () => {
		const [item] = f.out(await f.run([{ id: 1 }], copy, { credentials: f.credentials, continueOnFail: true }));
		expect(item.json.error).toBe('No Built-in ledger credential is chosen for the source of the copy');
		expect(item.json.details).toContain('Idempotency Ledger (Built-in) API');
	});

	test('in queue mode the Built-in source is refused before anything is copied', async () => {
		const before = process.env.EXECUTIONS_MODE;
		process.env.EXECUTIONS_MODE = 'queue';
		try {
			const [item] = f.out(await f.run([{}], copy, { credentials: { ...builtin, ...f.credentials }, continueOnFail: true }));
			// A setting to change, not an outage.
			expect(String(item.json.error)).toMatch(/^The source ledger \(Built-in\): The Built-in ledger is for a single n8n; in queue mode/);
		} finally {
			if (before === undefined) delete process.env.EXECUTIONS_MODE;
			else process.env.EXECUTIONS_MODE = before;
		}
	});
});

describeIfRedis('Idempotency Ledger copy Built-in Into Redis (engine)')('Idempotency Ledger: Copy Built-in Into Redis', () => {
	let f: LedgerFixture;
	const prefix = uniquePrefix('copybi');
	const client = newRedisClient();
	const redis = { host: '127.0.0.1', port: 6379, prefix, ...SUITE_REDIS_ACCEPTS_LOSS };
	beforeAll(async () => {
		f = await ledgerFixture('copybir');
	});
	afterAll(async () => {
		await deletePrefix(client, prefix);
		client.disconnect();
		await f?.dispose();
	});

	test('no Redis credential: the error names the target and its credential', async () => {
		const [item] = f.out(await f.run([{}], { ...copy, backend: 'builtinIntoRedis' }, { credentials: builtin, continueOnFail: true }));
		expect(item.json.error).toBe('No Redis ledger credential is chosen for the target of the copy');
		expect(item.json.details).toContain('Idempotency Ledger (Redis) API');
	});

	test('one item with the counts, the rows in Redis; the second run copies nothing', async () => {
		const credentials = { ...builtin, idempotencyRedisApi: redis };
		const first = f.out(await f.run([{}], { ...copy, backend: 'builtinIntoRedis' }, { credentials }));
		expect(first[0].json).toMatchObject({ from: 'Built-in', into: 'Redis', rowsCopied: 3, checkpointsCopied: 1, counterDaysCopied: 1 });
		await expectCopiedIntoRedis(prefix, NS);
		const second = f.out(await f.run([{}], { ...copy, backend: 'builtinIntoRedis' }, { credentials }));
		expect(second[0].json).toMatchObject(SECOND_COPY);
	});
});
