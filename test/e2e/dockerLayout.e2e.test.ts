/**
 * docs/docker.md's install, proven outside Docker (Docker cannot pull images on our machines): the
 * steps of docker/Dockerfile after its FROM are run here as they are, with `/home/node` standing in
 * a temporary folder, by a user other than root (nobody, through `setpriv`; n8n's image runs as
 * `node`), then the same n8n as the image's (the matrix version) boots on that folder as
 * N8N_USER_FOLDER, as that user, loads the package's nodes and runs the README's quick start
 * (examples/hello-dedupe.json, unchanged): New, then Duplicate.
 *
 * Checked beside the run: the Dockerfile's npm install has every flag n8n's own installer passes
 * (read from this n8n's code), and the doc's install into a running container's volume is the same
 * command. Not covered: Docker itself (the image, its npm, the volume, `docker exec`).
 *
 * Our Node and n8n live under /root, which other users cannot enter: each process run as the other
 * user gets a private mount namespace (`unshare --mount`) where their node_modules folders are
 * bind-mounted under a temporary folder. Nothing outside that process sees the mounts. Without root
 * (or unshare), the test runs everything as the current user and says so.
 */
import { spawnSync, execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { ensureRuntime, nodeOutput, PACKAGE_NAME, repoRoot, startN8n, type N8nInstance, type N8nRuntime } from './support/n8n';
import { ledgerCredentialData, LedgerTables, loadExample, uniqueLedgerTable } from './support/standIns';
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { MATRIX, NEWEST } = require('./support/matrix.js') as { MATRIX: Array<{ version: string }>; NEWEST: string };

const DOCKERFILE = path.join(repoRoot, 'docker', 'Dockerfile');
const DOCKER_DOC = path.join(repoRoot, 'docs', 'docker.md');
/** The image's user folder, which the test's temporary folder stands for. */
const IMAGE_HOME = '/home/node';
/** nobody: a user with no rights of its own, standing for the image's `node`. */
const OTHER_USER = { uid: 65534, gid: 65534 };

const table = uniqueLedgerTable('e2e_docker');
const ledger = new LedgerTables(table);

interface Step {
	op: string;
	args: string;
}

/** The Dockerfile's instructions, continued lines joined, comments left out. */
function dockerfileSteps(text: string): Step[] {
	return text
		.replace(/\\\n/g, ' ')
		.split('\n')
		.map((line) => line.trim())
		.filter((line) => line && !line.startsWith('#'))
		.map((line) => {
			const m = /^([A-Za-z]+)\s+(.*)$/.exec(line);
			if (!m) throw new Error(`docker/Dockerfile: cannot read the line "${line}"`);
			return { op: m[1].toUpperCase(), args: m[2].trim() };
		});
}

/** The arguments of `npm install` in a shell command (up to the next && or the end). */
function npmInstallArgs(command: string): string[] {
	const m = /npm install ([^&]+)/.exec(command);
	if (!m) throw new Error(`no npm install in: ${command}`);
	return m[1].trim().split(/\s+/);
}

/** The flags n8n passes to `npm install` when it installs a community package, read from its code. */
function n8nInstallerFlags(runtime: N8nRuntime): string[] {
	const dist = path.join(runtime.n8nDir, 'node_modules', 'n8n', 'dist');
	const found: string[] = [];
	const walk = (dir: string) => {
		for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
			const abs = path.join(dir, entry.name);
			if (entry.isDirectory()) walk(abs);
			else if (entry.name === 'community-packages.service.js') found.push(abs);
		}
	};
	walk(dist);
	if (found.length !== 1) throw new Error(`expected one community-packages.service.js under ${dist}, found ${found.length}`);
	const source = fs.readFileSync(found[0], 'utf8');
	const quoted = (list: string) => [...list.matchAll(/'([^']+)'/g)].map((f) => f[1]);
	// n8n 2.x writes the flags inline: executeNpmCommand(['install', '--audit=false', ...]).
	const inline = /executeNpmCommand\)?\(\[\s*'install',([^\]]*)\]/.exec(source);
	if (inline) return quoted(inline[1]);
	// n8n 1.x keeps them in two constants: execFile('npm', ['install', ...NPM_COMMON_ARGS, ...NPM_INSTALL_ARGS, --registry]).
	const common = /const NPM_COMMON_ARGS = \[([^\]]*)\]/.exec(source);
	const install = /const NPM_INSTALL_ARGS = \[([^\]]*)\]/.exec(source);
	if (common && install && /\[\s*'install',\s*\.\.\.this\.getNpmInstallArgs\(\)\]/.test(source)) return [...quoted(common[1]), ...quoted(install[1])];
	throw new Error(`no npm install call in ${found[0]}`);
}

