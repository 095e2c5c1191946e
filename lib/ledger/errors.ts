/** Typed ledger errors. Messages say what happened; `hint` says how to fix it. */

export class LedgerError extends Error {
	constructor(
		message: string,
		readonly hint?: string,
	) {
		super(message);
		this.name = new.target.name;
	}
}

/** The caller passed something the ledger refuses to store. Nothing was written. */
export class LedgerInputError extends LedgerError {}

/**
 * The ledger answers, but a setting makes it unsafe to use (a Redis that can lose keys, the
 * Built-in ledger in queue mode). Not an outage: a node fails closed whatever its "if the ledger
 * is down" option says, and the message names the setting to change.
 */
export class LedgerSettingError extends LedgerError {}

/** The ledger could not be reached or used. No side effect should follow. */
export class LedgerUnavailableError extends LedgerError {
	constructor(
		message: string,
		hint: string,
		readonly code?: string,
	) {
		super(message, hint);
	}
}

/** A checkpoint was asked to move backwards without `force`. */
export class CheckpointRegressionError extends LedgerError {
	constructor(
		readonly current: string,
		readonly requested: string,
	) {
		super(
			`The checkpoint is at "${current}" and will not move back to "${requested}"`,
			'Turn on "Force" to move a checkpoint backwards on purpose.',
		);
	}
}
