import type { INodeProperties } from 'n8n-workflow';

import { DEFAULT_COMMAND_TIMEOUT_MS, DEFAULT_CONNECT_TIMEOUT_MS } from '../ledger/duration';
import { LedgerInputError } from '../ledger/errors';

/**
 * The two time limits both ledger credentials offer, Timeout (Seconds) for connecting and Command
 * Timeout (Seconds) for one statement or command: their fields, and their values in milliseconds.
 * No driver is imported here, so the credential classes stay light.
 */

const MIN_SECONDS = 1;
const MAX_SECONDS = 600;
const CONNECT_DEFAULT_S = DEFAULT_CONNECT_TIMEOUT_MS / 1000;
const COMMAND_DEFAULT_S = DEFAULT_COMMAND_TIMEOUT_MS / 1000;

/** The fields, for the credential named by `server` ('PostgreSQL', 'Redis'). */
export function timeoutProperties(server: string, oneCommand: 'statement' | 'command'): INodeProperties[] {
	const seconds = { type: 'number' as const, typeOptions: { minValue: MIN_SECONDS, maxValue: MAX_SECONDS } };
	return [
		{
			displayName: 'Timeout (Seconds)',
			name: 'timeout',
			...seconds,
			default: CONNECT_DEFAULT_S,
			description: `How long to wait for ${server} to accept and answer a new connection before the node stops with a timeout error (nothing is let through).`,
		},
		{
			displayName: 'Command Timeout (Seconds)',
			name: 'commandTimeout',
			...seconds,
			default: COMMAND_DEFAULT_S,
			description: `How long one ${oneCommand} to ${server} may take before the node stops with a timeout error. A claim of 10,000 keys takes well under a second; raise it only if Stats or Purge on a very large ledger need longer.`,
		},
	];
}

/** The credential's time limits in milliseconds; a field left empty is left out (its default applies). */
export function timeoutsFrom(data: Record<string, unknown>): { connectTimeoutMs?: number; commandTimeoutMs?: number } {
	const connectTimeoutMs = secondsFrom(
		data.timeout,
		'Timeout (Seconds)',
		`Leave it at ${CONNECT_DEFAULT_S} unless the ledger is far away or slow to accept connections.`,
	);
	const commandTimeoutMs = secondsFrom(
		data.commandTimeout,
		'Command Timeout (Seconds)',
		`Leave it at ${COMMAND_DEFAULT_S} unless Stats or Purge on a very large ledger need longer.`,
	);
	return {
		...(connectTimeoutMs === undefined ? {} : { connectTimeoutMs }),
		...(commandTimeoutMs === undefined ? {} : { commandTimeoutMs }),
	};
}

function secondsFrom(value: unknown, field: string, hint: string): number | undefined {
	if (value === undefined || value === null || value === '') return undefined;
	const secondsValue = Number(value);
	if (!Number.isFinite(secondsValue) || secondsValue < MIN_SECONDS || secondsValue > MAX_SECONDS) {
		throw new LedgerInputError(
			`The ledger credential's ${field} ${JSON.stringify(value)} must be a number from ${MIN_SECONDS} to ${MAX_SECONDS}`,
			hint,
		);
	}
	return Math.round(secondsValue * 1000);
}
