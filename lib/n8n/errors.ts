import { NodeOperationError, type INode, type INodeExecutionData } from 'n8n-workflow';

import { LedgerError, LedgerUnavailableError } from '../ledger/errors';
import { n8nMajor } from './supportedN8n';

/** A ledger error as an n8n error: the message says what happened, the description how to fix it. */
export function toNodeError(node: INode, error: unknown, itemIndex?: number): NodeOperationError {
	if (error instanceof NodeOperationError) return error;
	if (error instanceof LedgerUnavailableError) {
		return new NodeOperationError(node, `The idempotency ledger is unavailable: ${error.message}`, {
			itemIndex,
			description: `${error.hint ?? ''} Nothing was let through: the node fails closed while the ledger cannot be reached.`.trim(),
		});
	}
	if (error instanceof LedgerError) {
		return new NodeOperationError(node, error.message, { itemIndex, description: error.hint });
	}
	return new NodeOperationError(node, error as Error, { itemIndex });
}

/**
 * The item a bad input leaves on when the node continues on fail: the input item's own data (so
 * nothing is lost and it can be fixed and sent again), plus `error` (what is wrong) and `details`
 * (how to fix it).
 *
 * It carries no `.error` property on purpose: n8n (WorkflowExecute) replaces the JSON of such items
 * with `{ error }`, losing the event. With "Continue (using error output)" n8n moves an item to the
 * error output when it recognises its JSON as an error, and then merges the input item's JSON back
 * in: n8n 2.x recognises JSON of only `error`/`message`/`details` keys, so the item is
 * `{ error, details }` there; n8n 1.x only `{ error }` or `{ error, message }`, so there the "how
 * to fix" follows the message in `error`.
 */
export function failedItem(node: INode, item: INodeExecutionData, index: number, error: NodeOperationError): INodeExecutionData {
	const details = error.description ? { details: error.description } : {};
	let json: INodeExecutionData['json'] = { ...item.json, error: error.message, ...details };
	if (node.onError === 'continueErrorOutput') {
		json = N8N_MAJOR >= 2 || !error.description ? { error: error.message, ...details } : { error: `${error.message.replace(/[.!?]?$/, '.')} ${error.description}` };
	}
	return {
		json,
		...(item.binary ? { binary: item.binary } : {}),
		pairedItem: { item: index },
	};
}

const N8N_MAJOR = n8nMajor();
