/** Reading the dashboard page (lib/dashboard/render.ts) in tests: its numbers, as a person sees them. */
import { escapeHtml } from '../../lib/dashboard/render';

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The number in the counts table's cell of `namespace` and `what` (a status, stuck, total, duplicatesBlocked); null when absent. */
export function countCell(html: string, namespace: string, what: string): number | null {
	const m = new RegExp(`data-namespace="${escapeRegExp(escapeHtml(namespace))}" data-count="${escapeRegExp(what)}">([^<]*)<`).exec(html);
	return m ? Number(m[1].replace(/,/g, '')) : null;
}

/** The total a chart shows for its window (`counter`: duplicatesBlocked, hits, tokensSaved, moneySaved). */
export function chartTotal(html: string, counter: string): number | null {
	const m = new RegExp(`id="chart-${escapeRegExp(counter)}" data-total="([^"]*)"`).exec(html);
	return m ? Number(m[1]) : null;
}

/** The part of the page that lists stuck rows ('stuck') or Needs Review rows ('review'). */
export function listSection(html: string, kind: 'stuck' | 'review'): string {
	const start = html.indexOf(`data-list="${kind}"`);
	if (start < 0) return '';
	const end = kind === 'stuck' ? html.indexOf('data-list="review"') : html.indexOf('<h2>', start);
	return html.slice(start, end < 0 ? undefined : end);
}
