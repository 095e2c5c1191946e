/**
 * A key expression that reads the item only through `$json` is evaluated by n8n's engine for a
 * chunk of items per call (lib/n8n/batchedExpression.ts). This proves, in a real n8n (each version
 * of the matrix, test/e2e/support/matrix.js) under both of its expression engines, `vm` (isolated-vm,
 * the default) and `legacy`, that each item still gets exactly the key, or the error, that per-item
 * evaluation gives it, and that the package's check of its shortcuts (lib/n8n/shortcutCheck.ts)
 * passed: no execution says it read per item instead.
 *
 * Both ways of batching: 1,200 small items go to the engine whole (`$input.all()`, one call);
 * padded to over 1 MB, they go in chunks of 500 through `$item(k)` (three calls). Expressions
 * that read an earlier node's item (`$('Items').item`) are read from the paired item directly
 * when they are a plain path, else go in chunks of 500 through n8n's `$getPairedItem`; for those,
 * a Code node "Shuffle" between Items and the gates reverses the items and pairs each with its
 * Items item, so `$('Items').item` is not `$json`.
 *
 * Per way of batching, one workflow: Items (1,200 varied payloads) feed, for each expression of
 * that way, two Dedupe Gates. "Batched <n>" has the expression as it is. "Per Item <n>" has the
 * same expression behind `$runIndex >= 0 ? … : ''`, which means the same for every item but names
 * `$runIndex`, so it is evaluated per item. All continue on error, so a failing item leaves on
 * Duplicate with its message. Each test compares, item by item, the key its pair of gates
 * recorded or the error it raised.
 *
 * Each workflow runs in an `n8n execute` of its own, a fresh n8n process: the package's check of
 * a shortcut runs once per process and kind of shortcut (and, if n8n fails it, turns the
 * shortcut off until a restart), as in production, where the gates of every workflow share one
 * process. So each way of batching gets a check of its own, its first gate's, under each engine.
 * Most of a run is that process's boot: one process per way of batching and engine (8), not per
 * expression (26, 190 to 350 s in CI), and two `n8n execute` at a time, each engine's n8n booted
 * once by its first test.
 */
import { randomUUID } from 'crypto';

import { GATE, node } from './support/guardedWorkflows';
import { majorOf, nodeExecutionTime, startN8n, type CliRun, type N8nInstance, type WorkflowJson } from './support/n8n';
import { ledgerCredentialData, LedgerTables, uniqueLedgerTable } from './support/standIns';

const ITEMS = 1_200;
/** `n8n execute` processes at a time, across both engines' tests. */
const CLI_AT_ONCE = 2;
const table = uniqueLedgerTable('e2e_batched_keys');
const ledger = new LedgerTables(table);

/** Every item carries its position, so outputs can be matched whatever route they took. */
const itemsCode = (padding: number) => `
const shapes = [
  (i) => ({ id: 'evt_' + i, email: 'User' + i + '@Example.COM ' }),
  (i) => ({ id: i * 7, email: 'x' + i + '@a.b' }),
  (i) => ({ id: null }),
  (i) => ({}),
  (i) => ({ id: { nested: i } }),
  (i) => ({ id: ['a', i] }),
  (i) => ({ id: '  spaced ' + i + '  ', email: 42 }),
  (i) => ({ id: 'ünïcødé ✓ ' + i, email: '' }),
  (i) => ({ id: 1e21 + i, email: null }),
  (i) => ({ id: true }),
];
return Array.from({ length: ${ITEMS} }, (_, i) => ({ json: { pos: i, ...shapes[i % shapes.length](i), ...(${padding} ? { pad: 'x'.repeat(${padding}) } : {}) } }));`;

/** Reverses the items: item k is new data, paired with Items' item (n - 1 - k). */
const shuffleCode = `const all = $input.all();
return all.map((_, k) => ({ json: { pos: k, tag: k % 4 === 0 ? null : 'p' + (k % 3) }, pairedItem: { item: all.length - 1 - k } }));`;

