/**
 * The canvas subtitles of Idempotency Ledger, Start Step and Mark Step Done, evaluated by n8n's
 * own expression engine (as the editor does). An empty Step on Mark Step Done records the region's
 * step when the node ends a Start Step region, and the unit of work anywhere else
 * (docs/nodes/mark-step-done.md); the subtitle cannot see the canvas, so it names both, in few
 * words: the canvas cuts a subtitle at about 25 characters.
 */
import { IdempotencyLedger } from '../../nodes/IdempotencyLedger/IdempotencyLedger.node';
import { MarkStepDone } from '../../nodes/MarkStepDone/MarkStepDone.node';
import { StartStep } from '../../nodes/StartStep/StartStep.node';
import { evaluateParameter } from '../support/engine';

describe('canvas subtitle', () => {
	// n8n evaluates the subtitle with its own expression engine; a "}}" inside it would end the expression early.
	test.each([
		['key', 'get', 'Get key'],
		['key', 'list', 'List keys'],
		['key', 'release', 'Release key'],
		['ledger', 'stats', 'Get stats'],
		['ledger', 'purge', 'Purge expired'],
		['checkpoint', 'get', 'Get checkpoint'],
		['checkpoint', 'set', 'Set checkpoint'],
	])('Idempotency Ledger, %s / %s → %s', async (resource, operation, expected) => {
		const subtitle = new IdempotencyLedger().description.subtitle as string;
		await expect(evaluateParameter({ resource, operation, subtitle }, { json: {} }, 'subtitle')).resolves.toBe(expected);
	});

	test.each([
		['invoiceCreate', 'completed', 'invoiceCreate: completed'],
		['create contact', 'needs_review', 'create contact: needs_review'],
		['', 'completed', 'region or unit: completed'],
		['', 'failed_retryable', 'region or unit: failed_retryable'],
	])('Mark Step Done, Step "%s", %s → %s', async (step, status, expected) => {
		const subtitle = new MarkStepDone().description.subtitle as string;
		await expect(evaluateParameter({ step, status, subtitle }, { json: {} }, 'subtitle')).resolves.toBe(expected);
	});

	test.each([
		['create invoice', 'create invoice (once per key)'],
		['', 'once per key'],
	])('Start Step, Step "%s" → %s', async (step, expected) => {
		const subtitle = new StartStep().description.subtitle as string;
		await expect(evaluateParameter({ step, subtitle }, { json: {} }, 'subtitle')).resolves.toBe(expected);
	});
});
