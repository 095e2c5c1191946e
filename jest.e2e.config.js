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
	globalSetup: '<rootDir>/test/e2e/support/globalSetup.js',
	globalTeardown: '<rootDir>/test/e2e/support/globalTeardown.js',
	// A cold install of n8n takes minutes; each n8n boot about 10 to 15 s, each CLI run 5 to 10 s.
	testTimeout: 15 * 60 * 1000,
	// Two files at a time (E2E_WORKERS to change it). Each file runs its own n8n, with its own
	// database, user folder and ports, and most of a file's time is spent waiting (on leases, on a
	// slow destination, on n8n's boot), so two share a 2-core machine well.
	maxWorkers: Number(process.env.E2E_WORKERS || 2),
	// The longest files first (test/support/slowFirstSequencer.js): a cold CI has no durations in
	// jest's cache, and its file-size order started the slowest file among the last.
	testSequencer: '<rootDir>/test/support/slowFirstSequencer.js',
	verbose: true,
};
