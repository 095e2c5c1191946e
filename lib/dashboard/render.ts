/**
 * The ledger as one self-contained HTML page: inline CSS and SVG, no script, no font, image or
 * link to load from anywhere (its Content-Security-Policy forbids them too; the icon is an empty
 * data: address, so a browser does not ask for /favicon.ico), so that it renders on
 * an n8n without internet. A pure function of what the caller read from the ledger (counts and
 * short pages, never every row); every text that came from the ledger or a user is escaped.
 * Nothing here knows about n8n.
 */
import { STATUSES, type DailyCounts, type Status } from '../ledger/types';

/** What Guarded Send's check of the destination found, as kept on the row (see checkEvidence). */
export interface DashboardCheck {
	outcome?: unknown;
	detail?: unknown;
	checkedAt?: unknown;
}

/** A row shown in the stuck or needs-review lists. */
export interface DashboardRow {
	key: string;
	step: string;
	status: Status;
	/** Reached `sending`: it may have gone out. */
	phase: string | null;
	attempts: number;
	leaseHolder: string | null;
	firstSeenAt: Date;
	updatedAt: Date;
	check: DashboardCheck | null;
}

export interface DashboardNamespace {
	namespace: string;
	/** What a person calls it (a workflow's name), where known. */
	name: string | null;
	byStatus: Record<Status, number>;
	/** In progress with a lapsed lease. */
	stuck: number;
	/** Since the ledger began (the namespace's counter). */
	duplicatesBlocked: number;
	/** The oldest stuck rows, at most a few. */
	stuckRows: DashboardRow[];
	/** The oldest open Needs Review rows, at most a few. */
	reviewRows: DashboardRow[];
	/** The namespace's day counters over the window (Ledger.readCounts). */
	days: DailyCounts[];
}

export interface DashboardData {
	title: string;
	generatedAt: Date;
	/** Days the charts cover, ending today. */
	windowDays: number;
	namespaces: DashboardNamespace[];
	/** More namespaces hold rows than are shown. */
	moreNamespaces: boolean;
	/** How many rows each list shows at most per namespace. */
	rowsPerList: number;
}

/** The day counters the charts draw: Dedupe Gate, Guarded Send and Start Step add the first, Prompt Cache the others. */
const CHARTS: Array<{ counter: string; title: string; format: (n: number) => string }> = [
	{ counter: 'duplicatesBlocked', title: 'Duplicates blocked per day', format: (n) => whole(n) },
	{ counter: 'hits', title: 'Prompt Cache hits per day', format: (n) => whole(n) },
	{ counter: 'tokensSaved', title: 'Tokens saved per day', format: (n) => whole(n) },
	{ counter: 'moneySaved', title: 'Money saved per day (at the prices set on Prompt Cache)', format: (n) => money(n) },
];

const DAY_MS = 86_400_000;

export function escapeHtml(value: unknown): string {
	return String(value).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

const whole = (n: number) => Math.round(n).toLocaleString('en-US');
const money = (n: number) => n.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: n !== 0 && Math.abs(n) < 1 ? 4 : 2 });
const utc = (d: Date) => `${d.toISOString().slice(0, 16).replace('T', ' ')} UTC`;

/** "3 h ago" from `now`. */
function age(then: Date, now: Date): string {
	const s = Math.max(0, Math.round((now.getTime() - then.getTime()) / 1000));
	if (s < 120) return `${s} s ago`;
	if (s < 3600) return `${Math.round(s / 60)} min ago`;
	if (s < 2 * 86400) return `${Math.round(s / 3600)} h ago`;
	return `${Math.round(s / 86400)} days ago`;
}

/** The days of the window, oldest first, ending on the later of today and the last day counted. */
export function windowDays(now: Date, days: number, counted: string[]): string[] {
	const today = now.toISOString().slice(0, 10);
	const last = counted.reduce((max, d) => (d > max ? d : max), today);
	const end = Date.parse(`${last}T00:00:00Z`);
	return Array.from({ length: days }, (_, i) => new Date(end - (days - 1 - i) * DAY_MS).toISOString().slice(0, 10));
}

/** A counter summed over every namespace shown, per day of the window. */
function series(data: DashboardData, axis: string[], counter: string): number[] {
	const byDay = new Map(axis.map((d) => [d, 0]));
	for (const ns of data.namespaces) {
		for (const { day, counts } of ns.days) {
			const n = counts[counter];
			if (byDay.has(day) && typeof n === 'number' && Number.isFinite(n)) byDay.set(day, byDay.get(day)! + n);
		}
	}
	return axis.map((d) => byDay.get(d)!);
}

