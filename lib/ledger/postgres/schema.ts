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
	/** Counters per namespace and UTC day (migration 4). */
	daily: string;
	migrations: string;
	/** The sequence fencing tokens are drawn from (quoted, qualified). */
	fenceSequence: string;
	/** Advisory lock key text for this ledger. */
	lockKey: string;
	/** Advisory lock key text for creating the schema, shared by every ledger in it. */
	schemaLockKey: string;
}

/**
 * Every table of one ledger, by what it adds to the ledger's table name (as tableNames names them),
 * the ledger's own first. Its fencing sequence is owned by the ledger table and goes with it.
 */
export const LEDGER_TABLE_SUFFIXES = ['', '_counters', '_checkpoints', '_audit', '_daily', '_migrations'] as const;

/**
 * A ledger's one-key claim functions are named this, then 12 hex digits of a hash of their text
 * (PostgresLedger's claimOneFunction): one per version of that text, each in the ledger's schema.
 */
export const claimFunctionPrefix = (table: string) => `${table.slice(0, 40)}_claim_`;

/**
 * SQL that drops one ledger whole: its tables (the fencing sequence goes with the ledger table)
 * and its claim functions. For tests and benches: the package itself never drops a ledger.
 */
export function dropLedgerSql(schema: string, table: string): string[] {
	const prefix = claimFunctionPrefix(table).replace(/'/g, "''");
	return [
		...LEDGER_TABLE_SUFFIXES.map((suffix) => `DROP TABLE IF EXISTS "${schema}"."${table}${suffix}"`),
		`DO $drop$ DECLARE f regprocedure; BEGIN
	FOR f IN SELECT p.oid::regprocedure FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE n.nspname = '${schema.replace(/'/g, "''")}' AND left(p.proname, ${prefix.length}) = '${prefix}' AND length(p.proname) = ${prefix.length + 12}
	LOOP EXECUTE 'DROP FUNCTION ' || f; END LOOP;
END $drop$`,
	];
}

/**
 * Far enough ahead to mean "until someone acts": the expiry of a row that may have been sent
 * (phase `sending`). Retention never throws that knowledge away.
 */
export const KEEP_UNTIL_RESOLVED = `'9999-12-31T00:00:00Z'::timestamptz`;

export function tableNames(schema: string, table: string): TableNames {
	const q = (name: string) => `"${schema}"."${name}"`;
	return {
		schema,
		ledger: q(table),
		counters: q(`${table}_counters`),
		checkpoints: q(`${table}_checkpoints`),
		audit: q(`${table}_audit`),
		daily: q(`${table}_daily`),
		migrations: q(`${table}_migrations`),
		fenceSequence: q(`${table}_fence_seq`),
		lockKey: `n8n-nodes-idempotency:${schema}.${table}`,
		schemaLockKey: `n8n-nodes-idempotency:schema:${schema}`,
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
		// 3: one lock order and fencing. Row ids compare byte by byte (COLLATE "C"), whatever the
		// database's collation, so every statement locks rows in the order the client sorts them
		// and concurrent statements cannot deadlock (this rebuilds the primary key once). Every
		// claim takes a fencing token from the sequence; writes that present an older one are refused.
		`ALTER TABLE ${t.ledger}
			ALTER COLUMN namespace TYPE text COLLATE "C",
			ALTER COLUMN key TYPE text COLLATE "C",
			ALTER COLUMN step TYPE text COLLATE "C",
			ADD COLUMN IF NOT EXISTS fence bigint;
		ALTER TABLE ${t.counters} ALTER COLUMN namespace TYPE text COLLATE "C";
		-- Owned by the column: dropping the ledger table drops its sequence too.
		CREATE SEQUENCE IF NOT EXISTS ${t.fenceSequence} OWNED BY ${t.ledger}.fence;`,
		// 4: daily counters. One row per namespace and UTC day (by the server's clock), its counters
		// as one jsonb object of exact numerics; every add is one upsert that sums key by key. The
		// index on day keeps purging old days a bounded probe.
		`CREATE TABLE IF NOT EXISTS ${t.daily} (
			namespace text COLLATE "C" NOT NULL,
			day date NOT NULL,
			counts jsonb NOT NULL,
			updated_at timestamptz NOT NULL DEFAULT now(),
			PRIMARY KEY (namespace, day)
		);
		CREATE INDEX IF NOT EXISTS "${table}_daily_day_idx" ON ${t.daily} (day);`,
	];
}
