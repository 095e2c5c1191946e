import { updateDisplayOptions, type INodeProperties } from 'n8n-workflow';

import { STATUSES } from '../../../../lib/ledger/types';
import { promptCacheStats, type PromptCacheStats } from '../../../PromptCache/stats';
import { iso, namespaceProperties, perItem } from '../common';

/** The cache's totals; its day-by-day list is Prompt Cache's Get Stats. */
function withoutDays(stats: PromptCacheStats): Omit<PromptCacheStats, 'days'> {
	const { days: _days, ...totals } = stats;
	void _days;
	return totals;
}

const properties: INodeProperties[] = [...namespaceProperties()];

export const description = updateDisplayOptions({ show: { resource: ['ledger'], operation: ['stats'] } }, properties);

/**
 * Counts of live rows by status, stuck rows, duplicates blocked and the oldest in-progress row of
 * one namespace; and, where Prompt Cache looked up prompts in it, the cache's last 30 days:
 * hit rate, tokens and money saved, and shadow mode's would-have-hit and differed rates.
 */
export const execute = perItem(
	(_ctx, _i, namespace) => namespace(),
	async (ledger, ns) => {
		const [stats, cache] = await Promise.all([ledger.stats(ns), promptCacheStats(ledger, ns)]);
		const now = Date.now();
		const oldest = stats.oldestInProgressAt;
		return {
			namespace: ns,
			total: STATUSES.reduce((sum, s) => sum + stats.byStatus[s], 0),
			byStatus: { ...stats.byStatus },
			stuck: stats.stuck,
			duplicatesBlocked: stats.duplicatesBlocked,
			oldestInProgressAt: iso(oldest),
			oldestInProgressAgeSeconds: oldest ? Math.max(0, Math.round((now - oldest.getTime()) / 1000)) : null,
			promptCache: cache.lookups > 0 || cache.shadow.compared > 0 ? withoutDays(cache) : null,
			asOf: new Date(now).toISOString(),
		};
	},
);