function barChart(id: string, title: string, axis: string[], values: number[], format: (n: number) => string): string {
	const width = 560;
	const height = 150;
	const top = 18;
	const bottom = 22;
	const plot = height - top - bottom;
	const max = Math.max(0, ...values);
	const step = width / Math.max(1, values.length);
	const total = values.reduce((a, b) => a + b, 0);
	const bars = values
		.map((v, i) => {
			const h = max > 0 ? Math.max(v > 0 ? 1 : 0, (v / max) * plot) : 0;
			const x = (i * step + step * 0.12).toFixed(1);
			return `<rect x="${x}" y="${(top + plot - h).toFixed(1)}" width="${(step * 0.76).toFixed(1)}" height="${h.toFixed(1)}"><title>${escapeHtml(axis[i])}: ${escapeHtml(format(v))}</title></rect>`;
		})
		.join('');
	return `<figure class="chart" id="${id}" data-total="${total}">
<figcaption>${escapeHtml(title)} <span class="muted">· ${escapeHtml(format(total))} in ${values.length} days</span></figcaption>
<svg viewBox="0 0 ${width} ${height}" width="100%" role="img" aria-label="${escapeHtml(title)}">
<line class="axis" x1="0" y1="${top + plot + 0.5}" x2="${width}" y2="${top + plot + 0.5}"/>
<text x="0" y="12" class="label">${escapeHtml(format(max))}</text>
<g class="bars">${bars}</g>
<text x="0" y="${height - 6}" class="label">${escapeHtml(axis[0] ?? '')}</text>
<text x="${width}" y="${height - 6}" class="label" text-anchor="end">${escapeHtml(axis[axis.length - 1] ?? '')}</text>
</svg></figure>`;
}

const STATUS_TITLES: Record<Status, string> = {
	in_progress: 'In progress',
	completed: 'Completed',
	failed_retryable: 'Failed (retryable)',
	needs_review: 'Needs review',
};

function namespaceCell(ns: DashboardNamespace): string {
	return ns.name && ns.name !== ns.namespace
		? `<strong>${escapeHtml(ns.name)}</strong><br><code>${escapeHtml(ns.namespace)}</code>`
		: `<code>${escapeHtml(ns.namespace)}</code>`;
}

function countsTable(data: DashboardData): string {
	const cell = (ns: string, what: string, n: number, warn = false) =>
		`<td class="num${warn && n > 0 ? ' warn' : ''}" data-namespace="${escapeHtml(ns)}" data-count="${what}">${whole(n)}</td>`;
	const head = ['Namespace', ...STATUSES.map((s) => STATUS_TITLES[s]), 'Stuck', 'Total', 'Duplicates blocked'];
	const rows = data.namespaces.map((ns) => {
		const total = STATUSES.reduce((sum, s) => sum + ns.byStatus[s], 0);
		return `<tr><th scope="row">${namespaceCell(ns)}</th>${STATUSES.map((s) => cell(ns.namespace, s, ns.byStatus[s], s === 'needs_review' || s === 'failed_retryable')).join('')}${cell(ns.namespace, 'stuck', ns.stuck, true)}${cell(ns.namespace, 'total', total)}${cell(ns.namespace, 'duplicatesBlocked', ns.duplicatesBlocked)}</tr>`;
	});
	const body = rows.length > 0 ? rows.join('\n') : `<tr><td colspan="${head.length}" class="muted">No namespace holds rows yet.</td></tr>`;
	return `<table class="counts"><thead><tr>${head.map((h) => `<th scope="col">${h}</th>`).join('')}</tr></thead>
<tbody>
${body}
</tbody></table>`;
}

function checkText(check: DashboardCheck | null): string {
	if (!check) return '<span class="muted">no check ran</span>';
	const outcome = typeof check.outcome === 'string' ? check.outcome : 'unknown';
	const words: Record<string, string> = { found: 'found at the destination', not_found: 'not found at the destination', unknown: 'the destination could not tell' };
	const parts = [`<strong>${escapeHtml(words[outcome] ?? outcome)}</strong>`];
	if (check.detail !== undefined && check.detail !== null && check.detail !== '') {
		parts.push(escapeHtml(typeof check.detail === 'string' ? check.detail : JSON.stringify(check.detail)));
	}
	if (typeof check.checkedAt === 'string') parts.push(`<span class="muted">${escapeHtml(check.checkedAt)}</span>`);
	return parts.join('<br>');
}

