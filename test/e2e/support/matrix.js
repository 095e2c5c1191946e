/**
 * The n8n versions the real-n8n suite runs against (scripts/test-e2e.js), newest first, and what
 * CI runs on each: the whole suite on the newest, the version smoke (SMOKE, below) on the one that
 * differs most. `npm run test:e2e:matrix` runs the whole suite on every version. scripts/n8n-runtime.sh installs each on the Node it supports: 24 for 2.x, 22 for 1.x.
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

/** CI runs the whole suite on the newest version of the matrix. */
const NEWEST = MATRIX[0].version;
/** and the version smoke on the one whose internals differ most from it (Node 22, n8n 1.x). */
const SMOKE_VERSION = '1.123.81';

/**
 * The version smoke: the tests that go through n8n internals which differ between versions,
 * picked by which internals each one exercises. Each entry is one e2e file, the start of the full
 * names (describe + test) of the tests taken from it, and, where only some of them are needed, the
 * start of each needed test's own title (`only`). scripts/test-e2e.js fails the run when an entry,
 * or one of its `only` titles, matches no passed test, so a renamed test cannot leave the smoke
 * unnoticed.
 *
 * Left out, because what they add is our own code on n8n's node API, which the newest version's
 * whole run and `npm test` cover, not a difference between n8n versions: Guarded Send's crash,
 * retry and on-call flows (guardedFlows 2, 3, 5, 6), the lease keeper under a 3-minute destination
 * and a kill -9 (leaseRecovery), Prompt Cache, the examples, the README quick start in the editor
 * (Chromium against n8n's front end), Remove Duplicates on 1,000 items (n8n's node, not ours) and
 * the harness surviving a SIGKILL.
 */
const SMOKE = [
	{
		file: 'smoke',
		tests: 'real n8n harness (built-in nodes)',
		only: ['loads the package installed the user way', 'is the n8n of the matrix', 'answers a webhook after its last node', 'refuses to activate a workflow whose node type is not installed'],
		why: 'loading: the user-way install under the package name, the n8n-workflow this n8n ships against our peer range, activation refused for a missing type',
	},
	{
		file: 'batchedKeys',
		tests: 'e2e: item-local key expressions, batched, in a real n8n',
		// One expression per way of batching, each with items that make it fail, under both engines.
		only: [
			'={{ $json.email.toLowerCase().trim() }}, whole input',
			"={{ $json.id ?? 'none' }}, chunks",
			"={{ $('Items').item.json.id }}, through Shuffle, read from the paired item",
			"={{ $('Items').item.json.email.toLowerCase() + $json.tag }}, through Shuffle, $getPairedItem in chunks",
		],
		why: "the key shortcuts ($input.all, $item, $getPairedItem, $('Node').itemMatching) and their fence (shortcutCheck.ts) under both expression engines: 1.x's vm engine answers $input.all() and re-paired items with nothing, so the fence must turn those shortcuts off there",
	},
	{
		file: 'queueMode',
		tests: 'e2e: Dedupe Gate with its defaults in queue mode',
		why: "the execution-end hooks, in a queue-mode worker (addHandler on 2.x and late 1.x, hookFunctions before) and how each version reports a failed run to them; and one storm: 20 concurrent deliveries across a main instance and two workers; and a storm through a Start Step region, whose \"not ended\" rule keys on the execution's hooks object (lib/n8n/openUnits.ts), which differs between versions",
	},
	{
		file: 'badInput',
		tests: 'e2e: bad input through a webhook (real n8n)',
		why: "the error output shape: an item rejected under 'continue using the error output' keeps its data and pairing, and n8n 2.x shows `details` where 1.x takes only `error`; a failed execution's message as each version records it",
	},
	{
		file: 'guardedFlows',
		tests: '1. webhook redelivery storm',
		why: "lineage through $getPairedItem: Mark Step Done after Guarded Send finds the gate's key through n8n's paired-item resolution (lineage.ts); and a storm in the main process: 100 events x 5 deliveries",
	},
];

/** The runs CI makes, in order: the whole suite on the newest version, then the smoke. */
const CI_PLAN = [
	{ version: NEWEST, scope: 'whole' },
	{ version: SMOKE_VERSION, scope: 'smoke' },
];

const escapeRegExp = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The pattern of full test names (describe + test) an entry of SMOKE takes. */
const smokeNamePattern = (entry) =>
	`${escapeRegExp(entry.tests)}${entry.only ? `.* (${entry.only.map(escapeRegExp).join('|')})` : ''}`;

/** The smoke's test name pattern: any of its entries. */
const smokeTestNamePattern = () => `^(${SMOKE.map(smokeNamePattern).join('|')})`;

/** Jest arguments that select the smoke: its files, and its test name pattern. */
function smokeJestArgs() {
	return [`--testPathPattern=test/e2e/(${SMOKE.map((s) => s.file).join('|')})\\.e2e\\.test\\.ts$`, `--testNamePattern=${smokeTestNamePattern()}`];
}

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

module.exports = { MATRIX, NEWEST, SMOKE_VERSION, SMOKE, CI_PLAN, smokeJestArgs, smokeNamePattern, smokeTestNamePattern, selectedVersions };
