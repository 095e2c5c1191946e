/**
 * What an AI Agent reads back when Guarded Send is its tool: one short sentence a model can act on,
 * and a few facts. Never an empty answer, and never the incoming item: that item is the agent's
 * own input (a webhook's headers and body, tokens and signatures included), which must not go to
 * the model provider.
 *
 * n8n hands the agent only what a tool puts on its first output, so in tool mode every item, on
 * whatever output it went, is answered there.
 */
import type { IDataObject, IExecuteFunctions, INodeExecutionData, NodeOperationError } from 'n8n-workflow';

/** n8n runs a node used as an agent's tool under its type name with "Tool" appended. */
export const isToolCall = (ctx: IExecuteFunctions): boolean => ctx.getNode().type.endsWith('Tool');

const str = (value: unknown): string | null => (typeof value === 'string' && value !== '' ? value : typeof value === 'number' ? String(value) : null);
const withId = (externalId: string | null) => (externalId ? ` (message ID ${externalId})` : '');
/** Text as one sentence: a full stop at its end, unless it ends with one of its own. */
const sentence = (text: string) => text.trim().replace(/[.!?]?$/, (end) => end || '.');
const on = (at: string | null) => (at ? ` on ${at}` : '');

/** The sentence for one item, from the facts the node routed it with. */
export function toolSentence(facts: IDataObject, error?: NodeOperationError): string {
	if (error) {
		const hint = str((error as { description?: unknown }).description);
		return `Not sent: ${sentence(error.message)}${hint ? ` ${sentence(hint)}` : ''} Nothing was sent by this call; do not retry until the problem above is fixed.`;
	}
	const externalId = str(facts.externalId);
	const reason = str(facts.reason);
	switch (facts.outcome) {
		case 'sent':
			return `Sent${withId(externalId)}. It is done; do not send it again.`;
		case 'skipped':
			if (reason === 'mismatch') {
				return `Already sent${on(str(facts.sentAt))}${withId(externalId)} with other wording; this wording was not sent. It is done; do not retry.`;
			}
			if (facts.recovered === true) return `Already sent${withId(externalId)}: an earlier attempt stopped before it was recorded, and the destination confirms it arrived. It was not sent again; do not retry.`;
			return `Already sent${on(str(facts.sentAt))}${withId(externalId)}; it was not sent again. Do not retry.`;
		case 'in_progress':
			if (reason === 'check_later') return `Not sent yet: an earlier attempt may have sent it, and the destination could not be asked right now; it is checked again later. Do not retry.`;
			return 'Being sent right now by another run; it was not sent here. Do not retry.';
		default:
			if (facts.status === 'failed_retryable') {
				return `Not sent: ${str(facts.detail) ?? 'the destination did not accept it'}. The workflow will try again later; retrying now is unlikely to help.`;
			}
			return `Not sent: it needs a person, because ${lowerFirst(str(facts.detail) ?? 'the outcome could not be decided')}. Do not retry; tell the user that a person will look at it.`;
	}
}

/** "The key…" → "the key…" after "because"; "HTTP 400…" stays as it is. */
const lowerFirst = (text: string) => (/^[A-Z][a-z]/.test(text) ? text.charAt(0).toLowerCase() + text.slice(1) : text);

/**
 * The facts that go with the sentence: what happened, never the item or the destination's whole
 * response (a refusal's reason is quoted in the sentence: the model needs it to decide).
 */
function toolFacts(facts: IDataObject): IDataObject {
	const keep: IDataObject = {};
	for (const name of ['outcome', 'status', 'reason', 'externalId', 'sentAt', 'key', 'step'] as const) {
		if (facts[name] !== undefined && facts[name] !== null) keep[name] = facts[name];
	}
	return keep;
}

/** Every routed item as one answer on the first output (the only one n8n gives the agent). */
export function toolOutputs(
	routed: Array<{ facts: IDataObject; error?: NodeOperationError } | undefined>,
	outputCount: number,
): INodeExecutionData[][] {
	const answers: INodeExecutionData[] = [];
	routed.forEach((r, index) => {
		if (!r) return;
		answers.push({ json: { response: toolSentence(r.facts, r.error), ...toolFacts(r.error ? { outcome: 'error' } : r.facts) }, pairedItem: { item: index } });
	});
	return [answers, ...Array.from({ length: outputCount - 1 }, () => [])];
}
