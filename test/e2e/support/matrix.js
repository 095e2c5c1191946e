/**
 * The n8n versions `npm run test:e2e` runs the real-n8n suite against (scripts/test-e2e.js), newest
 * first. scripts/n8n-runtime.sh installs each on the Node it supports: 24 for 2.x, 22 for 1.x.
 * README.md (Install, "Tested with") lists the same versions; a unit test keeps the two alike.
 *
 * - 2.41.1: the newest 2.x that installs from the npm registry (2.41.3, the registry's latest,
 *   needs @n8n/agents@0.26.2, which the registry does not have).
 * - 2.40.7: the previous 2.x line, the one the package was built on.
 * - 1.123.81: the newest of the 1.x line, still maintained for Node 18 to 22.
 *
 * `n8nWorkflow` is the n8n-workflow each ships (the smoke test checks it in the install): package.json's
 * peerDependencies range is made of these, and a unit test holds it to them.
 *
 * Select with N8N_E2E_VERSIONS (comma-separated, e.g. `N8N_E2E_VERSIONS=2.41.1 npm run test:e2e`).
 */
const MATRIX = [
	{ version: '2.41.1', node: 24, n8nWorkflow: '2.41.0' },
	{ version: '2.40.7', node: 24, n8nWorkflow: '2.40.1' },
	{ version: '1.123.81', node: 22, n8nWorkflow: '1.120.31' },
];

/** The matrix, or the versions N8N_E2E_VERSIONS names (each must be in the matrix). */
function selectedVersions(env = process.env) {
	const asked = (env.N8N_E2E_VERSIONS || '').split(',').map((v) => v.trim()).filter(Boolean);
	if (asked.length === 0) return MATRIX;
	const unknown = asked.filter((v) => !MATRIX.some((m) => m.version === v));
	if (unknown.length > 0) {
		throw new Error(`N8N_E2E_VERSIONS names ${unknown.join(', ')}, not in the matrix (${MATRIX.map((m) => m.version).join(', ')}); add it to test/e2e/support/matrix.js first`);
	}
	return MATRIX.filter((m) => asked.includes(m.version));
}

module.exports = { MATRIX, selectedVersions };
