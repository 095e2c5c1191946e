/**
 * Runs the checks of one chunk: together where the channel answers many at once (Slack reads each
 * channel once), otherwise one by one, at most `concurrency` at a time. Never throws: a check that
 * throws (a bug, as checks answer failures) cannot tell, and the step goes to a person.
 */
import { forEachLimit } from './limit';
import type { Channel, CheckBudget, CheckRequest, CheckVerdict } from './types';

export async function checkAll<M>(channel: Channel<M>, requests: Array<CheckRequest<M>>, settings: { concurrency: number; budget: CheckBudget }): Promise<CheckVerdict[]> {
	if (requests.length === 0) return [];
	const failed = (error: unknown): CheckVerdict => ({ outcome: 'unknown', detail: `The check failed: ${(error as Error)?.message ?? String(error)}` });
	if (channel.checkMany) {
		return channel.checkMany(requests, settings.budget).catch((error: unknown) => requests.map(() => failed(error)));
	}
	const check = channel.check;
	if (!check) return requests.map(() => ({ outcome: 'unknown', detail: 'This destination has no way to check' }));
	const verdicts: CheckVerdict[] = new Array(requests.length);
	await forEachLimit(
		requests.map((r, i) => ({ r, i })),
		settings.concurrency,
		async ({ r, i }) => {
			verdicts[i] = await check.call(channel, r.message, r.window).catch(failed);
		},
	);
	return verdicts;
}
