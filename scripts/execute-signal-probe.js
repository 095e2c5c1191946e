#!/usr/bin/env node
/**
 * Counts how often `n8n execute` ends by a signal (SIGSEGV, SIGBUS, SIGABRT...) after it printed a
 * complete run (issue 32 item 8), with and without this package, so one can tell whether the
 * package takes part.
 *
 *   node scripts/execute-signal-probe.js --arm package --runs 20
 *   node scripts/execute-signal-probe.js --arm plain --runs 20 --version 1.123.81
 *
 * Arms (the README's quick start, examples/hello-dedupe.json, as test/e2e/quickStart.e2e.test.ts runs it):
 *   package  the package installed the user's way (as test/e2e/support/n8n.ts installPackage does), the
 *            flow as it is (Manual Trigger, Order, Dedupe Gate on a PostgreSQL ledger with a 20 s
 *            lease, Do the Work)
 *   package-new  as package, with the ledger's rows deleted before each run, so that every run is New
 *            and "Do the Work" (and its expression) runs each time, as in the arms below
 *   plain    the package installed, the Dedupe Gate replaced by n8n's own No Operation node, so none
 *            of the package's code runs in the execution (n8n still loads the package at boot)
 *   none     the package not installed, the same flow as `plain`
 *
 * One fresh n8n database and user folder per invocation; the credential and workflow go in with
 * `n8n import:credentials` / `n8n import:workflow`; then `n8n execute --id=<id> --rawOutput`, run
 * `--runs` times one after another (never two n8n processes at once; every n8n runs under
 * `nice -n 19`), with its stdout in a file (as the harness does) and `ulimit -c unlimited` in a
 * directory of its own. A run a signal ended leaves its core dump there (with the kernel's
 * core_pattern `core`); the first `--backtraces` of them (default 1) get a `gdb -batch` backtrace of
 * every thread, written next to the core. Cores are deleted unless --keep-cores.
 *
 * --dispose-engine-before-exit tries the fix n8n itself could make: a file preloaded with
 * NODE_OPTIONS=--require makes `process.exit` in the `execute` process first await
 * Expression.disposeExpressionEngine() (n8n-workflow, n8n's own copy), which n8n's
 * BaseCommand.exitSuccessFully does and BaseCommand.finally, the path `n8n execute` ends by, does not;
 * --exit-delay-ms N then waits N ms more before exiting (isolated-vm deletes isolates on threads of
 * its own, after dispose() has returned).
 *
 * Prints one line per run and a summary; with --json <file>, appends the summary as one JSON line.
 * Options: --runs N (default 20), --arm package|package-new|plain|none, --version x.y.z (N8N_VERSION, default
 * 2.41.1, installed by scripts/n8n-runtime.sh), --engine vm|legacy (N8N_EXPRESSION_ENGINE, unset by
 * default), --out <dir> (kept; default a temp dir), --keep-cores, --backtraces N, --json <file>,
 * --dispose-engine-before-exit, --exit-delay-ms N.
 * Needs the built package (npm run build), PostgreSQL (DATABASE_URL or postgres://postgres@127.0.0.1:5432),
 * the `test` database for the ledger, and gdb for backtraces.
 */
const { execFileSync, spawn, spawnSync } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Client } = require('pg');

const { serverPort: freePort } = require('../test/support/ports');
require('../test/support/ts-require');
/** The run JSON in `n8n execute --rawOutput` stdout. */
const { dbEnv, parseRawOutput } = require('../test/e2e/support/n8n');

const root = path.resolve(__dirname, '..');
const PACKAGE_NAME = 'n8n-nodes-idempotency';
const CRASH_SIGNALS = ['SIGSEGV', 'SIGBUS', 'SIGABRT', 'SIGILL', 'SIGFPE', 'SIGTRAP'];

