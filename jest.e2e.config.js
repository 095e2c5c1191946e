/**
 * The real-n8n suite (test/e2e, *.e2e.test.ts): one n8n (N8N_VERSION, default 2.41.1) on the Node it
 * supports, as a child process, installed once by scripts/n8n-runtime.sh. `npm run test:e2e` runs it
 * for each version of test/e2e/support/matrix.js (scripts/test-e2e.js); for one version:
 * `npm run build && N8N_VERSION=1.123.81 npx jest -c jest.e2e.config.js`.
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
