/**
 * A real IMAP server for tests: a throwaway Dovecot (Debian's `dovecot-imapd`) of the test's own.
 *
 * - Unprivileged: run as the current user, or as `nobody` when the tests run as root (Dovecot
 *   refuses mail access for uid 0), with its own config, base and state directories under one temp
 *   directory, and no chroot, so it needs no system setup and touches nothing outside that directory.
 * - Listens on 127.0.0.1 on a free port, IMAP only, no TLS, plaintext login allowed (loopback only).
 * - Users come from passwd-files (one per user), mail is Maildir under the temp directory.
 * - A mailbox named `Sent` carries the `\Sent` special-use flag (RFC 6154) wherever it exists; the
 *   first user's is created at start, so that user's mailbox looks like a provider's.
 *
 * `describeIfDovecot` follows the Redis rule (test/support/redis.ts): without Dovecot the suite is
 * skipped with a `SKIPPED <what>: <why>` line, except under CI=true, where that is a failure.
 * .ci/run installs `dovecot-imapd`.
 */
import { execFileSync, spawn, type ChildProcess } from 'child_process';
import fs from 'fs';
import { createConnection } from 'net';
import os from 'os';
import path from 'path';

import { ImapFlow } from 'imapflow';

import { serverPort } from './ports';
import { describeIfAvailable } from './redis';

export interface SentMessage {
	uid: number;
	messageId: string | null;
	subject: string | null;
	internalDate: Date | null;
	raw: string;
}

export interface ImapTestServer {
	host: string;
	port: number;
	/** The first user, whose mailbox has a Sent folder. */
	user: string;
	password: string;
	/** Data for n8n's `imap` credential pointing at this server as the first user. */
	credential: { host: string; port: number; secure: boolean; user: string; password: string; allowUnauthorizedCerts: boolean };
	/** What the user's `Sent` folder holds now, oldest first. */
	sentMessages(user?: string): Promise<SentMessage[]>;
	/** Files a raw RFC 822 message into a folder (the Sent folder by default) with IMAP APPEND. */
	append(raw: string | Buffer, options?: { user?: string; folder?: string; date?: Date }): Promise<number | null>;
	/** Adds a user and creates its folders (none by default); a folder named `Sent` gets `\Sent`. */
	addUser(user: string, password: string, folders?: string[]): Promise<void>;
	/** A logged-in imapflow client for a user; log it out when done. */
	client(user?: string): Promise<ImapFlow>;
	/** Dovecot's log, for a failing test's message. */
	log(): string;
	close(): Promise<void>;
}

/** The dovecot binary: DOVECOT, else /usr/sbin/dovecot, else the PATH. */
function dovecotBinary(): string | null {
	const candidates = [process.env.DOVECOT, '/usr/sbin/dovecot', '/usr/local/sbin/dovecot'].filter(Boolean) as string[];
	for (const c of candidates) if (fs.existsSync(c)) return c;
	try {
		return execFileSync('sh', ['-c', 'command -v dovecot'], { encoding: 'utf8' }).trim() || null;
	} catch {
		return null;
	}
}

export function dovecotAvailable(): { ok: boolean; reason: string } {
	const bin = dovecotBinary();
	if (bin) return { ok: true, reason: '' };
	return { ok: false, reason: 'Dovecot is not installed (apt-get install dovecot-imapd; .ci/run does)' };
}

/** `describe` when Dovecot is installed (see describeIfAvailable). */
export function describeIfDovecot(what: string, probe = dovecotAvailable): jest.Describe {
	const { ok, reason } = probe();
	return describeIfAvailable(what, 'Dovecot', ok ? null : reason);
}

/** Who Dovecot runs as: this user, or nobody when this is root. */
function runAs(): { uid: number; gid: number; user: string; group: string } {
	const uid = process.getuid?.() ?? 0;
	if (uid !== 0) {
		return { uid, gid: process.getgid?.() ?? 0, user: os.userInfo().username, group: execFileSync('id', ['-gn'], { encoding: 'utf8' }).trim() };
	}
	const user = 'nobody';
	return {
		uid: Number(execFileSync('id', ['-u', user], { encoding: 'utf8' }).trim()),
		gid: Number(execFileSync('id', ['-g', user], { encoding: 'utf8' }).trim()),
		user,
		group: execFileSync('id', ['-gn', user], { encoding: 'utf8' }).trim(),
	};
}

/** Resolves once something on the port sends an IMAP greeting. */
function greeted(port: number): Promise<boolean> {
	return new Promise((resolve) => {
		const socket = createConnection({ host: '127.0.0.1', port });
		const done = (ok: boolean) => {
			socket.destroy();
			resolve(ok);
		};
		socket.setTimeout(1_000, () => done(false));
		socket.once('data', (d) => done(String(d).startsWith('* OK')));
		socket.once('error', () => done(false));
	});
}

function config(dir: string, port: number, who: ReturnType<typeof runAs>): string {
	return `# A throwaway Dovecot for tests (test/support/imapServer.ts)
instance_name = idem-test-${path.basename(dir)}
base_dir = ${dir}/run
state_dir = ${dir}/state
log_path = ${dir}/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
auth_failure_delay = 0
default_internal_user = ${who.user}
default_internal_group = ${who.group}
default_login_user = ${who.user}
first_valid_uid = ${who.uid}
last_valid_uid = ${who.uid}
first_valid_gid = ${who.gid}
last_valid_gid = ${who.gid}
mail_location = maildir:${dir}/mail/%u
passdb {
  driver = passwd-file
  args = scheme=PLAIN username_format=%u ${dir}/users/%u
}
userdb {
  driver = static
  args = uid=${who.uid} gid=${who.gid} home=${dir}/home/%u
}
service imap-login {
  chroot =
  inet_listener imap {
    address = 127.0.0.1
    port = ${port}
  }
  inet_listener imaps {
    port = 0
  }
}
service anvil {
  chroot =
}
service auth {
  user = ${who.user}
}
service auth-worker {
  user = ${who.user}
}
namespace inbox {
  inbox = yes
  separator = /
  mailbox Sent {
    special_use = \\Sent
  }
}
`;
}

