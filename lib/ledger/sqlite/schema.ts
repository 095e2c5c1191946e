/**
 * The Built-in ledger's file: one SQLite database per ledger, in WAL mode, its version in
 * `PRAGMA user_version`. Every table is plain, with times as integer epoch milliseconds and JSON
 * as text, so that the rows can be read (and copied into another ledger) with nothing but SQL:
 *
 * - `ledger`: one row per (namespace, key, step), the columns of a LedgerRecord, plus
 *   `previous_phase` (the phase the row had reached when the current claim took it over). A row
 *   whose `expires_at` has passed is treated as absent and deleted by purgeExpired.
 * - `counters`: duplicates blocked per namespace.
 * - `checkpoints`: (namespace, name) → value.
 * - `audit`: one row per release or "It Was Sent", `detail` a JSON object (status, phase,
 *   leaseHolder, fence, resolution).
 * - `daily`: counters per namespace and UTC day ('YYYY-MM-DD'), `counts` a JSON object.
 * - `meta`: `fence`, the last fencing token handed out (tokens only grow).
 *
 * Text compares byte by byte (SQLite's BINARY collation on UTF-8), the order every backend
 * sorts row ids in.
 */

/** Expiry of a row that may have been sent: 9999-12-31T00:00:00Z, as in the other backends. */
export const KEEP_UNTIL_RESOLVED = 253402214400000;

/** Each entry is applied once, in order; `PRAGMA user_version` counts those applied. */
export const MIGRATIONS: string[] = [
	`CREATE TABLE IF NOT EXISTS ledger (
		namespace TEXT NOT NULL,
		key TEXT NOT NULL,
		step TEXT NOT NULL DEFAULT '',
		status TEXT NOT NULL CHECK (status IN ('in_progress','completed','failed_retryable','needs_review')),
		lease_holder TEXT,
		lease_expires_at INTEGER,
		fence INTEGER,
		fingerprint TEXT,
		version TEXT,
		external_id TEXT,
		result TEXT,
		attempts INTEGER NOT NULL DEFAULT 1,
		previous_status TEXT,
		previous_phase TEXT,
		phase TEXT,
		first_seen_at INTEGER NOT NULL,
		updated_at INTEGER NOT NULL,
		expires_at INTEGER NOT NULL,
		PRIMARY KEY (namespace, key, step)
	);
	CREATE INDEX IF NOT EXISTS ledger_expires_at_idx ON ledger (expires_at);
	-- Operators list what is open (in progress, failed, needs review); completed rows are the
	-- bulk and are left out of this index, as in the PostgreSQL ledger.
	CREATE INDEX IF NOT EXISTS ledger_open_idx ON ledger (status, updated_at) WHERE status <> 'completed';
	CREATE TABLE IF NOT EXISTS counters (
		namespace TEXT PRIMARY KEY,
		duplicates_blocked INTEGER NOT NULL DEFAULT 0,
		updated_at INTEGER NOT NULL
	);
	CREATE TABLE IF NOT EXISTS checkpoints (
		namespace TEXT NOT NULL,
		name TEXT NOT NULL,
		value TEXT NOT NULL,
		updated_at INTEGER NOT NULL,
		updated_by TEXT,
		PRIMARY KEY (namespace, name)
	);
	CREATE TABLE IF NOT EXISTS audit (
		id INTEGER PRIMARY KEY AUTOINCREMENT,
		namespace TEXT NOT NULL,
		key TEXT NOT NULL,
		step TEXT,
		action TEXT NOT NULL,
		actor TEXT,
		at INTEGER NOT NULL,
		detail TEXT
	);
	CREATE TABLE IF NOT EXISTS daily (
		namespace TEXT NOT NULL,
		day TEXT NOT NULL,
		counts TEXT NOT NULL,
		updated_at INTEGER NOT NULL,
		PRIMARY KEY (namespace, day)
	);
	CREATE INDEX IF NOT EXISTS daily_day_idx ON daily (day);
	CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
	INSERT OR IGNORE INTO meta (name, value) VALUES ('fence', 0);`,
];

/** SQL: the ledger's clock, this machine's time as SQLite reads it, in epoch milliseconds. */
export const NOW_MS = `CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)`;
