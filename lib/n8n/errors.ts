import { NodeOperationError, type INode } from 'n8n-workflow';

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
