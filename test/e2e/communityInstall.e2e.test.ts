/**
 * The packed tarball installs the way n8n's Settings → Community Nodes installs a package, and the
 * way the README's checkout path does, without n8n-workflow (and so without its isolated-vm, whose
 * native build fails on Node 20). No n8n process: only npm, the npm registry and n8n's Node.
 *
 * n8n's installer (n8n 2.41.1 and 1.123.81 alike, dist/modules/community-packages/
 * community-packages.service.js, downloadPackage): `npm pack <name>@<version>`, untar into
 * <user folder>/nodes/node_modules/<name>, drop devDependencies, peerDependencies and
 * optionalDependencies from its package.json, then in that folder:
 *   npm install --audit=false --fund=false --bin-links=false --install-strategy=shallow
 *     --ignore-scripts=true --package-lock=false --registry=<N8N_COMMUNITY_PACKAGES_REGISTRY>
 * run by n8n's own Node, with npm from its PATH. This test runs exactly that on `npm pack`'s tarball.
 */
import { execFileSync, spawnSync } from 'child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'fs';
import os from 'os';
import path from 'path';

import { ensureRuntime, type N8nRuntime } from './support/n8n';

const repoRoot = path.resolve(__dirname, '..', '..');
const N8N_INSTALL_ARGS = [
	'install',
	'--audit=false',
	'--fund=false',
	'--bin-links=false',
	'--install-strategy=shallow',
	'--ignore-scripts=true',
	'--package-lock=false',
	'--registry=https://registry.npmjs.org',
];
const RUNTIME_DEPENDENCIES = ['pg', 'ioredis', 'nodemailer', 'imapflow'];

interface PackageJson {
	name: string;
	version: string;
	n8n: { nodes: string[]; credentials: string[] };
	[key: string]: unknown;
}

let runtime: N8nRuntime;
let tmp: string;
let tarball: string;
let pkg: PackageJson;

/** npm with n8n's Node first on PATH, as n8n runs it. */
function npm(args: string[], cwd: string) {
	const env: NodeJS.ProcessEnv = { ...process.env, PATH: `${path.dirname(runtime.nodeBin)}${path.delimiter}${process.env.PATH ?? ''}` };
	// jest under `npm run test:e2e` must not hand that npm's settings (npm_config_*) to this one
	for (const k of Object.keys(env)) if (k.startsWith('npm_config_')) delete env[k];
	return spawnSync('npm', args, { cwd, env, encoding: 'utf8', timeout: 5 * 60_000 });
}

function installed(dir: string, name: string): boolean {
	return existsSync(path.join(dir, 'node_modules', name, 'package.json'));
}

beforeAll(async () => {
	runtime = await ensureRuntime();
	// `npm run test:e2e` builds first; the pack skips prepack so a parallel test's dist/ stays put.
	if (!existsSync(path.join(repoRoot, 'dist', 'nodes'))) throw new Error('dist/ is missing: run `npm run build` first');
	tmp = mkdtempSync(path.join(os.tmpdir(), 'community-install-'));
	const packed = JSON.parse(
		execFileSync('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', tmp], {
			cwd: repoRoot,
			encoding: 'utf8',
		}),
	) as Array<{ filename: string }>;
	tarball = path.join(tmp, packed[0].filename);
	pkg = JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as PackageJson;
}, 10 * 60_000);

afterAll(() => {
	if (tmp) rmSync(tmp, { recursive: true, force: true });
});

test("Settings → Community Nodes: n8n's own npm install of the tarball succeeds without n8n-workflow, and every node and credential loads", () => {
	const packageDir = path.join(tmp, 'n8n-user', 'nodes', 'node_modules', pkg.name);
	execFileSync('mkdir', ['-p', packageDir]);
	execFileSync('tar', ['-xzf', tarball, '-C', packageDir, '--strip-components=1']);
	const packageJsonPath = path.join(packageDir, 'package.json');
	// eslint-disable-next-line @typescript-eslint/no-unused-vars
	const { devDependencies, peerDependencies, optionalDependencies, ...stripped } = JSON.parse(
		readFileSync(packageJsonPath, 'utf8'),
	) as PackageJson;
	writeFileSync(packageJsonPath, JSON.stringify(stripped, null, 2));

	const run = npm(N8N_INSTALL_ARGS, packageDir);
	expect({ status: run.status, stderr: run.status === 0 ? '' : run.stderr }).toEqual({ status: 0, stderr: '' });

	for (const dep of RUNTIME_DEPENDENCIES) expect([dep, installed(packageDir, dep)]).toEqual([dep, true]);
	expect(installed(packageDir, 'n8n-workflow')).toBe(false);
	expect(installed(packageDir, 'isolated-vm')).toBe(false);

	// n8n loads each file of package.json's n8n section with require(), n8n-workflow coming from n8n's
	// own install; so does this, on n8n's Node.
	const files = [...pkg.n8n.nodes, ...pkg.n8n.credentials].map((f) => path.join(packageDir, f));
	const script = `
		const names = [];
		for (const file of JSON.parse(process.argv[1])) {
			const mod = require(file);
			const Cls = Object.values(mod).find((v) => typeof v === 'function');
			const instance = new Cls();
			names.push(instance.description ? instance.description.name : instance.name);
		}
		console.log(JSON.stringify(names));`;
	const load = spawnSync(runtime.nodeBin, ['-e', script, JSON.stringify(files)], {
		cwd: packageDir,
		encoding: 'utf8',
		env: { ...process.env, NODE_PATH: path.join(runtime.n8nDir, 'node_modules') },
	});
	expect({ status: load.status, stderr: load.status === 0 ? '' : load.stderr }).toEqual({ status: 0, stderr: '' });
	expect(JSON.parse(load.stdout)).toEqual([
		'dedupeGate',
		'guardedSend',
		'idempotencyLedger',
		'markStepDone',
		'promptCache',
		'promptCacheChatModel',
		'startStep',
		'idempotencyBuiltinApi',
		'idempotencyPostgresApi',
		'idempotencyRedisApi',
	]);
});

test('a plain `npm install <tarball>` (no --omit=peer) does not pull in n8n-workflow or isolated-vm', () => {
	const dir = path.join(tmp, 'plain');
	execFileSync('mkdir', ['-p', dir]);
	const run = npm(['install', '--audit=false', '--fund=false', '--ignore-scripts', tarball], dir);
	expect({ status: run.status, stderr: run.status === 0 ? '' : run.stderr }).toEqual({ status: 0, stderr: '' });
	expect(installed(dir, pkg.name)).toBe(true);
	for (const dep of RUNTIME_DEPENDENCIES) expect([dep, installed(dir, dep)]).toEqual([dep, true]);
	expect(installed(dir, 'n8n-workflow')).toBe(false);
	expect(installed(dir, 'isolated-vm')).toBe(false);
});
