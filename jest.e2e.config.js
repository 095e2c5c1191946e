/**
 * The real-n8n suite (test/e2e, *.e2e.test.ts): n8n@2.40.7 on Node 24 as a child process,
 * installed once by scripts/n8n-runtime.sh. Run with `npm run test:e2e` after `npm run build`.
 * @type {import('jest').Config}
 */
module.exports = {
	preset: 'ts-jest',
	testEnvironment: 'node',
	roots: ['<rootDir>/test'],
	testMatch: ['**/*.e2e.test.ts'],
	globalSetup: '<rootDir>/test/support/globalSetup.js',
	globalTeardown: '<rootDir>/test/support/globalTeardown.js',
	// A cold install of n8n takes minutes; each n8n boot about 10 to 15 s, each CLI run 5 to 10 s.
	testTimeout: 15 * 60 * 1000,
	maxWorkers: 1,
	verbose: true,
};
