import { NodeOperationError, type INode, type INodeExecutionData } from 'n8n-workflow';

import { LedgerError, LedgerUnavailableError } from '../ledger/errors';

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
 * It carries no `.error` property on purpose: n8n (WorkflowExecute.normalizeNodeErrors) replaces
 * the json of such items with `{ error }`, losing the event. With "Continue (using error output)"
 * n8n moves an item to the error output when its json has only `error`/`message`/`details` keys,
 * and then merges the input item's json back in, so that form is used there.
 */
export function failedItem(node: INode, item: INodeExecutionData, index: number, error: NodeOperationError): INodeExecutionData {
	const details = error.description ? { details: error.description } : {};
	return {
		json: node.onError === 'continueErrorOutput' ? { error: error.message, ...details } : { ...item.json, error: error.message, ...details },
		...(item.binary ? { binary: item.binary } : {}),
		pairedItem: { item: index },
	};
}
