import type { IExecuteFunctions } from 'n8n-workflow';

import { LedgerInputError } from '../ledger/errors';
import { FACTS_FIELD } from './facts';
import type { FactsKey, UnitKey } from './unitKey';

/**
 * The fence around the lineage walk (lib/n8n/lineage.ts): Mark Step Done and Guarded Send find the
 * key of the Dedupe Gate an item came through by calling `$getPairedItem` of a data proxy, an
 * n8n internal. A future n8n that answered it for another item would give a wrong key, silently.
 *
 * So the first walk of a process is checked against n8n's own public answer for the same item,
 * `$('Gate').item.json.idempotency` evaluated for it (`evaluateExpression`, what a builder's
 * expression gets), and a walk that fails is checked the same way. If `$getPairedItem` is missing,
 * or the two differ, or n8n traces an item the walk could not, the process takes every key from
 * that expression from then on: the same keys, only slower, or, where n8n cannot trace an item
 * either, a per-item error that says to set "Key From" to "Expression". Never the walk's key. It
 * says so once in n8n's log, and in a hint on every node run that reads keys that way.
 */
type Verdict = { trusted: true } | { trusted: false; why: string };
let verdict: Verdict | null = null;
const hinted = new WeakSet<object>();

/** Checks a node run makes while the process has no verdict (items n8n cannot trace either decide nothing). */
const CHECKS_PER_RUN = 3;

type Answer = { ok: true; key: FactsKey | null } | { ok: false };

export interface LineageFence {
	/** Whether the walk may be taken; false once this process distrusts it (then: fromN8n). */
	walkTrusted(): boolean;
	/** The walk's key, checked against n8n's own answer while the process has no verdict. */
	checked(itemIndex: number, walked: UnitKey): UnitKey;
	/** After a walk that found no key: n8n's own key, when n8n traces the item (the walk is then distrusted). */
	afterFailedWalk(itemIndex: number, gates: string[]): UnitKey | null;
	/** The key by n8n's own `$('Gate').item`, nearest gate first; a per-item error when none gives one. */
	fromN8n(itemIndex: number, gates: string[]): UnitKey;
}

export function lineageFence(ctx: IExecuteFunctions, keyOf: (facts: unknown) => FactsKey | null): LineageFence {
	let checks = 0;
	let looked = false;

	/**
	 * n8n's own answer for the item: the key on the gate item `$('Gate').item` finds (null when that
	 * item has none), or not ok when n8n finds no item at all (n8n 1.123's vm engine answers so for
	 * items a node re-paired, where the walk does find the gate item): that decides nothing.
	 */
	const n8nAnswer = (gate: string, itemIndex: number): Answer => {
		// A string literal that cannot close the expression's braces, whatever the node is called.
		const name = JSON.stringify(gate).replace(/[{}]/g, (c) => (c === '{' ? '\\u007b' : '\\u007d'));
		try {
			const json = ctx.evaluateExpression(`{{ $(${name}).item.json }}`, itemIndex);
			if (!json || typeof json !== 'object') return { ok: false };
			return { ok: true, key: keyOf((json as Record<string, unknown>)[FACTS_FIELD]) };
		} catch {
			return { ok: false };
		}
	};

	const distrust = (why: string) => {
		verdict = { trusted: false, why };
		ctx.logger.warn(
			`n8n-nodes-idempotency: "${ctx.getNode().name}" stopped tracing items to their Dedupe Gate through $getPairedItem, because ${why}. Until n8n restarts, every node of this package takes the gate's key from n8n's own $('Gate').item instead: the same keys, only slower. Please report your n8n version at https://github.com/n8n-nodes-idempotency/n8n-nodes-idempotency/issues.`,
		);
	};

	const hint = () => {
		if (hinted.has(ctx) || verdict?.trusted !== false) return;
		hinted.add(ctx);
		ctx.addExecutionHints({
			message: `Keys from the Dedupe Gate are read one item at a time through n8n's own $('Gate').item here (slower, same keys): this n8n failed the package's check of tracing items to their gate, because ${verdict.why}. See n8n's log.`,
			type: 'warning',
			location: 'outputPane',
		});
	};

	const sameKey = (a: FactsKey, b: FactsKey | null) =>
		!!b && a.namespace === b.namespace && a.key === b.key && a.claim?.step === b.claim?.step && a.claim?.fence === b.claim?.fence;

	const fromN8n = (itemIndex: number, gates: string[]): UnitKey => {
		hint();
		for (const gate of gates) {
			const answer = n8nAnswer(gate, itemIndex);
			if (answer.ok && answer.key) return { ...answer.key, via: gate };
		}
		throw new LedgerInputError(
			`Item ${itemIndex} cannot be traced back to "${gates[0]}": n8n's own $('${gates[0]}').item finds no key for it`,
			`This n8n failed the package's check of tracing items to their Dedupe Gate (see the warning on this run), so the key is asked of n8n itself. Set "Key From" to "Expression" and point it at the field that holds the key (for example the event or order id).`,
		);
	};

	return {
		walkTrusted() {
			if (!verdict && !looked) {
				looked = true;
				const proxy = ctx.getWorkflowDataProxy(0) as unknown as { $getPairedItem?: unknown };
				if (typeof proxy.$getPairedItem !== 'function') distrust('this n8n does not answer $getPairedItem as it needs');
			}
			return verdict?.trusted !== false;
		},
		checked(itemIndex, walked) {
			if (verdict || checks >= CHECKS_PER_RUN) return walked;
			checks++;
			const answer = n8nAnswer(walked.via, itemIndex);
			if (!answer.ok) return walked; // n8n itself finds no single gate item for it: undecided
			if (sameKey(walked, answer.key)) {
				verdict = { trusted: true };
				return walked;
			}
			distrust(`it traced item ${itemIndex} to another key than n8n's own $('${walked.via}').item gives`);
			return fromN8n(itemIndex, [walked.via]);
		},
		afterFailedWalk(itemIndex, gates) {
			if (verdict || checks >= CHECKS_PER_RUN) return null;
			checks++;
			for (const gate of gates) {
				const answer = n8nAnswer(gate, itemIndex);
				if (!answer.ok || !answer.key) continue;
				distrust(`it could not trace item ${itemIndex} to "${gate}", which n8n's own $('${gate}').item does`);
				hint();
				return { ...answer.key, via: gate };
			}
			return null;
		},
		fromN8n,
	};
}

/** Forgets the verdict, as a new process would: for tests that change n8n under the walk. */
export function forgetLineageCheck(): void {
	verdict = null;
}
