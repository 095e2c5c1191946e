import * as workflow from 'n8n-workflow';

/**
 * Which n8n this package runs in, and a clear refusal where it cannot work.
 *
 * The nodes need n8n-workflow's `NodeConnectionTypes` (n8n 1.85.0 and later) to describe their
 * inputs and outputs; on an older n8n they would fail to load with a bare TypeError, so each node
 * file calls assertSupportedN8n() first and n8n's log says what to do instead. The versions the
 * package is tested on are listed in the README (Install) and in test/e2e/support/matrix.js.
 */
const NEEDED = ['NodeConnectionTypes', 'NodeOperationError', 'updateDisplayOptions'] as const;

export function assertSupportedN8n(exports: Record<string, unknown> = workflow): void {
	const missing = NEEDED.filter((name) => exports[name] === undefined);
	if (missing.length === 0) return;
	throw new Error(
		`n8n-nodes-idempotency cannot load in this n8n: it lacks ${missing.join(', ')}, which n8n has since version 1.85.0. ` +
			'Update n8n to 1.123 or later (the versions the package is tested on are listed in its README), then restart n8n.',
	);
}

/**
 * n8n's major version, from the n8n-workflow it runs with (n8n 1.x ships n8n-workflow 1.x, n8n
 * 2.x ships 2.x); 0 when it cannot be read.
 */
export function n8nMajor(): number {
	try {
		const { version } = require('n8n-workflow/package.json') as { version?: string };
		return Number.parseInt(String(version), 10) || 0;
	} catch {
		return 0;
	}
}

// Each node file imports this module first, so that an n8n too old refuses here, with words, not
// with a TypeError in whichever module touches the missing export first.
assertSupportedN8n();
