#!/usr/bin/env node
/**
 * The real-n8n suite (test/e2e, jest.e2e.config.js) in the n8n versions of test/e2e/support/matrix.js.
 *
 *   npm run test:e2e          CI's runs: the whole suite on the newest version, the version smoke
 *                             on the one that differs most (matrix.js CI_PLAN, SMOKE)
 *   npm run test:e2e:matrix   the whole suite on every version (before a release; see docs/development.md)
 *   N8N_E2E_VERSIONS=2.40.7 npm run test:e2e   the whole suite on the versions named
 *   npm run test:e2e -- --smoke                the version smoke alone (a change to n8n internals code)
 *
 * Each version is installed first (scripts/n8n-runtime.sh, cached outside the repository; only the
 * versions of the run), then jest runs with N8N_VERSION set, which test/e2e/support/n8n.ts passes
 * on. Every run goes ahead even when one fails; a table of times and counts ends the output, and
 * the exit code is non-zero if any run failed. With CI_TIMES set to a file, each install and run
 * also adds a line `<seconds>\t<phase>` to it (.ci/run prints those in its own table). Extra
 * arguments go to jest (e.g. a test file pattern).
 */
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const { CI_PLAN, MATRIX, SMOKE, selectedVersions, smokeJestArgs, smokeNamePattern, smokeTestNamePattern } = require('../test/e2e/support/matrix');

const root = path.resolve(__dirname, '..');
const jest = path.join(path.dirname(require.resolve('jest/package.json', { paths: [root] })), 'bin', 'jest.js');
const seconds = (ms) => `${Math.round(ms / 1000)} s`;
const nodeOf = (version) => MATRIX.find((m) => m.version === version).node;

function plan() {
	if (process.argv.includes('--matrix')) return MATRIX.map(({ version }) => ({ version, scope: 'whole' }));
	if (process.argv.includes('--smoke')) return CI_PLAN.filter(({ scope }) => scope === 'smoke');
	if (process.env.N8N_E2E_VERSIONS) return selectedVersions().map(({ version }) => ({ version, scope: 'whole' }));
	return CI_PLAN;
}
const jestExtra = process.argv.slice(2).filter((a) => a !== '--matrix' && a !== '--smoke');

function recordTime(ms, phase) {
	if (process.env.CI_TIMES) fs.appendFileSync(process.env.CI_TIMES, `${Math.round(ms / 1000)}\t${phase}\n`);
}

/**
 * The parts of the smoke (an entry, or one of its `only` titles) that no passed test of the report
 * matched: a renamed test must not leave the smoke unnoticed.
 */
function smokePartsMissed(report) {
	const passed = report.testResults.flatMap((file) =>
		file.assertionResults.filter((t) => t.status === 'passed').map((t) => ({ file: path.basename(file.name), name: t.fullName })),
	);
	const parts = SMOKE.flatMap((entry) => (entry.only ?? [null]).map((only) => ({ entry, only })));
	return parts
		.filter(({ entry, only }) => {
			const pattern = new RegExp(`^${smokeNamePattern({ ...entry, only: only === null ? undefined : [only] })}`);
			return !passed.some((t) => t.file === `${entry.file}.e2e.test.ts` && pattern.test(t.name));
		})
		.map(({ entry, only }) => `${entry.file}: "${only ?? entry.tests}"`);
}

const rows = [];
for (const { version, scope } of plan()) {
	const node = nodeOf(version);
	// E2E_TEST_NAME_PATTERN: the smoke's test name pattern, also for files that share one n8n run among
	// their tests (batchedKeys), so that it runs only what the smoke's tests need.
	const env = { ...process.env, N8N_VERSION: version, ...(scope === 'smoke' ? { E2E_TEST_NAME_PATTERN: smokeTestNamePattern() } : {}) };
	console.log(`\n[test:e2e] n8n ${version} on Node ${node}: installing (cached after the first time)`);
	let started = Date.now();
	const install = spawnSync('bash', [path.join(root, 'scripts', 'n8n-runtime.sh')], { env, stdio: ['ignore', 'ignore', 'inherit'] });
	const installMs = Date.now() - started;
	recordTime(installMs, `n8n ${version}: install, or wait for it (cached: 0 s)`);
	const row = { version, node, scope, installMs, ms: 0, passed: 0, failed: 0, total: 0, files: 0, ok: false, note: '' };
	rows.push(row);
	if (install.status !== 0) {
		row.note = 'install failed';
		continue;
	}
	console.log(`[test:e2e] n8n ${version}: the ${scope === 'smoke' ? 'version smoke (test/e2e/support/matrix.js SMOKE)' : 'whole suite'}`);
	const report = path.join(os.tmpdir(), `e2e-${version}-${process.pid}.json`);
	const selection = scope === 'smoke' ? smokeJestArgs() : [];
	started = Date.now();
	const run = spawnSync(process.execPath, [jest, '-c', 'jest.e2e.config.js', '--json', `--outputFile=${report}`, ...selection, ...jestExtra], {
		cwd: root,
		env,
		stdio: 'inherit',
	});
	row.ms = Date.now() - started;
	recordTime(row.ms, `n8n ${version}: e2e, ${scope === 'smoke' ? 'version smoke' : 'whole suite'}`);
	let parsed;
	try {
		parsed = JSON.parse(fs.readFileSync(report, 'utf8'));
		fs.rmSync(report);
	} catch {
		// jest died before writing its report: the row says so through ok = false
	}
	row.passed = parsed?.numPassedTests ?? 0;
	row.failed = parsed?.numFailedTests ?? 0;
	row.total = (parsed?.numTotalTests ?? 0) - (parsed?.numPendingTests ?? 0);
	row.files = parsed?.numTotalTestSuites ?? 0;
	row.ok = run.status === 0;
	if (!row.ok) row.note = `jest exited ${run.status ?? run.signal}`;
	if (row.ok && scope === 'smoke' && jestExtra.length === 0) {
		const missed = smokePartsMissed(parsed);
		if (missed.length > 0) {
			row.ok = false;
			row.note = `parts of the smoke that matched no passed test (renamed? fix test/e2e/support/matrix.js): ${missed.join('; ')}`;
		}
	}
}

console.log('\n[test:e2e] the runs');
console.log('| n8n | Node | what | install | run | tests passed | failed | files | |');
console.log('|---|---|---|---|---|---|---|---|---|');
for (const r of rows) {
	console.log(
		`| ${r.version} | ${r.node} | ${r.scope === 'smoke' ? 'version smoke' : 'whole suite'} | ${seconds(r.installMs)} | ${seconds(r.ms)} | ${r.passed} of ${r.total} | ${r.failed} | ${r.files} | ${r.ok ? 'ok' : `FAILED ${r.note}`} |`,
	);
}
process.exit(rows.every((r) => r.ok) ? 0 : 1);
