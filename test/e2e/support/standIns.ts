/**
 * Local stand-ins and ledger helpers for the e2e scenarios that run whole flows in a real n8n
 * (promptCache, badInput, examples). The Slack, SMTP and Stripe-like servers live in
 * test/support/destinations.ts; these are the other two things the flows call:
 *
 * - `openAiStandIn()`: an OpenAI-compatible `POST /v1/chat/completions` that counts the calls it
 *   answered and numbers its answers ("answer #1 …"), so a test can tell which call an output
 *   came from without hard-coding the text.
 * - `invoiceApi()`: a billing API with cursor pagination, `GET /api/v1/invoices?after=<id>&limit=<n>`,
 *   whose invoices the test can add to.
 *
 * And the ledger side: credential data for a table of the test's own, row counts with `pg`,
 * checkpoint reads, and the workflow JSON of examples/ with the few fields a test must point at
 * local servers.
 */
import { randomBytes, randomUUID } from 'crypto';
import * as fs from 'fs';
import http from 'http';
import type { AddressInfo } from 'net';
import * as path from 'path';
import { Client } from 'pg';

import { spawn } from 'child_process';

import { dropLedgerSql, LEDGER_TABLE_SUFFIXES } from '../../../lib/ledger/postgres/schema';
import { readBody } from '../../support/destinations';
import { freePort, repoRoot, type N8nInstance, type WorkflowJson } from './n8n';

/* ------------------------------------------------------------------------------------------ */
/* HTTP plumbing                                                                               */
/* ------------------------------------------------------------------------------------------ */

function reply(res: http.ServerResponse, status: number, body: unknown) {
	res.writeHead(status, { 'Content-Type': 'application/json' });
	res.end(JSON.stringify(body));
}

