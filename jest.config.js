// The Built-in ledger (test/**/sqlite.*.test.ts) needs node:sqlite, Node.js 22.13 or newer. On an
// older Node (the machine's Node 20) this config leaves those tests out; `npm test` runs them in
// its second step, on Node 24 (scripts/test-vm-engine.js).
const [major, minor] = process.versions.node.split('.').map(Number);
const hasSqlite = major > 23 || (major === 23 && minor >= 4) || (major === 22 && minor >= 13);

/** @type {import('jest').Config} */
module.exports = {
	preset: 'ts-jest',
	testEnvironment: 'node',
	roots: ['<rootDir>/test'],
	testMatch: ['**/*.test.ts'],
	// The real-n8n suite runs with `npm run test:e2e` (jest.e2e.config.js).
	testPathIgnorePatterns: ['/node_modules/', '\\.e2e\\.test\\.ts$', ...(hasSqlite ? [] : ['/sqlite\\.[^/]*\\.test\\.ts$'])],
	globalSetup: '<rootDir>/test/support/globalSetup.js',
	globalTeardown: '<rootDir>/test/support/globalTeardown.js',
	testTimeout: 60000,
	// The longest files first, also in a cold CI without jest's cache (test/support/slowFirstSequencer.js).
	testSequencer: '<rootDir>/test/support/slowFirstSequencer.js',
};
