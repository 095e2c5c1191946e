/**
 * Versioned schema for the PostgreSQL ledger. Migrations run inside one transaction under a
 * transaction-level advisory lock, so many processes may start at once, and nothing outlives
 * the transaction (PgBouncer transaction mode works).
 */

export interface TableNames {
	schema: string;
	/** Quoted, qualified names, built only from validated identifiers. */
	ledger: string;
	counters: string;
	checkpoints: string;
	audit: string;
	migrations: string;
	/** Advisory lock key text for this ledger. */
	lockKey: string;
}

export function tableNames(schema: string, table: string): TableNames {
	const q = (name: string) => `"${schema}"."${name}"`;
	return {
		schema,
		ledger: q(table),
		counters: q(`${table}_counters`),
		checkpoints: q(`${table}_checkpoints`),
		audit: q(`${table}_audit`),
		migrations: q(`${table}_migrations`),
		lockKey: `n8n-nodes-idempotency:${schema}.${table}`,
	};
}

/** Each entry is applied once, in order, and recorded in the migrations table. */
export function migrations(t: TableNames, table: string): string[] {
	return [
		`CREATE TABLE IF NOT EXISTS ${t.ledger} (
			namespace text NOT NULL,
			key text NOT NULL,
			step text NOT NULL DEFAULT '',
			status text NOT NULL CHECK (status IN ('in_progress','completed','failed_retryable','needs_review')),
			lease_holder text,
			lease_expires_at timestamptz,
			fingerprint text,
			version text,
			external_id text,
			result jsonb,
			attempts integer NOT NULL DEFAULT 1,
			previous_status text,
			first_seen_at timestamptz NOT NULL DEFAULT now(),
			updated_at timestamptz NOT NULL DEFAULT now(),
			expires_at timestamptz NOT NULL,
			PRIMARY KEY (namespace, key, step)
		);
		-- BRIN: rows arrive in roughly increasing expiry order, so purging stays bounded while
		-- inserts pay almost nothing for this index.
		CREATE INDEX IF NOT EXISTS "${table}_expires_at_idx" ON ${t.ledger} USING brin (expires_at);
		-- Operators list what is open (in progress, failed, needs review); completed rows are the
		-- bulk and are left out of this index.
		CREATE INDEX IF NOT EXISTS "${table}_open_idx" ON ${t.ledger} (status, updated_at) WHERE status <> 'completed';
		CREATE TABLE IF NOT EXISTS ${t.counters} (
			namespace text PRIMARY KEY,
			duplicates_blocked bigint NOT NULL DEFAULT 0,
			updated_at timestamptz NOT NULL DEFAULT now()
		);
		CREATE TABLE IF NOT EXISTS ${t.checkpoints} (
			namespace text NOT NULL,
			name text NOT NULL,
			value text NOT NULL,
			updated_at timestamptz NOT NULL DEFAULT now(),
			updated_by text,
			PRIMARY KEY (namespace, name)
		);
		CREATE TABLE IF NOT EXISTS ${t.audit} (
			id bigserial PRIMARY KEY,
			namespace text NOT NULL,
			key text NOT NULL,
			step text,
			action text NOT NULL,
			actor text,
			at timestamptz NOT NULL DEFAULT now(),
			detail jsonb
		);`,
		// 2: recovery points. `phase` is how far the current holder got (e.g. 'sending');
		// `previous_phase` keeps what the row had reached when a claim took it over, so the new
		// holder can tell "claimed, nothing sent" from "may have sent".
		`ALTER TABLE ${t.ledger} ADD COLUMN IF NOT EXISTS phase text;
		ALTER TABLE ${t.ledger} ADD COLUMN IF NOT EXISTS previous_phase text;`,
	];
}