function rowsTable(data: DashboardData, kind: 'stuck' | 'review'): string {
	const shown = data.namespaces.filter((ns) => (kind === 'stuck' ? ns.stuckRows : ns.reviewRows).length > 0);
	if (shown.length === 0) {
		return `<p class="muted" data-list="${kind}">${kind === 'stuck' ? 'Nothing is stuck.' : 'Nothing waits for a person.'}</p>`;
	}
	const rows = shown.flatMap((ns) => {
		const list = kind === 'stuck' ? ns.stuckRows : ns.reviewRows;
		const open = kind === 'stuck' ? ns.stuck : ns.byStatus.needs_review;
		const more = open > list.length ? `<tr class="more"><td colspan="6" class="muted">… and ${whole(open - list.length)} more in <code>${escapeHtml(ns.namespace)}</code> (Idempotency Ledger → Key → List)</td></tr>` : '';
		return [
			...list.map(
				(r) =>
					`<tr data-namespace="${escapeHtml(ns.namespace)}"><td>${namespaceCell(ns)}</td><td><code>${escapeHtml(r.key)}</code>${r.step === '' ? '' : `<br><span class="muted">step</span> <code>${escapeHtml(r.step)}</code>`}</td>` +
					`<td>${escapeHtml(age(r.updatedAt, data.generatedAt))}<br><span class="muted">${escapeHtml(utc(r.updatedAt))}</span></td>` +
					`<td class="num">${whole(r.attempts)}</td>` +
					`<td>${r.phase === 'sending' ? '<strong class="warn">may have been sent</strong>' : 'nothing sent'}${r.leaseHolder ? `<br><span class="muted">${escapeHtml(r.leaseHolder)}</span>` : ''}</td>` +
					`<td>${checkText(r.check)}</td></tr>`,
			),
			more,
		];
	});
	return `<table class="rows" data-list="${kind}"><thead><tr><th scope="col">Namespace</th><th scope="col">Key</th><th scope="col">Last change</th><th scope="col">Attempts</th><th scope="col">Sending</th><th scope="col">Destination check</th></tr></thead>
<tbody>
${rows.join('\n')}
</tbody></table>`;
}

const CSS = `
:root{color-scheme:light;--fg:#1f2328;--muted:#656d76;--line:#d0d7de;--bar:#4f6bed;--warn:#b35900;--bg:#fff;--panel:#f6f8fa}
*{box-sizing:border-box}
body{margin:0;padding:24px;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:var(--fg);background:var(--bg)}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}
.muted{color:var(--muted)}.warn{color:var(--warn)}
code{font:12.5px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:var(--panel);padding:1px 4px;border-radius:4px;overflow-wrap:anywhere}
table{border-collapse:collapse;width:100%;margin:4px 0}
th,td{border-bottom:1px solid var(--line);padding:6px 8px;text-align:left;vertical-align:top}
thead th{font-size:12px;text-transform:uppercase;letter-spacing:.03em;color:var(--muted);white-space:nowrap}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(420px,1fr));gap:16px}
figure.chart{margin:0;padding:12px;border:1px solid var(--line);border-radius:8px;background:var(--bg)}
figcaption{font-weight:600;margin-bottom:6px}
svg .bars rect{fill:var(--bar)}svg .axis{stroke:var(--line)}svg .label{font-size:11px;fill:var(--muted)}
`;

/** The whole page. */
export function renderDashboard(data: DashboardData): string {
	const counted = data.namespaces.flatMap((ns) => ns.days.map((d) => d.day));
	const axis = windowDays(data.generatedAt, data.windowDays, counted);
	const charts = CHARTS.map((c) => barChart(`chart-${c.counter}`, c.title, axis, series(data, axis, c.counter), c.format)).join('\n');
	const more = data.moreNamespaces
		? `<p class="muted">More namespaces hold rows than this page shows (${data.namespaces.length}). Raise "Max Namespaces" on the node to see them.</p>`
		: '';
	return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<link rel="icon" href="data:,">
<title>${escapeHtml(data.title)}</title>
<style>${CSS}</style></head>
<body>
<h1>${escapeHtml(data.title)}</h1>
<p class="muted">As of ${escapeHtml(utc(data.generatedAt))}. Counts are of live rows; stuck means in progress with a lapsed lease.</p>
<h2>Rows by status</h2>
${countsTable(data)}
${more}
<h2>Stuck</h2>
<p class="muted">The oldest rows a run claimed and never finished, at most ${data.rowsPerList} per namespace. Those that may have been sent need a decision: Idempotency Ledger → Key → Release.</p>
${rowsTable(data, 'stuck')}
<h2>Needs review</h2>
<p class="muted">Steps that may or may not have happened, oldest first, at most ${data.rowsPerList} per namespace: a person checks the destination and settles each, by answering the question Review → Ask Once sent them or with Key → Release.</p>
${rowsTable(data, 'review')}
<h2>The last ${data.windowDays} days</h2>
<div class="charts">
${charts}
</div>
</body></html>
`;
}