function parseArgs(argv) {
	const opts = { runs: 20, arm: 'package', version: process.env.N8N_VERSION || '2.41.1', engine: undefined, out: undefined, keepCores: false, backtraces: 1, json: undefined, disposeEngine: false, exitDelayMs: 0 };
	for (let i = 0; i < argv.length; i++) {
		const a = argv[i];
		const next = () => {
			if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
			return argv[++i];
		};
		if (a === '--runs') opts.runs = Number(next());
		else if (a === '--arm') opts.arm = next();
		else if (a === '--version') opts.version = next();
		else if (a === '--engine') opts.engine = next();
		else if (a === '--out') opts.out = next();
		else if (a === '--keep-cores') opts.keepCores = true;
		else if (a === '--dispose-engine-before-exit') opts.disposeEngine = true;
		else if (a === '--exit-delay-ms') opts.exitDelayMs = Number(next());
		else if (a === '--backtraces') opts.backtraces = Number(next());
		else if (a === '--json') opts.json = next();
		else throw new Error(`unknown option ${a} (see the comment at the top of ${__filename})`);
	}
	if (!['package', 'package-new', 'plain', 'none'].includes(opts.arm)) throw new Error(`--arm must be package, package-new, plain or none, got ${opts.arm}`);
	if (!(opts.runs >= 1)) throw new Error('--runs must be a positive number');
	return opts;
}

function runtime(version) {
	const printed = execFileSync('bash', [path.join(root, 'scripts', 'n8n-runtime.sh')], {
		env: { ...process.env, N8N_VERSION: version },
		encoding: 'utf8',
		stdio: ['ignore', 'pipe', 'inherit'],
	});
	const vars = Object.fromEntries(printed.split('\n').map((l) => /^(N8N_RUNTIME_[A-Z0-9_]+)=(.*)$/.exec(l)).filter(Boolean).map((m) => [m[1], m[2]]));
	if (!vars.N8N_RUNTIME_NODE || !vars.N8N_RUNTIME_N8N) throw new Error(`scripts/n8n-runtime.sh printed no paths:\n${printed}`);
	return { node: vars.N8N_RUNTIME_NODE, n8n: vars.N8N_RUNTIME_N8N, version: vars.N8N_RUNTIME_VERSION };
}

const serverUrl = (database) => {
	const u = new URL(process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres');
	u.pathname = `/${database}`;
	return u;
};

async function sql(database, text) {
	const client = new Client({ connectionString: serverUrl(database).toString(), connectionTimeoutMillis: 5000 });
	await client.connect();
	try {
		return await client.query(text);
	} finally {
		await client.end().catch(() => undefined);
	}
}

/** What test/e2e/support/n8n.ts installPackage does: npm pack, untar, runtime dependencies only. */
function installPackage(userFolder, env) {
	const packDir = fs.mkdtempSync(path.join(os.tmpdir(), 'probe-pack-'));
	try {
		const [{ filename }] = JSON.parse(execFileSync('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', packDir], { cwd: root, env, encoding: 'utf8' }));
		const dir = path.join(userFolder, '.n8n', 'nodes', 'node_modules', PACKAGE_NAME);
		fs.mkdirSync(dir, { recursive: true });
		execFileSync('tar', ['-xzf', path.join(packDir, path.basename(filename)), '-C', dir, '--strip-components=1']);
		const manifest = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
		for (const field of ['devDependencies', 'peerDependencies', 'optionalDependencies']) delete manifest[field];
		fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify(manifest, null, 2));
		execFileSync('npm', ['install', '--omit=dev', '--audit=false', '--fund=false', '--bin-links=false', '--install-strategy=shallow', '--ignore-scripts=true', '--package-lock=false'], { cwd: dir, env, stdio: ['ignore', 'ignore', 'inherit'] });
		fs.writeFileSync(
			path.join(userFolder, '.n8n', 'nodes', 'package.json'),
			JSON.stringify({ name: 'installed-nodes', private: true, dependencies: { [PACKAGE_NAME]: manifest.version } }, null, 2),
		);
	} finally {
		fs.rmSync(packDir, { recursive: true, force: true });
	}
}