/** Starts a throwaway Dovecot with one user (`mailer`/`secret` unless given) whose mailbox has a Sent folder. */
export async function imapServer(options: { user?: string; password?: string } = {}): Promise<ImapTestServer> {
	const bin = dovecotBinary();
	if (!bin) throw new Error(dovecotAvailable().reason);
	const who = runAs();
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'idem-dovecot-'));
	for (const sub of ['run', 'state', 'mail', 'home', 'users']) fs.mkdirSync(path.join(dir, sub));
	const user = options.user ?? 'mailer';
	const password = options.password ?? 'secret';
	// One passwd-file per user (Dovecot opens users/<name> on a login): a user added later is a new
	// file, not a change to one Dovecot may have read within the same second.
	const writeUser = (name: string, pass: string) => {
		if (!/^[A-Za-z0-9._-]+$/.test(name)) throw new Error(`"${name}" is not a plain user name`);
		const file = path.join(dir, 'users', name);
		fs.writeFileSync(file, `${name}:{PLAIN}${pass}::::::\n`);
		if (process.getuid?.() === 0) fs.chownSync(file, who.uid, who.gid);
	};
	writeUser(user, password);
	const logPath = path.join(dir, 'dovecot.log');
	const log = () => (fs.existsSync(logPath) ? fs.readFileSync(logPath, 'utf8') : '');

	let child: ChildProcess | null = null;
	let port = 0;
	let lastProblem = '';
	for (let attempt = 0; attempt < 3 && !child; attempt++) {
		port = await serverPort();
		fs.writeFileSync(path.join(dir, 'dovecot.conf'), config(dir, port, who));
		if (process.getuid?.() === 0) execFileSync('chown', ['-R', `${who.uid}:${who.gid}`, dir]);
		let output = '';
		const started = spawn(bin, ['-F', '-c', path.join(dir, 'dovecot.conf')], { uid: who.uid, gid: who.gid, stdio: ['ignore', 'pipe', 'pipe'] });
		started.stdout!.on('data', (d) => (output += String(d)));
		started.stderr!.on('data', (d) => (output += String(d)));
		let exited = false;
		started.once('exit', () => (exited = true));
		const until = Date.now() + 10_000;
		while (!exited && Date.now() < until && !(await greeted(port))) await new Promise((r) => setTimeout(r, 50));
		if (!exited && Date.now() < until) {
			child = started;
			break;
		}
		started.kill('SIGKILL');
		lastProblem = `${output}\n${log()}`.trim();
	}
	if (!child) {
		fs.rmSync(dir, { recursive: true, force: true });
		throw new Error(`Dovecot did not start: ${lastProblem.slice(-2000)}`);
	}
	const running = child;
	const stopOnExit = () => running.kill('SIGKILL');
	process.once('exit', stopOnExit);

	const passwords = new Map([[user, password]]);
	const client = async (name = user): Promise<ImapFlow> => {
		const c = new ImapFlow({
			host: '127.0.0.1',
			port,
			secure: false,
			auth: { user: name, pass: passwords.get(name) ?? '' },
			logger: false,
			disableAutoIdle: true,
			connectionTimeout: 5_000,
			greetingTimeout: 5_000,
		});
		c.on('error', () => undefined);
		await c.connect();
		return c;
	};
	const withClient = async <T>(name: string, fn: (c: ImapFlow) => Promise<T>): Promise<T> => {
		const c = await client(name);
		try {
			return await fn(c);
		} finally {
			await c.logout().catch(() => c.close());
		}
	};
	const addUser = async (name: string, pass: string, folders: string[] = []) => {
		writeUser(name, pass);
		passwords.set(name, pass);
		await withClient(name, async (c) => {
			for (const folder of folders) await c.mailboxCreate(folder);
		});
	};
	// The first user's Sent folder, with \Sent from the config.
	await withClient(user, (c) => c.mailboxCreate('Sent'));

	return {
		host: '127.0.0.1',
		port,
		user,
		password,
		credential: { host: '127.0.0.1', port, secure: false, user, password, allowUnauthorizedCerts: false },
		addUser,
		client,
		log,
		async append(raw, opts = {}) {
			return withClient(opts.user ?? user, async (c) => {
				const done = await c.append(opts.folder ?? 'Sent', raw, ['\\Seen'], opts.date);
				return done ? (done.uid ?? null) : null;
			});
		},
		async sentMessages(name = user) {
			return withClient(name, async (c) => {
				const box = await c.mailboxOpen('Sent', { readOnly: true });
				if (box.exists === 0) return [];
				const messages = await c.fetchAll('1:*', { uid: true, envelope: true, internalDate: true, source: true });
				return messages.map((m) => ({
					uid: m.uid,
					messageId: m.envelope?.messageId ?? null,
					subject: m.envelope?.subject ?? null,
					internalDate: m.internalDate ? new Date(m.internalDate) : null,
					raw: m.source ? m.source.toString('utf8') : '',
				}));
			});
		},
		async close() {
			process.removeListener('exit', stopOnExit);
			if (running.exitCode === null && running.signalCode === null) {
				const gone = new Promise((resolve) => running.once('exit', resolve));
				running.kill('SIGTERM');
				const timer = setTimeout(() => running.kill('SIGKILL'), 5_000);
				await gone;
				clearTimeout(timer);
			}
			fs.rmSync(dir, { recursive: true, force: true });
		},
	};
}
