#!/usr/bin/env node
/**
 * `npm run test:e2e`: the real-n8n suite (test/e2e, jest.e2e.config.js) once per n8n version of the
 * matrix (test/e2e/support/matrix.js), or of N8N_E2E_VERSIONS. Each version is installed first
 * (scripts/n8n-runtime.sh, cached outside the repository), then the suite runs with N8N_VERSION
 * set, which test/e2e/support/n8n.ts passes on. Every version runs even when one fails; a table of
 * times and counts ends the output, and the exit code is non-zero if any version failed.
 * Extra arguments go to jest (e.g. a test file pattern).
 */
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const { selectedVersions } = require('../test/e2e/support/matrix');

const root = path.resolve(__dirname, '..');
const jest = path.join(path.dirname(require.resolve('jest/package.json', { paths: [root] })), 'bin', 'jest.js');
const seconds = (ms) => `${Math.round(ms / 1000)} s`;

const rows = [];
for (const { version, node } of selectedVersions()) {
	const env = { ...process.env, N8N_VERSION: version };
	console.log(`\n[test:e2e] n8n ${version} on Node ${node}: installing (cached after the first time)`);
	let started = Date.now();
	const install = spawnSync('bash', [path.join(root, 'scripts', 'n8n-runtime.sh')], { env, stdio: ['ignore', 'ignore', 'inherit'] });
	const installMs = Date.now() - started;
	if (install.status !== 0) {
		rows.push({ version, node, installMs, ms: 0, passed: 0, failed: 0, total: 0, files: 0, ok: false, note: 'install failed' });
		continue;
	}
	console.log(`[test:e2e] n8n ${version}: the suite`);
	const report = path.join(os.tmpdir(), `e2e-${version}-${process.pid}.json`);
	started = Date.now();
	const run = spawnSync(process.execPath, [jest, '-c', 'jest.e2e.config.js', '--json', `--outputFile=${report}`, ...process.argv.slice(2)], {
		cwd: root,
		env,
		stdio: 'inherit',
	});
	const ms = Date.now() - started;
	let counts = { numPassedTests: 0, numFailedTests: 0, numTotalTests: 0, numTotalTestSuites: 0 };
	try {
		counts = JSON.parse(fs.readFileSync(report, 'utf8'));
		fs.rmSync(report);
	} catch {
		// jest died before writing its report: the row says so through ok = false
	}
	rows.push({
		version,
		node,
		installMs,
		ms,
		passed: counts.numPassedTests,
		failed: counts.numFailedTests,
		total: counts.numTotalTests,
		files: counts.numTotalTestSuites,
		ok: run.status === 0,
		note: run.status === 0 ? '' : `jest exited ${run.status ?? run.signal}`,
	});
}

console.log('\n[test:e2e] the matrix');
console.log('| n8n | Node | install | suite | tests passed | failed | files | |');
console.log('|---|---|---|---|---|---|---|---|');
for (const r of rows) {
	console.log(`| ${r.version} | ${r.node} | ${seconds(r.installMs)} | ${seconds(r.ms)} | ${r.passed} of ${r.total} | ${r.failed} | ${r.files} | ${r.ok ? 'ok' : `FAILED ${r.note}`} |`);
}
process.exit(rows.every((r) => r.ok) ? 0 : 1);
