/**
 * A Redis that can lose the ledger must not pass as fine. Every node that opens a Redis ledger
 * asks (once per shared client, see redisSafety in lib/ledger/redis/connect.ts) whether the server
 * may evict keys or restart empty, and:
 *
 * - fails closed when it may, naming the setting and the fix, unless the credential's
 *   "I Accept That This Redis May Lose Keys" is on: then every run gets a warning (an execution
 *   hint and a line in n8n's log) and goes on;
 * - warns on every run when the server would not say (a managed service that refuses CONFIG),
 *   telling what the person must check themselves. That alone never fails a run.
 */
import type { IExecuteFunctions } from 'n8n-workflow';

import { LedgerSettingError } from '../ledger/errors';
import { redisSafety, type RedisSettings } from '../ledger/redis/connect';
import { describeRisks, type RedisSafety } from '../ledger/redis/safety';

/** The credential field that accepts a Redis that may lose keys. */
export const ACCEPT_KEY_LOSS = 'acceptKeyLoss';
export const ACCEPT_KEY_LOSS_NAME = 'I Accept That This Redis May Lose Keys';

const CONSEQUENCE =
	'A key the ledger loses is a message it forgets: the next run sends it again, with a new Idempotency-Key.';
/** What a lost key costs a Prompt Cache: no message is sent twice, but an answer is paid for again. */
const CACHE_CONSEQUENCE = 'A key the ledger loses is an answer it forgets: the next identical prompt is paid for again.';

/** Whether `nodeType` is one of the two Prompt Cache nodes, which keep answers, not sends. */
const isCacheNode = (nodeType: string) => /\.promptCache(ChatModel)?$/.test(nodeType);

/**
 * The ledger Redis can lose keys and the credential does not accept it. Not "unavailable": the
 * Redis answers, so a node's "let items through if the ledger is down" does not apply either.
 */
export class UnsafeRedisError extends LedgerSettingError {}

/** What is wrong with a Redis that may lose keys, and what to do (the credential Test says both). */
export function unsafeRedisFinding(report: RedisSafety, consequence = CONSEQUENCE): { message: string; advice: string } {
	const settings = [...new Set(report.risks.map((r) => r.setting))].join(' and ');
	return {
		message: `The ledger Redis can lose keys (${settings}). ${describeRisks(report.risks)}`,
		advice: `${consequence} Change the setting and run again. To use this Redis anyway, turn on "${ACCEPT_KEY_LOSS_NAME}" in the ledger credential; every run then warns.`,
	};
}

/** The error a node of type `nodeType` fails with on a Redis that may lose keys. */
export function unsafeRedisError(report: RedisSafety, nodeType = ''): UnsafeRedisError {
	const cache = isCacheNode(nodeType);
	const { message, advice } = unsafeRedisFinding(report, cache ? CACHE_CONSEQUENCE : CONSEQUENCE);
	return new UnsafeRedisError(message, `${cache ? 'Nothing was read from the cache or stored in it.' : 'Nothing was let through or sent.'} ${advice}`);
}

/** The warning of a run on a Redis that may lose keys, accepted in the credential. */
export function acceptedRiskWarning(report: RedisSafety, nodeType = ''): string {
	return `The ledger Redis can lose keys, and the credential accepts that ("${ACCEPT_KEY_LOSS_NAME}"). ${describeRisks(report.risks)} ${isCacheNode(nodeType) ? CACHE_CONSEQUENCE : CONSEQUENCE}`;
}

/** The warning of a run on a Redis whose settings could not all be read. */
export function unknownSettingsWarning(report: RedisSafety, nodeType = ''): string {
	return `Could not check that the ledger Redis keeps its keys: ${report.unknown.join('; ')}. ${isCacheNode(nodeType) ? CACHE_CONSEQUENCE : CONSEQUENCE}`;
}

/**
 * Checks the Redis of `settings` for this run: throws (fails closed) on a setting that can lose
 * keys unless `accepted`; otherwise adds a warning to the run for what is accepted or unknown.
 */
export async function checkRedisForRun(ctx: IExecuteFunctions, settings: RedisSettings, accepted: boolean): Promise<void> {
	const report = await redisSafety(settings);
	const nodeType = ctx.getNode().type;
	if (report.risks.length > 0 && !accepted) throw unsafeRedisError(report, nodeType);
	const warnings = [
		...(report.risks.length > 0 ? [acceptedRiskWarning(report, nodeType)] : []),
		...(report.unknown.length > 0 ? [unknownSettingsWarning(report, nodeType)] : []),
	];
	for (const message of warnings) {
		ctx.addExecutionHints({ message, type: 'warning', location: 'outputPane' });
		try {
			ctx.logger?.warn(`n8n-nodes-idempotency, node "${ctx.getNode().name}": ${message}`);
		} catch {
			// A logger that fails must not fail the run.
		}
	}
}
