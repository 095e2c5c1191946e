/** @type {import('jest').Config} */
module.exports = {
	preset: 'ts-jest',
	testEnvironment: 'node',
	roots: ['<rootDir>/test'],
	testMatch: ['**/*.test.ts'],
	// The real-n8n suite runs with `npm run test:e2e` (jest.e2e.config.js).
	testPathIgnorePatterns: ['/node_modules/', '\\.e2e\\.test\\.ts$'],
	globalSetup: '<rootDir>/test/support/globalSetup.js',
	globalTeardown: '<rootDir>/test/support/globalTeardown.js',
	testTimeout: 60000,
};