/** examples/hello-dedupe.json for the arm: the gate with a 20 s lease (as the quick-start test), or a No Operation node in its place. */
function workflowFor(arm, credential) {
	const wf = JSON.parse(fs.readFileSync(path.join(root, 'examples', 'hello-dedupe.json'), 'utf8'));
	const gate = wf.nodes.find((n) => n.name === 'Dedupe Gate');
	if (arm.startsWith('package')) {
		gate.parameters = { options: { lease: 20, leaseUnit: 'seconds' } };
		gate.credentials = { idempotencyPostgresApi: { id: credential.id, name: credential.name } };
	} else {
		Object.assign(gate, { type: 'n8n-nodes-base.noOp', typeVersion: 1, parameters: {} });
		delete gate.credentials;
		wf.connections['Dedupe Gate'].main = [wf.connections['Dedupe Gate'].main[0]];
	}
	return { id: 'probeWorkflow001', active: false, ...wf, name: `hello-dedupe (${arm} arm)` };
}


/** Runs n8n with `args` under nice -n 19 and ulimit -c unlimited in `cwd`; stdout to a file. */
function runN8n(rt, args, env, cwd, timeoutMs) {
	fs.mkdirSync(cwd, { recursive: true });
	const stdoutFile = path.join(cwd, 'stdout');
	const fd = fs.openSync(stdoutFile, 'w');
	const started = Date.now();
	return new Promise((resolve) => {
		const child = spawn('bash', ['-c', 'ulimit -c unlimited; exec nice -n 19 "$@"', 'n8n', rt.node, rt.n8n, ...args], {
			cwd,
			env,
			detached: true,
			stdio: ['ignore', fd, 'pipe'],
		});
		const err = [];
		child.stderr.on('data', (c) => err.push(c));
		const killAll = (signal) => {
			try {
				process.kill(-child.pid, signal);
			} catch {
				/* gone */
			}
		};
		const timer = setTimeout(() => killAll('SIGKILL'), timeoutMs);
		child.once('close', (code, signal) => {
			clearTimeout(timer);
			killAll('SIGKILL'); // a task runner left behind
			fs.closeSync(fd);
			resolve({ code, signal, ms: Date.now() - started, stdout: fs.readFileSync(stdoutFile, 'utf8'), stderr: Buffer.concat(err).toString('utf8') });
		});
	});
}

function backtrace(rt, dir) {
	const core = fs.readdirSync(dir).find((f) => /^core(\.\d+)?$/.test(f));
	if (!core) return { core: null, bt: null };
	const corePath = path.join(dir, core);
	const gdb = spawnSync('nice', ['-n', '19', 'gdb', '-batch', '-ex', 'info sharedlibrary', '-ex', 'bt 40', '-ex', 'thread apply all bt 25', '-ex', 'thread apply all bt -8', rt.node, corePath], {
		encoding: 'utf8',
		maxBuffer: 64 * 1024 * 1024,
		timeout: 10 * 60_000,
	});
	const bt = `${gdb.stdout}\n${gdb.stderr}`;
	fs.writeFileSync(path.join(dir, 'backtrace.txt'), bt);
	return { core: corePath, bt };
}