/** Whether this process can run commands as OTHER_USER (root, with mount namespaces). */
function canSwitchUser(): boolean {
	if (process.getuid?.() !== 0) return false;
	const probe = spawnSync('unshare', ['--mount', '--propagation', 'private', 'setpriv', `--reuid=${OTHER_USER.uid}`, `--regid=${OTHER_USER.gid}`, '--clear-groups', 'true']);
	return probe.status === 0;
}

describe('e2e: docs/docker.md install (docker/Dockerfile steps) in a real n8n, /home/node layout', () => {
	let runtime: N8nRuntime;
	let n8n: N8nInstance | undefined;
	let scratch = '';
	let home = '';
	let mountPoint = '';
	let switchUser = false;
	let uid = 0;
	let gid = 0;

	/**
	 * The folders of our n8n install that OTHER_USER must reach, each a node_modules folder (the
	 * folders above them may be closed to other users), and where each is mounted for it.
	 */
	function mounts(): Array<[string, string]> {
		const nodeModulesOf = (file: string) => file.slice(0, file.indexOf('/node_modules/') + '/node_modules'.length);
		return [
			[nodeModulesOf(runtime.nodeBin), path.join(mountPoint, 'node', 'node_modules')],
			[path.join(runtime.n8nDir, 'node_modules'), path.join(mountPoint, 'n8n', 'node_modules')],
		];
	}

	/** The command, inside a namespace where our Node and n8n are mounted under mountPoint, as OTHER_USER. */
	function asOtherUser(command: string, args: string[], homeDir: string): { command: string; args: string[] } {
		const mapped = (p: string) => {
			const hit = mounts().find(([from]) => p.startsWith(`${from}/`));
			return hit ? hit[1] + p.slice(hit[0].length) : p;
		};
		const nodeDir = path.dirname(mapped(runtime.nodeBin));
		const [[nodeFrom, nodeTo], [n8nFrom, n8nTo]] = mounts();
		const script = `mount --bind "$1" "$2" && mount --bind "$3" "$4" && export PATH="$5:$PATH" HOME="$6" && shift 6 && exec setpriv --reuid=${uid} --regid=${gid} --clear-groups "$@"`;
		return {
			command: 'unshare',
			args: ['--mount', '--propagation', 'private', 'sh', '-c', script, 'sh', nodeFrom, nodeTo, n8nFrom, n8nTo, nodeDir, homeDir, mapped(command), ...args.map(mapped)],
		};
	}

	/** Runs a Dockerfile RUN line (sh -c), as the image's user would, with /home/node mapped to home. */
	function runStep(shell: string, cwd: string): Promise<void> {
		const plain = { command: 'sh', args: ['-c', shell] };
		const env: NodeJS.ProcessEnv = { ...process.env, HOME: home, PATH: `${path.dirname(runtime.nodeBin)}${path.delimiter}${process.env.PATH ?? ''}` };
		for (const k of Object.keys(env)) if (/^(npm_|NODE_OPTIONS$|JEST_)/.test(k)) delete env[k];
		const { command, args } = switchUser ? asOtherUser(plain.command, plain.args, home) : plain;
		return new Promise((resolve, reject) => {
			execFile(command, args, { cwd, env, maxBuffer: 64 * 1024 * 1024, timeout: 5 * 60_000 }, (error, stdout, stderr) => {
				if (error) reject(new Error(`RUN ${shell} failed: ${error.message}\n${stdout}\n${stderr}`));
				else resolve();
			});
		});
	}

	beforeAll(async () => {
		runtime = await ensureRuntime();
		switchUser = canSwitchUser();
		uid = switchUser ? OTHER_USER.uid : (process.getuid?.() ?? 0);
		gid = switchUser ? OTHER_USER.gid : (process.getgid?.() ?? 0);
		if (!switchUser) console.warn(`[docker layout] n8n and npm run as uid ${uid}: no other user to switch to here (needs root and unshare)`);
		scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'n8n-docker-layout-'));
		fs.chmodSync(scratch, 0o755);
		home = path.join(scratch, 'home-node');
		mountPoint = path.join(scratch, 'n8n-runtime');
		fs.mkdirSync(home);
		for (const [, to] of mounts()) fs.mkdirSync(to, { recursive: true });
		fs.chownSync(home, uid, gid);
	});

	afterAll(async () => {
		if (n8n) console.log(`n8n log: ${n8n.logFile}`);
		await n8n?.stop();
		await ledger.drop();
		if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
	});

	test('the Dockerfile builds FROM the matrix n8n, with every flag of n8n\'s own installer, and the doc installs into a volume with the same command', async () => {
		const steps = dockerfileSteps(fs.readFileSync(DOCKERFILE, 'utf8'));
		const arg = steps.find((s) => s.op === 'ARG' && s.args.startsWith('N8N_VERSION='));
		expect(arg?.args).toBe(`N8N_VERSION=${NEWEST}`);
		expect(MATRIX.map((m) => m.version)).toContain(NEWEST);
		expect(steps.find((s) => s.op === 'FROM')?.args).toBe('n8nio/n8n:${N8N_VERSION}');
		const run = steps.filter((s) => s.op === 'RUN' && s.args.includes('npm install'));
		expect(run).toHaveLength(1);
		const flags = npmInstallArgs(run[0].args);
		expect(flags).toEqual(expect.arrayContaining(n8nInstallerFlags(runtime)));
		// n8n deletes these fields from the package's manifest before it installs; npm's --omit does the same.
		expect(flags).toEqual(expect.arrayContaining(['--omit=dev', '--omit=peer', '--omit=optional']));
		// Way 2 of docs/docker.md runs the Dockerfile's RUN line, word for word, inside the container.
		const doc = fs.readFileSync(DOCKER_DOC, 'utf8');
		const execs = [...doc.matchAll(/docker (?:compose )?exec -u node \S+ sh -c '([^']+)'/g)].map((m) => m[1]);
		expect(execs.length).toBeGreaterThan(0);
		for (const shell of execs.filter((s) => s.includes('npm install'))) expect(shell).toBe(run[0].args);
		expect(execs.some((s) => s.includes('npm install'))).toBe(true);
	});

	test('its steps, as a user other than root, install the package where n8n loads it; that n8n loads the nodes and runs the quick start: New, then Duplicate', async () => {
		// The build context: `npm pack --pack-destination docker/`, as docs/docker.md says (here a temp folder).
		const context = path.join(scratch, 'context');
		fs.mkdirSync(context);
		// --ignore-scripts: `npm run test:e2e` built dist/ already, and the prepack build (which
		// empties dist/ first) would pull it from under a test packing beside this one.
		const pack = spawnSync('npm', ['pack', '--ignore-scripts', '--pack-destination', context], { cwd: repoRoot, encoding: 'utf8' });
		expect(pack.status).toBe(0);

		for (const step of dockerfileSteps(fs.readFileSync(DOCKERFILE, 'utf8'))) {
			const mapHome = (text: string) => text.split(IMAGE_HOME).join(home);
			if (step.op === 'ARG' || step.op === 'FROM') continue; // checked in the test above
			if (step.op === 'USER') {
				expect(step.args).toBe('node'); // the image's user, which OTHER_USER stands for
			} else if (step.op === 'RUN') {
				await runStep(mapHome(step.args), home); // the image's WORKDIR is /home/node
			} else if (step.op === 'COPY') {
				const m = /^--chown=node:node (\S+) (\S+\/)$/.exec(step.args);
				if (!m) throw new Error(`COPY ${step.args}: the test knows only "COPY --chown=node:node <glob> <dir>/"`);
				const pattern = new RegExp(`^${m[1].replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*')}$`);
				const files = fs.readdirSync(context).filter((f) => pattern.test(f));
				expect(files).toHaveLength(1);
				const dest = path.join(mapHome(m[2]), files[0]);
				fs.copyFileSync(path.join(context, files[0]), dest);
				fs.chownSync(dest, uid, gid);
			} else {
				throw new Error(`docker/Dockerfile: the test does not run ${step.op} yet; teach it, so the install stays proven`);
			}
		}

		const nodesDir = path.join(home, '.n8n', 'nodes');
		const installed = path.join(nodesDir, 'node_modules', PACKAGE_NAME);
		expect(fs.statSync(installed).uid).toBe(uid);
		expect(JSON.parse(fs.readFileSync(path.join(installed, 'package.json'), 'utf8')).name).toBe(PACKAGE_NAME);
		// No second n8n-workflow next to n8n's own, and the runtime dependencies are there.
		expect(fs.existsSync(path.join(nodesDir, 'node_modules', 'n8n-workflow'))).toBe(false);
		expect(fs.existsSync(path.join(installed, 'node_modules', 'n8n-workflow'))).toBe(false);
		for (const dep of ['pg', 'ioredis']) expect(fs.existsSync(path.join(installed, 'node_modules', dep))).toBe(true);

		n8n = await startN8n({
			userFolder: home,
			launcher: switchUser ? (command, args) => asOtherUser(command, args, home) : undefined,
		});
		const status = fs.readFileSync(`/proc/${n8n.pid}/status`, 'utf8');
		expect(/^Uid:\s+(\d+)/m.exec(status)?.[1]).toBe(String(uid));

		await n8n.setupOwner();
		await n8n.createApiKey();
		const types = (await n8n.nodeTypes()).filter((t) => t.startsWith(`${PACKAGE_NAME}.`)).sort();
		// The seven nodes (n8n adds guardedSendTool, Guarded Send as an AI Agent's tool).
		expect(types).toEqual(expect.arrayContaining(['dedupeGate', 'guardedSend', 'idempotencyLedger', 'markStepDone', 'promptCache', 'promptCacheChatModel', 'startStep'].map((n) => `${PACKAGE_NAME}.${n}`)));

		await n8n.createCredential({ name: 'Idempotency Ledger', type: 'idempotencyPostgresApi', data: ledgerCredentialData(table) });
		const { id } = await n8n.createWorkflow(loadExample('hello-dedupe.json'));
		const outcomes: string[] = [];
		let work = 0;
		for (let i = 0; i < 2; i++) {
			const { run } = await n8n.executeCli(id);
			const hits = ['New', 'Duplicate', 'In Progress'].filter((_, output) => nodeOutput(run, 'Dedupe Gate', output).length > 0);
			outcomes.push(hits.join('+'));
			work += nodeOutput(run, 'Do the Work', 0).length;
		}
		expect(outcomes).toEqual(['New', 'Duplicate']);
		expect(work).toBe(1);
		// n8n wrote its own files in the user folder as that user too.
		expect(fs.statSync(path.join(home, '.n8n', 'config')).uid).toBe(uid);
	});
});