/** One workflow for every expression of a way of batching: a Batched / Per Item pair of gates for each. */
function workflow(group: Expression[], credentialId: string, namespace: string): WorkflowJson {
	const [, mode, , padding] = group[0];
	const shuffle = mode.startsWith('through Shuffle');
	const credentials = { idempotencyPostgresApi: { id: credentialId, name: 'Ledger' } };
	const gate = (name: string, x: number, y: number, keyExpression: string) =>
		node(name, GATE, { options: { namespace: `${namespace}-${name}` }, keySource: 'expression', keyExpression }, { credentials, onError: 'continueRegularOutput', position: [x, y] });
	const gates = group.flatMap(([expression], n) => {
		const body = expression.replace(/^=\{\{([\s\S]*)\}\}$/, '$1');
		return [gate(`Batched ${n}`, 440 + 220 * n, -100, expression), gate(`Per Item ${n}`, 440 + 220 * n, 100, `={{ $runIndex >= 0 ? (${body}) : '' }}`)];
	});
	return {
		name: `batched keys, ${mode}`,
		nodes: [
			node('Start', 'n8n-nodes-base.manualTrigger', {}, { typeVersion: 1, position: [0, 0] }),
			node('Items', 'n8n-nodes-base.code', { jsCode: itemsCode(padding) }, { position: [220, 0] }),
			...(shuffle ? [node('Shuffle', 'n8n-nodes-base.code', { jsCode: shuffleCode }, { position: [330, 0] })] : []),
			...gates,
		],
		connections: {
			Start: { main: [[{ node: 'Items', type: 'main', index: 0 }]] },
			...(shuffle ? { Items: { main: [[{ node: 'Shuffle', type: 'main', index: 0 }]] } } : {}),
			[shuffle ? 'Shuffle' : 'Items']: { main: [gates.map((g) => ({ node: g.name, type: 'main', index: 0 }))] },
		},
		settings: { executionOrder: 'v1' },
	};
}

/** pos → the key the gate recorded, or `error: <message>`, from every output of the gate. */
function answers(run: any, gate: string): Map<number, string> {
	const outputs: Array<Array<{ json: any }>> = run.data.resultData.runData[gate][0].data.main;
	const byPos = new Map<number, string>();
	for (const output of outputs) {
		for (const { json } of output ?? []) {
			byPos.set(json.pos, json.error !== undefined ? `error: ${json.error}` : `key: ${json.idempotency.key}`);
		}
	}
	return byPos;
}

/**
 * Each expression; whether some of the payloads make it fail (missing, an object, a list, true);
 * and how the gate batches it: 1,200 small items (well under 1 MB) go to the engine whole
 * (`$input.all()`); padded to 1 KB each, they go in chunks of 500 through `$item(k)`.
 */
type Mode = 'whole input' | 'chunks' | 'through Shuffle, $getPairedItem in chunks' | 'through Shuffle, read from the paired item';
type Expression = [string, Mode, boolean, number];
const expressions: Expression[] = [
	// Text building never fails: an object prints as "[object Object]", on both sides.
	["={{ 'k-' + $json.id }}", 'whole input', false, 0],
	['={{ $json.email.toLowerCase().trim() }}', 'whole input', true, 0],
	["={{ $json.id ?? 'none' }}", 'whole input', true, 0],
	// An n8n extension function; String() makes every item a text.
	["={{ String($json.id).hash('sha256') }}", 'whole input', false, 0],
	// A regular expression, the item's position and the day.
	["={{ String($json.id).replace(/\\s+/g, '_') + '#' + $itemIndex + '@' + $today.toFormat('yyyy') }}", 'whole input', false, 0],
	["={{ 'k-' + $json.id }}", 'chunks', false, 1_000],
	["={{ $json.id ?? 'none' }}", 'chunks', true, 1_000],
	["={{ String($json.id).hash('sha256') }}", 'chunks', false, 1_000],
	// $('Items').item: the Items item paired with each Shuffle item (the reverse position). A plain
	// path of it is read directly from the item n8n pairs; anything more goes to the engine.
	["={{ $('Items').item.json.id }}", 'through Shuffle, read from the paired item', true, 0],
	['={{ $("Items").item.json["email"] }}', 'through Shuffle, read from the paired item', true, 0],
	["={{ 'k-' + $('Items').item.json.id }}", 'through Shuffle, $getPairedItem in chunks', false, 0],
	["={{ $('Items').item.json.email.toLowerCase() + $json.tag }}", 'through Shuffle, $getPairedItem in chunks', true, 0],
	["={{ ($json.tag ?? 'none') + '/' + $('Items').item.json.id + '/' + $('Shuffle').item.json.pos }}", 'through Shuffle, $getPairedItem in chunks', false, 0],
];

/** Runs `task` once fewer than `limit` tasks of this limiter are running. */
function limiter(limit: number) {
	let running = 0;
	const waiting: Array<() => void> = [];
	return async <T>(task: () => Promise<T>): Promise<T> => {
		if (running >= limit) await new Promise<void>((resolve) => waiting.push(resolve));
		running++;
		try {
			return await task();
		} finally {
			running--;
			waiting.shift()?.();
		}
	};
}
const cliSlot = limiter(CLI_AT_ONCE);

/**
 * The tests of this run, when scripts/test-e2e.js names them (E2E_TEST_NAME_PATTERN, the version
 * smoke's jest --testNamePattern): a way of batching's workflow then holds only their
 * expressions, not every expression of that way.
 */