async function main() {
	const opts = parseArgs(process.argv.slice(2));
	if (!fs.existsSync(path.join(root, 'dist', 'nodes'))) throw new Error('The package is not built: run `npm run build` first.');
	const rt = runtime(opts.version);
	const major = Number(rt.version.split('.')[0]);
	const tag = crypto.randomBytes(4).toString('hex');
	const out = opts.out ? path.resolve(opts.out) : fs.mkdtempSync(path.join(os.tmpdir(), `execute-probe-${opts.arm}-`));
	fs.mkdirSync(out, { recursive: true });
	const userFolder = path.join(out, 'home');
	fs.mkdirSync(userFolder, { recursive: true });
	const database = `n8n_probe_${tag}`;
	const table = `probe_ledger_${tag}`;

	const env = {};
	for (const [k, v] of Object.entries(process.env)) {
		if (/^(N8N_|DB_|EXECUTIONS_|QUEUE_|WEBHOOK_URL$|NODE_ENV$|NODE_OPTIONS$|NODE_PATH$|JEST_|TS_JEST)/.test(k)) continue;
		env[k] = v;
	}
	env.PATH = `${path.dirname(rt.node)}${path.delimiter}${process.env.PATH ?? ''}`;
	Object.assign(env, dbEnv(database), {
		N8N_USER_FOLDER: userFolder,
		N8N_LISTEN_ADDRESS: '127.0.0.1',
		N8N_ENCRYPTION_KEY: crypto.randomBytes(24).toString('hex'),
		N8N_ENFORCE_SETTINGS_FILE_PERMISSIONS: 'false',
		N8N_DIAGNOSTICS_ENABLED: 'false',
		N8N_VERSION_NOTIFICATIONS_ENABLED: 'false',
		N8N_PERSONALIZATION_ENABLED: 'false',
		N8N_TEMPLATES_ENABLED: 'false',
		N8N_HIRING_BANNER_ENABLED: 'false',
		N8N_PYTHON_ENABLED: 'false',
		N8N_GRACEFUL_SHUTDOWN_TIMEOUT: '15',
		N8N_LOG_OUTPUT: 'console',
	});
	if (major >= 2) env.N8N_DISABLED_MODULES = 'mcp-registry';
	if (opts.engine) env.N8N_EXPRESSION_ENGINE = opts.engine;
	if (opts.disposeEngine) {
		const preload = path.join(out, 'dispose-engine-before-exit.js');
		const n8nDir = path.dirname(path.dirname(rt.n8n));
		fs.writeFileSync(
			preload,
			[
				`if (process.argv.includes('execute')) {`,
				`	const { Expression } = require(require.resolve('n8n-workflow', { paths: [${JSON.stringify(n8nDir)}] }));`,
				`	const exit = process.exit.bind(process);`,
				`	let exiting = false;`,
				`	process.exit = (code) => {`,
				`		if (exiting) return;`,
				`		exiting = true;`,
				`		Promise.resolve()`,
				`			.then(() => Expression.disposeExpressionEngine())`,
				`			.catch(() => undefined)`,
				`			.then(() => new Promise((resolve) => setTimeout(resolve, ${opts.exitDelayMs})))`,
				`			.finally(() => exit(code));`,
				`	};`,
				`}`,
				'',
			].join('\n'),
		);
		env.NODE_OPTIONS = `--require ${preload}`;
	}
	const withPorts = async () => ({ ...env, N8N_PORT: String(await freePort()), N8N_RUNNERS_BROKER_PORT: String(await freePort()) });

	console.log(`[probe] n8n ${rt.version} on ${execFileSync(rt.node, ['-v'], { encoding: 'utf8' }).trim()}, arm ${opts.arm}, ${opts.runs} runs, engine ${opts.engine ?? '(default)'}${opts.disposeEngine ? `, engine disposed ${opts.exitDelayMs} ms before exit` : ''}, in ${out}`);
	await sql('postgres', `CREATE DATABASE "${database}"`);
	const results = [];
	try {
		if (opts.arm !== 'none') installPackage(userFolder, env);
		const credential = { id: 'probeCredential1', name: 'Idempotency Ledger', type: 'idempotencyPostgresApi' };
		const ledgerUrl = serverUrl('test');
		credential.data = {
			host: ledgerUrl.hostname,
			port: Number(ledgerUrl.port || 5432),
			database: 'test',
			user: decodeURIComponent(ledgerUrl.username || 'postgres'),
			password: decodeURIComponent(ledgerUrl.password),
			ssl: 'disable',
			schema: 'public',
			table,
			poolSize: 5,
		};
		const files = path.join(out, 'import');
		fs.mkdirSync(files, { recursive: true });
		fs.writeFileSync(path.join(files, 'credentials.json'), JSON.stringify([credential]));
		const workflow = workflowFor(opts.arm, credential);
		fs.writeFileSync(path.join(files, 'workflow.json'), JSON.stringify(workflow));
		for (const args of [['import:credentials', `--input=${path.join(files, 'credentials.json')}`], ['import:workflow', `--input=${path.join(files, 'workflow.json')}`]]) {
			if (args[0] === 'import:credentials' && !opts.arm.startsWith('package')) continue;
			const r = await runN8n(rt, args, await withPorts(), path.join(out, args[0].replace(':', '-')), 10 * 60_000);
			if (r.code !== 0) throw new Error(`n8n ${args.join(' ')} failed (${r.signal ?? r.code}):\n${r.stdout.slice(-3000)}\n${r.stderr.slice(-3000)}`);
		}

		let backtraces = 0;
		for (let i = 1; i <= opts.runs; i++) {
			const dir = path.join(out, `run-${String(i).padStart(3, '0')}`);
			if (opts.arm === 'package-new' && i > 1) await sql('test', `DELETE FROM public."${table}"`);
			const r = await runN8n(rt, ['execute', `--id=${workflow.id}`, '--rawOutput'], await withPorts(), dir, 10 * 60_000);
			const run = parseRawOutput(r.stdout);
			const complete = run?.finished === true && run?.status === 'success';
			const gate = run?.data?.resultData?.runData?.['Dedupe Gate']?.[0]?.data?.main ?? [];
			const outcome = opts.arm.startsWith('package') ? (['New', 'Duplicate', 'In Progress'].find((_, o) => (gate[o] ?? []).length > 0) ?? '-') : '-';
			let kind;
			if (r.signal) kind = complete ? 'signal after a complete run' : 'signal before a complete run';
			else if (r.code !== 0) kind = `exit ${r.code}`;
			else kind = complete ? 'ok' : 'exit 0 without a complete run';
			const entry = { run: i, code: r.code, signal: r.signal, complete, kind, outcome, ms: r.ms };
			if (r.signal && CRASH_SIGNALS.includes(r.signal) && backtraces < opts.backtraces) {
				backtraces++;
				const { core, bt } = backtrace(rt, dir);
				entry.core = core;
				entry.backtrace = bt ? path.join(dir, 'backtrace.txt') : null;
			}
			if (!opts.keepCores) for (const f of fs.readdirSync(dir)) if (/^core(\.\d+)?$/.test(f)) fs.rmSync(path.join(dir, f), { force: true });
			if (r.signal || r.code !== 0 || !complete) fs.writeFileSync(path.join(dir, 'stderr'), r.stderr);
			else fs.rmSync(dir, { recursive: true, force: true });
			results.push(entry);
			console.log(`[probe] run ${i}/${opts.runs}: ${kind}${r.signal ? ` (${r.signal})` : ''}, gate ${outcome}, ${Math.round(r.ms / 100) / 10} s${entry.backtrace ? `, backtrace ${entry.backtrace}` : ''}`);
		}
	} finally {
		await sql('postgres', `DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`).catch(() => undefined);
		// The ledger's table and the ones it makes next to it (<table>_counters, _audit, ...).
		const { rows } = await sql('test', `SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE '${table}%'`).catch(() => ({ rows: [] }));
		for (const { tablename } of rows) await sql('test', `DROP TABLE IF EXISTS public."${tablename}"`).catch(() => undefined);
		if (!opts.out) fs.rmSync(userFolder, { recursive: true, force: true });
	}
	const count = (pred) => results.filter(pred).length;
	const summary = {
		n8n: rt.version,
		arm: opts.arm,
		engine: opts.engine ?? null,
		disposeEngineBeforeExit: opts.disposeEngine,
		exitDelayMs: opts.disposeEngine ? opts.exitDelayMs : null,
		runs: results.length,
		ok: count((r) => r.kind === 'ok'),
		signalAfterRun: count((r) => r.kind === 'signal after a complete run'),
		signalBeforeRun: count((r) => r.kind === 'signal before a complete run'),
		otherFailures: count((r) => r.kind.startsWith('exit')),
		signals: Object.fromEntries([...new Set(results.filter((r) => r.signal).map((r) => r.signal))].map((s) => [s, count((r) => r.signal === s)])),
		backtraces: results.filter((r) => r.backtrace).map((r) => r.backtrace),
		medianMs: results.map((r) => r.ms).sort((a, b) => a - b)[Math.floor(results.length / 2)],
		out,
		at: new Date().toISOString(),
	};
	console.log(`[probe] summary ${JSON.stringify(summary)}`);
	if (opts.json) fs.appendFileSync(opts.json, `${JSON.stringify(summary)}\n`);
}

main().catch((e) => {
	console.error(`[probe] ${e.stack || e}`);
	process.exit(1);
});
