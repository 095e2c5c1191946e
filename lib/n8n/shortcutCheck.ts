import type { IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

/**
 * Our nodes read keys faster than n8n would, through n8n internals that n8n does not document as
 * API: `$input.all()`, `$item(k)`, `$getPairedItem` and `$('Node').itemMatching`, and through our
 * own reading of which expressions mean the same for every item. If a future n8n changed what one
 * of them means, nothing would raise an error: a node would silently read the wrong keys.
 *
 * So the first time a process takes a shortcut, it checks that the internals it needs are there
 * and that the shortcut gives what n8n's own per-item evaluation gives on a few of the items at
 * hand. If anything is missing or differs, the process reads that way per item from then on: it
 * says so once in n8n's log, and in a hint on every execution that reads per item because of it.
 */
export type Shortcut = 'whole input' | 'chunks' | 'paired items' | 'paired item reader';

/**
 * The internals each shortcut calls: n8n has them all when the expression (as evaluateExpression
 * takes it) gives `true`. They are called, not only looked up: n8n's `vm` engine defines `$item`
 * and `$getPairedItem` inside its sandbox whatever n8n provides behind them. A `$getPairedItem`
 * that is gone behind the sandbox shows only as batches that fail, which then go per item,
 * silently; one that answers differently is caught by the comparison.
 */
const INTERNALS: Record<Shortcut, { names: string; present: string | null }> = {
	'whole input': { names: '$input.all', present: "{{ typeof $input.all === 'function' && $input.all().length > 0 && $input.all()[0].json !== undefined }}" },
	chunks: { names: '$item', present: "{{ typeof $item === 'function' && $item(0).$json !== undefined }}" },
	'paired items': {
		names: '$item, $getPairedItem',
		present: "{{ typeof $item === 'function' && $item(0).$json !== undefined && typeof $getPairedItem === 'function' }}",
	},
	// Asked of each node the reader names (below): an expression cannot ask it of a node that is not there.
	'paired item reader': { names: "$('Node').itemMatching", present: null },
};

type Verdict = { trusted: true } | { trusted: false; why: string };
const verdicts = new Map<Shortcut, Verdict>();
/** Node runs (their contexts) already told, per shortcut, that it reads per item. */
const hinted = new WeakMap<object, Set<Shortcut>>();

type Reader = (itemIndex: number, item: INodeExecutionData) => unknown;
type Outcome = { ok: true; value: unknown } | { ok: false; message: string };

/** A shortcut about to be taken: which kind, the reader it gives for `items`, and n8n's own per-item reader. */
export interface Candidate {
	kind: Shortcut;
	items: INodeExecutionData[];
	read: Reader;
	perItem: (i: number) => unknown;
	/** The nodes a paired-item reader reads (`$('Node').item`). */
	nodes?: string[];
}

/**
 * The candidate's reader if this process trusts its kind, checking it now on a few of the items if
 * it has not yet; else n8n's own per-item evaluation.
 */
export function checkedShortcut(ctx: IExecuteFunctions, candidate: Candidate): Reader {
	const verdict = judged(ctx, candidate);
	if (verdict.trusted) return candidate.read;
	if ('why' in verdict) hint(ctx, candidate.kind, verdict.why);
	return (i) => candidate.perItem(i);
}

/**
 * Whether this process trusts the candidate's kind, checking it now if it has not yet (and saying
 * so once in n8n's log when it fails). Undecided, for an expression that cannot decide the check,
 * counts as not trusted for this read only.
 */
export function judged(ctx: IExecuteFunctions, candidate: Candidate): Verdict | { trusted: false; undecided: true } {
	const known = verdicts.get(candidate.kind);
	if (known) return known;
	const found = check(ctx, candidate);
	if (found === 'inconclusive') return { trusted: false, undecided: true };
	verdicts.set(candidate.kind, found);
	if (!found.trusted) ctx.logger.warn(distrustMessage(ctx, candidate.kind, found.why));
	return found;
}

/**
 * A verdict, or 'inconclusive' when the items at hand cannot decide: no item had a value both
 * ways, or n8n itself gave an item two different values in a row (an expression that reads the
 * clock to the millisecond, or a random number).
 */
function check(ctx: IExecuteFunctions, { kind, items, read: shortcut, perItem, nodes = [] }: Candidate): Verdict | 'inconclusive' {
	if (!internalsPresent(ctx, kind, nodes)) return { trusted: false, why: `this n8n does not answer ${INTERNALS[kind].names} as it needs` };
	let compared = 0;
	for (const i of sampleOf(items.length)) {
		const fast = outcome(() => shortcut(i, items[i]));
		const own = outcome(() => perItem(i));
		if (!same(fast, own)) {
			if (!same(own, outcome(() => perItem(i)))) return 'inconclusive';
			return { trusted: false, why: `it read item ${i} differently from n8n's own evaluation` };
		}
		if (own.ok) compared++;
	}
	return compared > 0 ? { trusted: true } : 'inconclusive';
}

/** The first, middle and last item. */
function sampleOf(count: number): number[] {
	return [...new Set([0, count >> 1, count - 1])].filter((i) => i >= 0);
}

function outcome(read: () => unknown): Outcome {
	try {
		return { ok: true, value: read() };
	} catch (error) {
		return { ok: false, message: error instanceof Error ? error.message : String(error) };
	}
}

function same(a: Outcome, b: Outcome): boolean {
	if (!a.ok || !b.ok) return !a.ok && !b.ok && a.message === b.message;
	return Object.is(a.value, b.value) || (typeof a.value === 'object' && JSON.stringify(a.value) === JSON.stringify(b.value));
}

function internalsPresent(ctx: IExecuteFunctions, kind: Shortcut, nodes: string[]): boolean {
	const { present } = INTERNALS[kind];
	if (present) {
		const answer = outcome(() => ctx.evaluateExpression(present, 0));
		return answer.ok && answer.value === true;
	}
	const proxy = ctx.getWorkflowDataProxy(0);
	return nodes.every((node) => {
		let data: unknown;
		try {
			data = proxy.$(node);
		} catch {
			return true; // not a node n8n knows here: the reader's own error, not a missing internal
		}
		return typeof (data as { itemMatching?: unknown })?.itemMatching === 'function';
	});
}

const DESCRIBED: Record<Shortcut, string> = {
	'whole input': 'evaluating an expression for the whole input at once',
	chunks: 'evaluating an expression for 500 items at once',
	'paired items': "evaluating $('Node').item for 500 items at once",
	'paired item reader': "reading $('Node').item directly",
};

/** What a process does instead of a shortcut it does not trust. */
const INSTEAD: Record<Shortcut, string> = {
	'whole input': 'evaluates such expressions for 500 items at once instead, if that passes its own check',
	chunks: 'reads such values one item at a time, as n8n does: the same values, only slower',
	'paired items': 'reads such values one item at a time, as n8n does: the same values, only slower',
	'paired item reader': 'reads such values one item at a time, as n8n does: the same values, only slower',
};

function distrustMessage(ctx: IExecuteFunctions, kind: Shortcut, why: string): string {
	return `n8n-nodes-idempotency: "${ctx.getNode().name}" turned off its shortcut of ${DESCRIBED[kind]}, because ${why}. Until n8n restarts, every node of this package ${INSTEAD[kind]}. Please report your n8n version at https://github.com/n8n-nodes-idempotency/n8n-nodes-idempotency/issues.`;
}

function hint(ctx: IExecuteFunctions, kind: Shortcut, why: string): void {
	const told = hinted.get(ctx) ?? new Set<Shortcut>();
	if (told.has(kind)) return;
	told.add(kind);
	hinted.set(ctx, told);
	ctx.addExecutionHints({
		message: `Values are read one item at a time here (slower, same result): this n8n failed the package's check of ${DESCRIBED[kind]}, because ${why}. See n8n's log.`,
		type: 'warning',
		location: 'outputPane',
	});
}

/** Forgets every verdict, as a new process would: for tests that change n8n under a shortcut. */
export function forgetShortcutChecks(): void {
	verdicts.clear();
}
