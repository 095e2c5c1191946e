/**
 * Workflow JSON for the guarded-flow e2e tests, as a user would build them on the canvas
 * (parameter shapes follow nodes/*.node.ts and the engine tests), and direct reads of the
 * ledger table with `pg`, to assert statuses without going through the product.
 */
import { randomBytes, randomUUID } from 'crypto';
import { Pool } from 'pg';

import { dropLedgerSql } from '../../../lib/ledger/postgres/schema';
import { PACKAGE_NAME, type N8nInstance, type WorkflowJson } from './n8n';

export const GATE = `${PACKAGE_NAME}.dedupeGate`;
export const SEND = `${PACKAGE_NAME}.guardedSend`;
export const MARK = `${PACKAGE_NAME}.markStepDone`;
export const LEDGER = `${PACKAGE_NAME}.idempotencyLedger`;

export type CredentialRef = { id: string; name: string };

/** The database the rest of the suite uses (globalSetup sets DATABASE_URL). */
export function ledgerDatabaseUrl(): URL {
	return new URL(process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test');
}

export const uniqueLedgerTable = (prefix: string) => `${prefix}_${randomBytes(4).toString('hex')}`;

/** Creates the ledger credential (its own table) and a Slack credential in n8n. */
export async function createCredentials(n8n: N8nInstance, table: string, slackToken: string) {
	const u = ledgerDatabaseUrl();
	const ledger = await n8n.createCredential({
		name: `Ledger ${table}`,
		type: 'idempotencyPostgresApi',
		data: {
			host: u.hostname,
			port: Number(u.port || 5432),
			database: u.pathname.slice(1),
			user: decodeURIComponent(u.username || 'postgres'),
			password: decodeURIComponent(u.password),
			ssl: 'disable',
			schema: 'public',
			table,
			poolSize: 10,
		},
	});
	const slack = await n8n.createCredential({ name: 'Slack (local)', type: 'slackApi', data: { accessToken: slackToken } });
	return { ledger: { id: ledger.id, name: ledger.name }, slack: { id: slack.id, name: slack.name } };
}

export interface Node {
	id: string;
	name: string;
	type: string;
	typeVersion: number;
	position: [number, number];
	parameters: Record<string, unknown>;
	credentials?: Record<string, CredentialRef>;
	webhookId?: string;
	[key: string]: unknown;
}

let x = 0;
export const node = (name: string, type: string, parameters: Record<string, unknown>, extra: Partial<Node> = {}): Node => ({
	id: randomUUID(),
	name,
	type,
	typeVersion: type.startsWith(PACKAGE_NAME) ? 1 : 2,
	position: [(x += 220), 0],
	parameters,
	...extra,
});

export const webhook = (path: string, responseMode: 'lastNode' | 'onReceived' = 'lastNode'): Node =>
	node(
		'Webhook',
		'n8n-nodes-base.webhook',
		// allEntries: the answer is the last node's items, [] when the gate let nothing through.
		{ httpMethod: 'POST', path, responseMode, ...(responseMode === 'lastNode' ? { responseData: 'allEntries' } : {}), options: {} },
		{ webhookId: randomUUID() },
	);

export interface Seconds {
	lease: number;
}

/** Dedupe Gate keyed by the webhook body's eventId, Mark Keys Done: When Mark Step Done Records It. */
export const dedupeGate = (ledger: CredentialRef, leaseSeconds: number): Node =>
	node(
		'Dedupe Gate',
		GATE,
		{
			backend: 'postgres',
			keySource: 'field',
			keyField: 'body.eventId',
			mode: 'lease',
			options: { lease: leaseSeconds, leaseUnit: 'seconds', retention: 1, retentionUnit: 'days', onMismatch: 'duplicate' },
		},
		{ credentials: { idempotencyPostgresApi: ledger } },
	);

export interface SendOptions {
	leaseSeconds: number;
	timeoutSeconds: number;
	maxAttempts?: number;
	initialBackoffMs?: number;
	/** Node settings (retryOnFail, maxTries, waitBetweenTries), as n8n stores them on the node. */
	nodeSettings?: Record<string, unknown>;
}

const sendCommon = (o: SendOptions, options: Record<string, unknown>) => ({
	backend: 'postgres',
	keyFrom: 'lineage',
	options: {
		...options,
		lease: o.leaseSeconds,
		leaseUnit: 'seconds',
		whenInProgress: 'review',
		onMismatch: 'review',
		completeUnit: false,
		retention: 1,
		retentionUnit: 'days',
		timeout: o.timeoutSeconds,
		maxAttempts: o.maxAttempts ?? 5,
		initialBackoff: o.initialBackoffMs ?? 200,
		maxTotalWait: 30,
	},
});

/** Guarded Send, Slack channel: "Order paid: <eventId>" to #orders through `apiUrl`. */
export const slackSend = (ledger: CredentialRef, slack: CredentialRef, apiUrl: string, o: SendOptions): Node =>
	node(
		'Notify Slack',
		SEND,
		{
			...sendCommon(o, { step: 'slackNotify' }),
			channel: 'slack',
			slackChannel: '#orders',
			slackText: '=Order paid: {{ $json.body.eventId }}',
			onAmbiguous: 'review',
			slackOptions: { apiUrl },
		},
		{ credentials: { idempotencyPostgresApi: ledger, slackApi: slack }, ...(o.nodeSettings ?? {}) },
	);

/** Guarded Send, HTTP channel: POST <url> with {event, amount}, Idempotency-Key, the API honours it. */
export const httpSend = (ledger: CredentialRef, url: string, o: SendOptions): Node =>
	node(
		'Charge',
		SEND,
		{
			...sendCommon(o, { step: 'charge', idempotencyHeader: 'Idempotency-Key', responseIdField: 'id' }),
			channel: 'http',
			method: 'POST',
			url,
			authentication: 'none',
			sendQuery: false,
			sendHeaders: false,
			sendBody: true,
			bodyContentType: 'json',
			jsonBody: '={{ JSON.stringify({ event: $json.body.eventId, amount: $json.body.amount }) }}',
			honoursKey: true,
		},
		{ credentials: { idempotencyPostgresApi: ledger }, ...(o.nodeSettings ?? {}) },
	);

export const markDone = (ledger: CredentialRef): Node =>
	node(
		'Mark Step Done',
		MARK,
		{ backend: 'postgres', keyFrom: 'lineage', step: '', status: 'completed', externalId: '', resultFrom: 'none', options: { completeUnit: false, retention: 1, retentionUnit: 'days' } },
		{ credentials: { idempotencyPostgresApi: ledger } },
	);

/**
 * Webhook → Dedupe Gate (New) → Guarded Send → (Sent and Skipped) → Mark Step Done. Gate's
 * Duplicate and In Progress outputs, and Guarded Send's Needs Review, lead nowhere: a user who
 * wants to see them looks at the execution (or the Idempotency Ledger node).
 */
export function guardedFlow(name: string, path: string, gate: Node, send: Node, mark: Node, responseMode: 'lastNode' | 'onReceived'): WorkflowJson {
	const hook = webhook(path, responseMode);
	const to = (n: Node) => ({ node: n.name, type: 'main', index: 0 });
	return {
		name,
		nodes: [hook, gate, send, mark],
		connections: {
			[hook.name]: { main: [[to(gate)]] },
			[gate.name]: { main: [[to(send)], [], []] },
			[send.name]: { main: [[to(mark)], [to(mark)], []] },
		},
		settings: { executionOrder: 'v1' },
	};
}

/* ------------------------------------------------------------------------------------------ */

export interface LedgerRow {
	namespace: string;
	key: string;
	step: string;
	status: string;
	lease_holder: string | null;
	lease_expires_at: Date | null;
	lease_live: boolean;
	phase: string | null;
	previous_phase: string | null;
	previous_status: string | null;
	attempts: number;
	external_id: string | null;
	result: any;
}

/** Reads the ledger table with its own pool; drop() removes the table and its companions. */
export function ledgerTable(table: string) {
	const pool = new Pool({ connectionString: ledgerDatabaseUrl().toString(), max: 3 });
	const q = (name: string) => `"public"."${name}"`;
	return {
		table,
		async rows(namespace: string, key?: string): Promise<LedgerRow[]> {
			const { rows } = await pool.query(
				`SELECT namespace, key, step, status, lease_holder, lease_expires_at, (lease_expires_at > now()) AS lease_live,
				        phase, previous_phase, previous_status, attempts, external_id, result
				   FROM ${q(table)} WHERE namespace = $1 AND ($2::text IS NULL OR key = $2) ORDER BY key, step`,
				[namespace, key ?? null],
			);
			return rows;
		},
		/** Polls until no row of the key holds a live lease; returns how long that took. */
		async waitForLeasesToLapse(namespace: string, keys: string[], timeoutMs = 120_000): Promise<number> {
			const started = Date.now();
			for (;;) {
				const { rows } = await pool.query(
					`SELECT count(*)::int AS n FROM ${q(table)} WHERE namespace = $1 AND key = ANY($2) AND status = 'in_progress' AND lease_expires_at > now()`,
					[namespace, keys],
				);
				if (rows[0].n === 0) return Date.now() - started;
				if (Date.now() - started > timeoutMs) throw new Error(`leases of ${keys.join(', ')} still live after ${timeoutMs} ms`);
				await new Promise((r) => setTimeout(r, 250));
			}
		},
		async audit(namespace: string): Promise<Array<{ key: string; step: string | null; action: string; actor: string | null; detail: any }>> {
			const { rows } = await pool.query(`SELECT key, step, action, actor, detail FROM ${q(`${table}_audit`)} WHERE namespace = $1 ORDER BY id`, [namespace]);
			return rows;
		},
		/** For fault injection on the test's own table (e.g. a trigger); nothing else. */
		async query(sql: string) {
			await pool.query(sql);
		},
		async drop() {
			for (const sql of dropLedgerSql('public', table)) await pool.query(sql).catch(() => undefined);
			await pool.end();
		},
	};
}

/** Runs `fn` over `items` with at most `limit` running at once. */
export async function pool<T, R>(items: T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
	const out: R[] = new Array(items.length);
	let next = 0;
	await Promise.all(
		Array.from({ length: Math.min(limit, items.length) }, async () => {
			while (next < items.length) {
				const i = next++;
				out[i] = await fn(items[i], i);
			}
		}),
	);
	return out;
}