async function listen(server: http.Server): Promise<string> {
	await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
	return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function closer(server: http.Server) {
	return () =>
		new Promise<void>((resolve) => {
			server.closeAllConnections?.();
			server.close(() => resolve());
		});
}

/* ------------------------------------------------------------------------------------------ */
/* OpenAI-compatible chat completions                                                          */
/* ------------------------------------------------------------------------------------------ */

export interface ChatCall {
	n: number;
	authorization: string | undefined;
	body: { model?: string; messages?: Array<{ role: string; content: string; tool_call_id?: string }>; [k: string]: unknown };
}

export interface OpenAiStandIn {
	/** Base URL, e.g. http://127.0.0.1:1234 (POST <url>/v1/chat/completions). */
	url: string;
	/** Chat completions answered, in order. */
	calls: ChatCall[];
	close(): Promise<void>;
}

export interface ChatAnswer {
	content?: string | null;
	/** Tool calls, answered with finish_reason "tool_calls". */
	toolCalls?: Array<{ id: string; name: string; arguments: string }>;
	/** An error status instead of an answer. */
	status?: number;
	error?: string;
}

/**
 * Answers `POST /v1/chat/completions` like OpenAI: `{ id, object, model, choices: [{ message }], usage }`.
 * The content is `reply(call)` (by default `answer #<n> to: <last user message>`); `answer(call)`, when
 * it returns something, answers instead: with tool calls, or with an error status. `delayMs`
 * holds each answer back, so that concurrent runs overlap. `apiKey` makes it check the bearer token.
 */
export async function openAiStandIn(
	options: { delayMs?: number; apiKey?: string; reply?: (call: ChatCall) => string; answer?: (call: ChatCall) => ChatAnswer | undefined } = {},
): Promise<OpenAiStandIn> {
	const calls: ChatCall[] = [];
	const server = http.createServer(async (req, res) => {
		const raw = await readBody(req);
		if (req.method !== 'POST' || !/^\/v1\/chat\/completions\/?(\?.*)?$/.test(req.url ?? '')) {
			return reply(res, 404, { error: { message: `Unknown request ${req.method} ${req.url}`, type: 'invalid_request_error' } });
		}
		if (options.apiKey && req.headers.authorization !== `Bearer ${options.apiKey}`) {
			return reply(res, 401, { error: { message: 'Incorrect API key provided', type: 'invalid_request_error' } });
		}
		let body: ChatCall['body'];
		try {
			body = JSON.parse(raw);
		} catch {
			return reply(res, 400, { error: { message: 'We could not parse the JSON body of your request.', type: 'invalid_request_error' } });
		}
		const call: ChatCall = { n: calls.length + 1, authorization: req.headers.authorization, body };
		calls.push(call);
		if (options.delayMs) await new Promise((r) => setTimeout(r, options.delayMs));
		const lastUser = [...(body.messages ?? [])].reverse().find((m) => m.role === 'user')?.content ?? '';
		const special = options.answer?.(call);
		if (special?.status) return reply(res, special.status, { error: { message: special.error ?? 'Stand-in error', type: 'invalid_request_error' } });
		const content = special ? (special.content ?? null) : options.reply ? options.reply(call) : `answer #${call.n} to: ${lastUser}`;
		const toolCalls = special?.toolCalls?.map((t) => ({ id: t.id, type: 'function', function: { name: t.name, arguments: t.arguments } }));
		reply(res, 200, {
			id: `chatcmpl-${call.n}`,
			object: 'chat.completion',
			created: Math.floor(Date.now() / 1000),
			model: body.model ?? 'unknown',
			choices: [{ index: 0, message: { role: 'assistant', content, ...(toolCalls?.length ? { tool_calls: toolCalls } : {}) }, finish_reason: toolCalls?.length ? 'tool_calls' : 'stop' }],
			usage: { prompt_tokens: 20, completion_tokens: 8, total_tokens: 28 },
		});
	});
	const url = await listen(server);
	return { url, calls, close: closer(server) };
}

/* ------------------------------------------------------------------------------------------ */
/* A billing API with cursor pagination                                                        */
/* ------------------------------------------------------------------------------------------ */

export interface Invoice {
	id: number;
	number: string;
	customer_email: string;
	customer_name: string;
	amount_due: number;
	currency: string;
	due_date: string;
	status: 'open' | 'paid';
}

export interface InvoiceApi {
	/** Base URL; the flow calls <url>/api/v1/invoices. */
	url: string;
	invoices: Invoice[];
	/** Every GET /api/v1/invoices, with its `after` cursor. */
	requests: Array<{ after: string | null; limit: number; authorization: string | undefined }>;
	add(...invoices: Invoice[]): void;
	close(): Promise<void>;
}

/**
 * `GET /api/v1/invoices?status=open&after=<id>&limit=<n>`: open invoices with an id above the
 * cursor, lowest first, as `{ data: [...], has_more, next_cursor }` (next_cursor: the last id of
 * the page, or the cursor itself on an empty page). With `apiKey`, refuses other bearer tokens.
 */
export async function invoiceApi(options: { apiKey?: string; invoices?: Invoice[] } = {}): Promise<InvoiceApi> {
	const invoices: Invoice[] = [...(options.invoices ?? [])];
	const requests: InvoiceApi['requests'] = [];
	const server = http.createServer(async (req, res) => {
		await readBody(req);
		const u = new URL(req.url ?? '/', 'http://localhost');
		if (req.method !== 'GET' || u.pathname !== '/api/v1/invoices') return reply(res, 404, { error: 'not found' });
		if (options.apiKey && req.headers.authorization !== `Bearer ${options.apiKey}`) return reply(res, 401, { error: 'invalid api key' });
		const afterText = u.searchParams.get('after');
		const after = afterText === null || afterText === '' ? 0 : Number(afterText);
		const limit = Math.max(1, Math.min(100, Number(u.searchParams.get('limit') ?? 100)));
		requests.push({ after: afterText, limit, authorization: req.headers.authorization });
		if (!Number.isFinite(after)) return reply(res, 400, { error: `after must be an invoice id, got ${afterText}` });
		const status = u.searchParams.get('status');
		const matching = invoices.filter((i) => i.id > after && (!status || i.status === status)).sort((a, b) => a.id - b.id);
		const data = matching.slice(0, limit);
		reply(res, 200, { data, has_more: matching.length > limit, next_cursor: data.length ? data[data.length - 1].id : after });
	});
	const url = await listen(server);
	return { url, invoices, requests, add: (...more) => void invoices.push(...more), close: closer(server) };
}

export function invoice(id: number, overrides: Partial<Invoice> = {}): Invoice {
	return {
		id,
		number: `INV-${id}`,
		customer_email: `billing+${id}@customer.example.com`,
		customer_name: `Customer ${id}`,
		amount_due: 1000 + id,
		currency: 'eur',
		due_date: '2026-11-01',
		status: 'open',
		...overrides,
	};
}

/* ------------------------------------------------------------------------------------------ */
/* A slow network in front of a destination                                                    */
/* ------------------------------------------------------------------------------------------ */

export interface DelayingProxy {
	url: string;
	/** Milliseconds each request is held before it is forwarded (0: none). */
	delayMs: number;
	close(): Promise<void>;
}

/**
 * Forwards every request to `target` (same path, method, headers and body) after `delayMs`, so
 * that a run stays inside its send long enough for a concurrent run to meet it there.
 */
export async function delayingProxy(target: string, delayMs = 0): Promise<DelayingProxy> {
	const state = { delayMs };
	const server = http.createServer(async (req, res) => {
		const raw = await readBody(req);
		if (state.delayMs) await new Promise((r) => setTimeout(r, state.delayMs));
		const forward = http.request(new URL(req.url ?? '/', target), { method: req.method, headers: { ...req.headers, host: new URL(target).host } }, (answer) => {
			res.writeHead(answer.statusCode ?? 502, answer.headers);
			answer.pipe(res);
		});
		forward.on('error', (e) => reply(res, 502, { error: e.message }));
		forward.end(raw);
	});
	const url = await listen(server);
	return {
		url,
		get delayMs() {
			return state.delayMs;
		},
		set delayMs(ms: number) {
			state.delayMs = ms;
		},
		close: closer(server),
	};
}

/* ------------------------------------------------------------------------------------------ */
/* The ledger, seen with pg                                                                    */
/* ------------------------------------------------------------------------------------------ */

const databaseUrl = () => process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test';

/** A node of a workflow's JSON, with a fresh id, at `position`; `extra` adds other fields (credentials, webhookId). */
export const workflowNode = (name: string, type: string, typeVersion: number, position: [number, number], parameters: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
	id: randomUUID(),
	name,
	type,
	typeVersion,
	position,
	parameters,
	...extra,
});

