/**
 * Test files in the order that ends a run soonest: the longest first. Jest hands the files out in
 * this order to its workers (two, in CI), so a long file that starts last runs alone at the end
 * while the other worker idles. Jest's own order uses the duration of each file's last run, from
 * its cache, and a cold CI has no cache: it then orders by file size, which put the real-n8n
 * suite's slowest file (batchedKeys, 180 lines, 5 minutes) among the last to start.
 *
 * So: the duration of the last run when jest's cache has one (a warm machine), else the seconds
 * measured in CI (KNOWN, below; update them when a file's time changes much: `.ci/run`'s jest
 * output prints each file's time), else jest's file size order, after the known ones. Files that
 * failed last time still go first, as in jest's own order.
 */
const path = require('node:path');
const Sequencer = require('@jest/test-sequencer').default;

/** Seconds per test file, from CI runs on the 2-core machine (jest.config.js and jest.e2e.config.js). */
const KNOWN = {
	// real-n8n suite, n8n 2.41.1. Marked "est.": CI's figure before a change that made the file
	// faster, less what the change saved when measured side by side with the old file.
	'builtinLedger.e2e.test.ts': 255, // est. (267 before)
	'leaseRecovery.e2e.test.ts': 220, // est. (290 before: B now waits beside A and C)
	'batchedKeys.e2e.test.ts': 90, // est. (128 in CI on 2026-11-27 before one n8n execute per way of batching; alone 103 -> 72 s)
	'guardedFlows.e2e.test.ts': 179,
	'regionCrash.e2e.test.ts': 166,
	'quickStart.e2e.test.ts': 146, // est. (156 before)
	'npmStart.e2e.test.ts': 119,
	// npm test: Node 20, then Node 24 (test:vm)
	'guardedSend.crash.test.ts': 100, // est. (158 before: three cases at a time)
	'sqlite.transfer.test.ts': 35, // est. (124 before, at 100,000 rows; 20,000 since)
	'fastPath.test.ts': 96,
	'ledger.transfer.test.ts': 50,
	'shortcutCheck.engine.test.ts': 50,
	// Estimated from a run on a loaded machine (165 s where fastPath took 293 s): ~55 s in CI.
	// 39 lines, so jest's size order started it among the last of the Node 24 step.
	'sqlite.race.test.ts': 55,
};

class SlowFirstSequencer extends Sequencer {
	sort(tests) {
		const size = new Map();
		const fileSize = ({ path: p, context: { hasteFS } }) => {
			if (!size.has(p)) size.set(p, hasteFS.getSize(p) ?? 0);
			return size.get(p);
		};
		/** Milliseconds: the last run's, else the known figure; undefined when neither is known. */
		const duration = (test) => this.time(test) ?? (KNOWN[path.basename(test.path)] ?? NaN) * 1000;
		return [...tests].sort((a, b) => {
			const failedA = this.hasFailed(a);
			if (failedA !== this.hasFailed(b)) return failedA ? -1 : 1;
			const da = duration(a);
			const db = duration(b);
			const knownA = !Number.isNaN(da);
			if (knownA !== !Number.isNaN(db)) return knownA ? -1 : 1;
			if (knownA && da !== db) return db - da;
			return fileSize(b) - fileSize(a);
		});
	}
}

module.exports = SlowFirstSequencer;
