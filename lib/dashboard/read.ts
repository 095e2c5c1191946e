/**
 * What the dashboard page shows, read from any ledger with counts and short pages only: one page
 * of namespaces, their stats (in one pass where the ledger has statsMany), then per namespace its
 * day counters and, only where there are some, a page of its oldest stuck rows and one of its
 * oldest Needs Review rows. Never a row more than a page: the rows are counted, not read.
 * Nothing here knows about n8n.
 */
import type { Ledger, LedgerRecord, NamespaceStats } from '../ledger/types';
import type { DashboardCheck, DashboardData, DashboardNamespace, DashboardRow } from './render';

/** Namespaces read at the same time. */
const PARALLEL = 4;

export interface DashboardRequest {
	title: string;
	maxNamespaces: number;
	rowsPerList: number;
	days: number;
	/** What a person calls a namespace (a workflow's name), where the caller knows it. */
	nameOf?: (namespace: string) => string | null;
	/** Namespaces the page leaves out (bookkeeping of the caller's own, such as review marks). */
	hidden?: (namespace: string) => boolean;
}

/** The first `count` namespaces the page shows, read a page at a time past hidden ones. */
async function visibleNamespaces(ledger: Ledger, count: number, hidden?: (namespace: string) => boolean): Promise<string[]> {
	const visible: string[] = [];
	let after: string | null = null;
	for (;;) {
		const page = await ledger.listNamespaces(count, after);
		visible.push(...(hidden ? page.filter((ns) => !hidden(ns)) : page));
		if (visible.length >= count || page.length < count) return visible.slice(0, count);
		after = page[page.length - 1];
	}
}

/**
 * What Guarded Send's check found when it asked the destination about a step ("was it
 * delivered?"), as kept in the row's result: `{ outcome: found | not_found | unknown, detail,
 * checkedAt }`. Null where no check ran.
 */
export function rowCheck(result: unknown): DashboardCheck | null {
	if (typeof result !== 'object' || result === null || Array.isArray(result)) return null;
	const check = (result as Record<string, unknown>).check;
	return typeof check === 'object' && check !== null && !Array.isArray(check) ? (check as DashboardCheck) : null;
}

function toRow(r: LedgerRecord): DashboardRow {
	return {
		key: r.key,
		step: r.step,
		status: r.status,
		phase: r.phase,
		attempts: r.attempts,
		leaseHolder: r.leaseHolder,
		firstSeenAt: r.firstSeenAt,
		updatedAt: r.updatedAt,
		check: rowCheck(r.result),
	};
}

/** `known`: the namespace's stats where the ledger read them for every namespace at once (statsMany). */
async function readNamespace(ledger: Ledger, namespace: string, q: DashboardRequest, known?: NamespaceStats): Promise<DashboardNamespace> {
	const [stats, days] = await Promise.all([known ?? ledger.stats(namespace), ledger.readCounts(namespace, q.days)]);
	const [stuck, review] = await Promise.all([
		stats.stuck > 0 ? ledger.list({ namespace, status: 'in_progress', stuckOnly: true, limit: q.rowsPerList }) : null,
		stats.byStatus.needs_review > 0 ? ledger.list({ namespace, status: 'needs_review', limit: q.rowsPerList }) : null,
	]);
	return {
		namespace,
		name: q.nameOf?.(namespace) ?? null,
		byStatus: { ...stats.byStatus },
		stuck: stats.stuck,
		duplicatesBlocked: stats.duplicatesBlocked,
		stuckRows: stuck?.records.map(toRow) ?? [],
		reviewRows: review?.records.map(toRow) ?? [],
		days,
	};
}

export async function readDashboard(ledger: Ledger, q: DashboardRequest): Promise<DashboardData> {
	const listed = await visibleNamespaces(ledger, q.maxNamespaces + 1, q.hidden);
	const shown = listed.slice(0, q.maxNamespaces);
	const stats = ledger.statsMany && shown.length > 0 ? await ledger.statsMany(shown) : undefined;
	const namespaces: DashboardNamespace[] = [];
	for (let start = 0; start < shown.length; start += PARALLEL) {
		const batch = shown.slice(start, start + PARALLEL);
		namespaces.push(...(await Promise.all(batch.map((ns, j) => readNamespace(ledger, ns, q, stats?.[start + j])))));
	}
	return {
		title: q.title,
		generatedAt: new Date(),
		windowDays: q.days,
		namespaces,
		moreNamespaces: listed.length > shown.length,
		rowsPerList: q.rowsPerList,
	};
}