/** The node builder of one workflow's JSON (workflowNode): each node stands `step` pixels right of the one before. */
export function nodePlacer(step = 220) {
	let x = 0;
	return (name: string, type: string, typeVersion: number, parameters: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
		workflowNode(name, type, typeVersion, [(x += step), 0], parameters, extra);
}

export const uniqueLedgerTable = (prefix: string) => `${prefix}_${randomBytes(4).toString('hex')}`;

/** Data for the `idempotencyPostgresApi` credential: the suite's PostgreSQL, a table of the test's own. */
export function ledgerCredentialData(table: string): Record<string, unknown> {
	const u = new URL(databaseUrl());
	return {
		host: u.hostname,
		port: Number(u.port || 5432),
		database: u.pathname.slice(1) || 'test',
		user: decodeURIComponent(u.username || 'postgres'),
		password: decodeURIComponent(u.password),
		ssl: 'disable',
		schema: 'public',
		table,
		poolSize: 5,
	};
}

export interface LedgerRow {
	namespace: string;
	key: string;
	step: string;
	status: string;
	[column: string]: unknown;
}

/** Reads the ledger tables of one test file directly. */
export class LedgerTables {
	private client: Client | undefined;

	constructor(readonly table: string) {
		if (!/^[a-z_][a-z0-9_]*$/.test(table)) throw new Error(`table ${table}: use [a-z0-9_]`);
	}

	private async db(): Promise<Client> {
		if (!this.client) {
			this.client = new Client({ connectionString: databaseUrl(), connectionTimeoutMillis: 5000 });
			await this.client.connect();
		}
		return this.client;
	}

	async query<T = any>(sql: string, params: unknown[] = []): Promise<T[]> {
		return (await (await this.db()).query(sql, params)).rows as T[];
	}

	async exists(suffix = ''): Promise<boolean> {
		const [row] = await this.query<{ t: string | null }>('SELECT to_regclass($1) AS t', [`public."${this.table}${suffix}"`]);
		return row.t !== null;
	}

	/** Rows per ledger table (0 for a table that does not exist yet). */
	async counts(): Promise<Record<string, number>> {
		const out: Record<string, number> = {};
		for (const suffix of LEDGER_TABLE_SUFFIXES.filter((s) => s !== '_migrations')) {
			const name = `${this.table}${suffix}`;
			out[name] = (await this.exists(suffix)) ? Number((await this.query(`SELECT count(*)::int AS n FROM public."${name}"`))[0].n) : 0;
		}
		return out;
	}

	async rows(where = 'TRUE', params: unknown[] = []): Promise<LedgerRow[]> {
		if (!(await this.exists())) return [];
		return await this.query<LedgerRow>(`SELECT * FROM public."${this.table}" WHERE ${where} ORDER BY namespace, key, step`, params);
	}

	async checkpoint(name: string): Promise<string | null> {
		if (!(await this.exists('_checkpoints'))) return null;
		const rows = await this.query<{ value: string }>(`SELECT value FROM public."${this.table}_checkpoints" WHERE name = $1`, [name]);
		return rows.length ? rows[0].value : null;
	}

	/** Drops this ledger whole (dropLedgerSql) and closes the connection. */
	async drop(): Promise<void> {
		try {
			for (const sql of dropLedgerSql('public', this.table)) await this.query(sql);
		} finally {
			await this.client?.end().catch(() => undefined);
			this.client = undefined;
		}
	}
}

/* ------------------------------------------------------------------------------------------ */
/* examples/                                                                                   */
/* ------------------------------------------------------------------------------------------ */

export interface ExampleNode {
	id: string;
	name: string;
	type: string;
	typeVersion: number;
	position: [number, number];
	parameters: Record<string, any>;
	credentials?: Record<string, { id: string | null; name: string }>;
	webhookId?: string;
	[key: string]: unknown;
}

export interface ExampleWorkflow extends WorkflowJson {
	nodes: ExampleNode[];
}

export const examplePath = (file: string) => path.join(repoRoot, 'examples', file);

/** examples/<file>, parsed, as a user would import it. */
export function loadExample(file: string): ExampleWorkflow {
	return JSON.parse(fs.readFileSync(examplePath(file), 'utf8')) as ExampleWorkflow;
}

export function nodeNamed(workflow: ExampleWorkflow, name: string): ExampleNode {
	const node = workflow.nodes.find((n) => n.name === name);
	if (!node) throw new Error(`${workflow.name}: no node named "${name}" (nodes: ${workflow.nodes.map((n) => n.name).join(', ')})`);
	return node;
}

/** Every credential the workflow's nodes reference, as `type → name`. */
export function credentialRefs(workflow: ExampleWorkflow): Map<string, string> {
	const refs = new Map<string, string>();
	for (const node of workflow.nodes) {
		for (const [type, ref] of Object.entries(node.credentials ?? {})) {
			const known = refs.get(type);
			if (known && known !== ref.name) throw new Error(`${workflow.name}: two ${type} credentials (${known}, ${ref.name})`);
			refs.set(type, ref.name);
		}
	}
	return refs;
}

/**
 * Runs another n8n CLI command (e.g. `import:workflow --input=<file>`) against an instance's
 * database and user folder, with ports of its own so it can run beside the server.
 */
export async function n8nCommand(n8n: N8nInstance, args: string[], timeoutMs = 180_000): Promise<{ code: number | null; stdout: string; stderr: string }> {
	const env = n8n.env({ port: await freePort(), brokerPort: await freePort() });
	return await new Promise((resolve) => {
		const child = spawn(n8n.runtime.nodeBin, [n8n.runtime.n8nBin, ...args], { cwd: n8n.userFolder, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
		const out: Buffer[] = [];
		const err: Buffer[] = [];
		child.stdout!.on('data', (c: Buffer) => out.push(c));
		child.stderr!.on('data', (c: Buffer) => err.push(c));
		const kill = () => {
			try {
				process.kill(-child.pid!, 'SIGKILL');
			} catch {
				/* gone */
			}
		};
		const timer = setTimeout(kill, timeoutMs);
		child.once('close', (code) => {
			clearTimeout(timer);
			kill(); // a task runner left behind
			resolve({ code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') });
		});
	});
}
