/**
 * The Built-in ledger's refusals, before anything runs: a Node.js without node:sqlite, queue
 * mode, a folder it cannot write, a network file system. None of these needs node:sqlite, so they
 * run on every Node (the ledger itself is tested in test/integration/sqlite.*.test.ts, Node 22.13+).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';

import { LedgerError, LedgerSettingError, LedgerUnavailableError } from '../../lib/ledger/errors';
import { DEFAULT_LEDGER_FILE, fileSystemOf, ledgerFilePath, n8nUserFolder } from '../../lib/ledger/sqlite/connect';
import { loadSqlite, nodeHasSqlite } from '../../lib/ledger/sqlite/driver';
import { builtinSettingsFrom, refuseQueueMode, testBuiltinCredential } from '../../lib/n8n/builtinCredential';

const refusal = (fn: () => unknown): LedgerError & { code?: string } => {
	try {
		fn();
	} catch (error) {
		expect([LedgerUnavailableError, LedgerSettingError].some((kind) => error instanceof kind)).toBe(true);
		return error as LedgerError & { code?: string };
	}
	throw new Error('expected a refusal');
};

describe('Built-in ledger: what it refuses, and says so', () => {
	let dir: string;
	beforeEach(() => {
		dir = mkdtempSync(join(tmpdir(), 'idem-builtin-unit-'));
	});
	afterEach(() => rmSync(dir, { recursive: true, force: true }));

	test('node:sqlite from Node.js 22.13 (and 23.4, 24) on; older ones are named in the refusal', () => {
		expect(['18.20.0', '20.20.2', '22.12.0', '23.3.0'].map((v) => nodeHasSqlite(v))).toEqual([false, false, false, false]);
		expect(['22.13.0', '22.21.1', '23.4.0', '24.0.0', '25.1.0'].map((v) => nodeHasSqlite(v))).toEqual([true, true, true, true, true]);
		const e = refusal(() => loadSqlite('20.20.2'));
		expect(e.message).toBe(
			'The Built-in ledger needs Node.js 22.13 or newer (n8n 1.x images ship Node 22, n8n 2.x Node 24); this n8n runs on Node 20.20.2',
		);
		expect(e.hint).toContain('use the PostgreSQL or Redis ledger');
	});

	test('queue mode is refused: workers do not share a disk', () => {
		const e = refusal(() => refuseQueueMode({ EXECUTIONS_MODE: 'queue' }));
		expect(e.message).toMatch(/^The Built-in ledger is for a single n8n; in queue mode \(EXECUTIONS_MODE=queue\) use PostgreSQL or Redis\. Workers do not share a disk/);
		expect(e).toBeInstanceOf(LedgerSettingError); // a setting, not an outage: "if the ledger is down" options do not apply
		expect(e.hint).toBe('Set "Ledger" to PostgreSQL or Redis: every worker reaches the same one.');
		expect(() => refuseQueueMode({ EXECUTIONS_MODE: 'regular' })).not.toThrow();
		expect(() => refuseQueueMode({})).not.toThrow();
	});

	test('the credential test answers the queue-mode refusal in words', async () => {
		const before = process.env.EXECUTIONS_MODE;
		process.env.EXECUTIONS_MODE = 'queue';
		try {
			const answer = await testBuiltinCredential({});
			expect(answer.status).toBe('Error');
			expect(answer.message).toContain('in queue mode (EXECUTIONS_MODE=queue) use PostgreSQL or Redis');
		} finally {
			if (before === undefined) delete process.env.EXECUTIONS_MODE;
			else process.env.EXECUTIONS_MODE = before;
		}
	});

	test("the file is in n8n's folder: N8N_USER_FOLDER (or the home folder), then .n8n; an absolute path is kept", () => {
		expect(n8nUserFolder({ N8N_USER_FOLDER: '/data' })).toBe('/data/.n8n');
		expect(builtinSettingsFrom({})).toEqual({ file: DEFAULT_LEDGER_FILE, purge: true });
		expect(builtinSettingsFrom({ file: '  mine.sqlite ', sweepExpired: false })).toEqual({ file: 'mine.sqlite', purge: false });
		expect(ledgerFilePath({ folder: join(dir, '.n8n') }, '')).toBe(join(dir, '.n8n', DEFAULT_LEDGER_FILE));
		expect(ledgerFilePath({ file: join(dir, 'elsewhere', 'l.sqlite') }, '')).toBe(join(dir, 'elsewhere', 'l.sqlite'));
	});

	test('a folder that cannot be made or written is refused, and named', () => {
		const notAFolder = join(dir, 'a-file');
		writeFileSync(notAFolder, '');
		const e = refusal(() => ledgerFilePath({ folder: join(notAFolder, '.n8n') }, ''));
		expect(e.message).toBe(`The Built-in ledger cannot write to the folder ${join(notAFolder, '.n8n')}`);
		expect(e.code).toBe('FOLDER_NOT_WRITABLE');
	});

	test('a folder on a network file system is refused; a local one is not (by the longest mount point)', () => {
		const mounts = [
			'/dev/sda1 / ext4 rw,relatime 0 0',
			`server:/export ${dir}/remote nfs4 rw,relatime 0 0`,
			`//nas/share ${dir}/smb\\040share cifs rw 0 0`,
			`/dev/sdb1 ${dir}/remote/local-again xfs rw 0 0`,
		].join('\n');
		expect(fileSystemOf(`${dir}/remote/x`, mounts)).toBe('nfs4');
		expect(fileSystemOf(`${dir}/smb share`, mounts)).toBe('cifs');
		expect(fileSystemOf(`${dir}/remote/local-again/y`, mounts)).toBe('xfs');
		expect(fileSystemOf(`${dir}/remote-not`, mounts)).toBe('ext4');
		for (const folder of [join(dir, 'remote'), join(dir, 'smb share')]) {
			const e = refusal(() => ledgerFilePath({ folder }, mounts));
			expect(e.message).toMatch(/^The Built-in ledger file would be on a network file system \((nfs4|cifs), folder .*\), where file locks between processes cannot be trusted$/);
			expect(e.code).toBe('NETWORK_FILE_SYSTEM');
		}
		expect(ledgerFilePath({ folder: join(dir, 'remote', 'local-again') }, mounts)).toBe(join(dir, 'remote', 'local-again', DEFAULT_LEDGER_FILE));
	});
});
