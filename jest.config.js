/** @type {import('jest').Config} */
module.exports = {
	preset: 'ts-jest',
	testEnvironment: 'node',
	roots: ['<rootDir>/test'],
	testMatch: ['**/*.test.ts'],
	globalSetup: '<rootDir>/test/support/globalSetup.js',
	globalTeardown: '<rootDir>/test/support/globalTeardown.js',
	testTimeout: 60000,
};