const selected = process.env.E2E_TEST_NAME_PATTERN ? new RegExp(process.env.E2E_TEST_NAME_PATTERN, 'i') : null;
const DESCRIBE = 'e2e: item-local key expressions, batched, in a real n8n (%s expression engine)';
const TEST = '%s, %s: every item gets the key, or the error, that per-item evaluation gives it';
const runsIn = (engine: string, [expression, mode]: Expression) =>
	!selected || selected.test(`${DESCRIBE.replace('%s', engine)} ${TEST.replace('%s', () => expression).replace('%s', () => mode)}`);

afterAll(async () => {
	await ledger.drop();
});

describe.each(['vm', 'legacy'])(DESCRIBE, (engine) => {
	let n8n: N8nInstance | undefined;
	let booted: Promise<{ n8n: N8nInstance; credentialId: string }> | undefined;
	const figures: string[] = [];
	/** The `n8n execute` of each way of batching, run by the first of its tests to ask. */
	const runs = new Map<Mode, Promise<CliRun>>();

	/**
	 * The engine's n8n and the ledger credential, booted by the first of its tests to ask: tests
	 * started with test.concurrent start before any beforeAll has run.
	 */
	const boot = () =>
		(booted ??= (async () => {
			n8n = await startN8n({ withPackage: true, env: { N8N_EXPRESSION_ENGINE: engine } });
			await n8n.setupOwner();
			await n8n.createApiKey();
			const credentialId = (await n8n.createCredential({ name: 'Ledger', type: 'idempotencyPostgresApi', data: ledgerCredentialData(table) })).id;
			return { n8n, credentialId };
		})());

	afterAll(async () => {
		// Its tests have all ended here (a failed boot is reported by each test that awaited it).
		await booted?.catch(() => undefined);
		if (n8n) console.log(`n8n log: ${n8n.logFile}\n${figures.join('\n')}`);
		await n8n?.stop();
	});

	test.concurrent.each(expressions)(TEST, async (expression, mode, failures) => {
		const shuffled = mode.startsWith('through Shuffle');
		const { n8n, credentialId } = await boot();
		const group = expressions.filter((e) => e[1] === mode && runsIn(engine, e));
		if (!runs.has(mode)) runs.set(mode, cliSlot(() => n8n.executeCli(workflow(group, credentialId, `batched-${randomUUID().slice(0, 8)}`))));
		const { run, stdout, stderr } = await runs.get(mode)!;
		const n = group.findIndex(([e]) => e === expression);
		const [batchedGate, perItemGate] = [`Batched ${n}`, `Per Item ${n}`];
		// n8n 1.123's vm engine answers `$('Items').item` with nothing for every item Shuffle
		// re-paired, and so does its `$getPairedItem` there (its legacy engine, and n8n 2.x, find
		// the Items item): a batch agrees with that. The package's direct reader of paired items
		// (itemMatching) does find it, so its check (shortcutCheck.ts) sees n8n disagree, turns
		// that shortcut off and says so, and the gate gives each item what n8n gives it.
		// And its `$input.all()` answers nothing there, so the whole-input batch fails its check too:
		// the gate then evaluates in chunks of 500 through `$item(k)`, which passes it (no hint).
		const oldVm = majorOf(n8n.runtime) === 1 && engine === 'vm';
		const n8nLosesPairing = shuffled && oldVm;
		const perItemInstead = n8nLosesPairing && mode === 'through Shuffle, read from the paired item';
		const hints = JSON.stringify(run.data.resultData.runData[batchedGate][0].hints ?? []);
		const log = stdout + stderr;
		if (perItemInstead) expect(hints).toContain('one item at a time');
		else expect(hints).not.toContain('one item at a time'); // the shortcut, or chunks instead of the whole input
		if (perItemInstead || (oldVm && mode === 'whole input')) expect(log).toContain('turned off its shortcut');
		else expect(log).not.toContain('turned off its shortcut');
		const batched = answers(run, batchedGate);
		const perItem = answers(run, perItemGate);
		expect(batched.size).toBe(ITEMS);
		expect(perItem.size).toBe(ITEMS);
		let keys = 0;
		let errors = 0;
		for (let pos = 0; pos < ITEMS; pos++) {
			expect(`${pos}: ${batched.get(pos)}`).toBe(`${pos}: ${perItem.get(pos)}`);
			if (batched.get(pos)!.startsWith('key: ')) keys++;
			else errors++;
		}
		// The payloads give real keys and real failures (missing, object, list) on both sides.
		if (!n8nLosesPairing) {
			expect(keys).toBeGreaterThan(ITEMS / 10);
			if (failures) expect(errors).toBeGreaterThan(ITEMS / 10);
			else expect(errors).toBe(0);
		}
		figures.push(
			`${engine}: ${expression}, ${mode}: ${keys} keys, ${errors} errors alike; executionTime batched ${nodeExecutionTime(run, batchedGate)} ms, per item ${nodeExecutionTime(run, perItemGate)} ms (${ITEMS} items)`,
		);
	});
});
