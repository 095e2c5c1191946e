import { LedgerInputError } from './errors';
import { sha256 } from './fingerprint';

/**
 * The Prompt Cache key: SHA-256 over a normalized, versioned envelope of everything that changes
 * an LLM's answer, and nothing that does not.
 *
 *     { "v": 1, "model": "...", "messages": [...], "params": {...} }
 *
 * - `model`: trimmed.
 * - `messages`: the chat, in order. A system prompt and a plain prompt become
 *   `{role: "system"}` and `{role: "user"}` messages, so the same request reaches the same entry
 *   whether it was given as text fields, as chat messages or as an API request body. Text is
 *   trimmed and its line endings normalized to `\n`; a content list with a single text part is
 *   the same as that text.
 * - `params`: only the parameters that change the answer, under one canonical name each
 *   (`maxTokens`, `max_completion_tokens` and `max_output_tokens` are all `max_tokens`).
 *   Parameters that never change the answer (user id, stream, timeouts, metadata, ...) are left
 *   out. Parameters this module does not know are kept, so that they can never make two
 *   different requests share an answer.
 *
 * The envelope is serialized as canonical JSON (object keys sorted, no whitespace) and hashed.
 * Changing anything here that changes a hash must bump PROMPT_HASH_VERSION: stored caches stay
 * valid across package versions until it changes. test/unit/promptHash.test.ts pins known hashes.
 * Nothing here knows about n8n.
 */
export const PROMPT_HASH_VERSION = 1;

export interface PromptInput {
	model: unknown;
	/** System prompt (string, or a list of text blocks as in Anthropic's `system`). */
	system?: unknown;
	/** A single user prompt. */
	prompt?: unknown;
	/** Chat messages: `{ role, content }` (OpenAI, Anthropic, Responses API input, LangChain `type`, Gemini `parts`). */
	messages?: unknown;
	/** Request parameters; only those that change the answer reach the hash. */
	parameters?: Record<string, unknown> | null;
	/** More parameter names to keep out of the hash (any spelling). */
	ignore?: string[];
}

export interface PromptMessage {
	role: string;
	content: unknown;
	[field: string]: unknown;
}

export interface PromptEnvelope {
	v: typeof PROMPT_HASH_VERSION;
	model: string;
	messages: PromptMessage[];
	params: Record<string, unknown>;
}

export interface PromptHash {
	hash: string;
	envelope: PromptEnvelope;
	/** What went into the key, one readable line each (see keyReceipt). */
	receipt: string[];
}

/** Parameters that change the answer, by canonical name, with every spelling we accept. */
const ANSWER_PARAMETERS: Record<string, { aliases: string[]; kind: 'number' | 'stop' | 'json' }> = {
	temperature: { aliases: ['temperature'], kind: 'number' },
	top_p: { aliases: ['top_p', 'topP'], kind: 'number' },
	top_k: { aliases: ['top_k', 'topK'], kind: 'number' },
	max_tokens: {
		aliases: ['max_tokens', 'maxTokens', 'max_completion_tokens', 'maxCompletionTokens', 'max_output_tokens', 'maxOutputTokens', 'maxTokensToSample', 'max_tokens_to_sample'],
		kind: 'number',
	},
	seed: { aliases: ['seed'], kind: 'number' },
	n: { aliases: ['n'], kind: 'number' },
	frequency_penalty: { aliases: ['frequency_penalty', 'frequencyPenalty'], kind: 'number' },
	presence_penalty: { aliases: ['presence_penalty', 'presencePenalty'], kind: 'number' },
	stop: { aliases: ['stop', 'stop_sequences', 'stopSequences'], kind: 'stop' },
	tools: { aliases: ['tools', 'functions'], kind: 'json' },
	tool_choice: { aliases: ['tool_choice', 'toolChoice', 'function_call', 'functionCall'], kind: 'json' },
	response_format: { aliases: ['response_format', 'responseFormat'], kind: 'json' },
	reasoning_effort: { aliases: ['reasoning_effort', 'reasoningEffort'], kind: 'json' },
};

/**
 * Parameters that never change the answer: who asked, how the answer travels, how long to wait
 * for it, and bookkeeping. Compared after folding case and dropping `_` and `-`.
 */
export const IGNORED_PARAMETERS = [
	'user',
	'userId',
	'user_id',
	'stream',
	'stream_options',
	'timeout',
	'request_timeout',
	'max_retries',
	'metadata',
	'store',
	'service_tier',
	'api_key',
	'headers',
	'extra_headers',
	'organization',
	'project',
	'base_url',
	'baseURL',
	'prompt_cache_key',
	'prompt_cache_retention',
	'safety_identifier',
	'idempotency_key',
	'background',
	'cache_control',
];

const fold = (name: string) => name.toLowerCase().replace(/[_\-\s]/g, '');

const ALIAS_TO_CANONICAL = new Map<string, string>();
for (const [canonical, spec] of Object.entries(ANSWER_PARAMETERS)) {
	for (const alias of spec.aliases) ALIAS_TO_CANONICAL.set(fold(alias), canonical);
}
const IGNORED = new Set(IGNORED_PARAMETERS.map(fold));

/** Request-body fields that carry the prompt rather than parameters. */
const PROMPT_FIELDS = new Set(['model', 'messages', 'system', 'prompt', 'input', 'instructions', 'contents', 'systeminstruction'].map(fold));

const ROLE_ALIASES: Record<string, string> = { human: 'user', ai: 'assistant', model: 'assistant' };
const TEXT_PART_TYPES = new Set(['text', 'input_text', 'output_text']);

/** Message fields that are bookkeeping, not content. */
const MESSAGE_NOISE = new Set(['cache_control', 'refusal', 'annotations', 'logprobs']);

const bad = (message: string, hint?: string) => new LedgerInputError(message, hint);

/** Trimmed, with `\r\n` and `\r` line endings as `\n`. */
export function normalizeText(text: string): string {
	return (text.includes('\r') ? text.replace(/\r\n?/g, '\n') : text).trim();
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** JSON given as text (as n8n's JSON parameters often are) is parsed; anything else is returned as is. */
function parseMaybeJson(value: unknown, what: string): unknown {
	if (typeof value !== 'string') return value;
	const text = value.trim();
	if (!(text.startsWith('{') || text.startsWith('['))) return value;
	try {
		return JSON.parse(text);
	} catch {
		throw bad(`The ${what} looks like JSON but does not parse`, `Check the ${what}: it should be valid JSON, or an expression that returns a list or an object.`);
	}
}

/** A content part: text parts become `{type: "text", text}`, anything else is kept minus prompt-caching hints. */
function normalizePart(part: unknown): unknown {
	if (typeof part === 'string') return { type: 'text', text: normalizeText(part) };
	if (!isObject(part)) return part;
	const type = typeof part.type === 'string' ? part.type : undefined;
	if (typeof part.text === 'string' && (type === undefined || TEXT_PART_TYPES.has(type))) {
		return { type: 'text', text: normalizeText(part.text) };
	}
	const out: Record<string, unknown> = {};
	for (const [k, v] of Object.entries(part)) if (k !== 'cache_control' && v !== undefined && v !== null) out[k] = v;
	return out;
}

/** Content as text when it is only text; otherwise a list of normalized parts. Empty is null. */
function normalizeContent(content: unknown): unknown {
	if (content === undefined || content === null) return null;
	if (typeof content === 'string') {
		const text = normalizeText(content);
		return text === '' ? null : text;
	}
	if (Array.isArray(content)) {
		const parts = content.map(normalizePart).filter((p) => !(isObject(p) && p.type === 'text' && p.text === ''));
		if (parts.length === 0) return null;
		if (parts.length === 1 && isObject(parts[0]) && parts[0].type === 'text') return parts[0].text;
		return parts;
	}
	if (isObject(content) && typeof content.text === 'string' && Object.keys(content).every((k) => k === 'text' || k === 'type')) {
		return normalizeContent(content.text);
	}
	return content;
}

function normalizeMessage(message: unknown, index: number): PromptMessage | null {
	if (typeof message === 'string') {
		const content = normalizeContent(message);
		return content === null ? null : { role: 'user', content };
	}
	if (!isObject(message)) {
		throw bad(
			`Chat message ${index + 1} is ${message === null ? 'null' : Array.isArray(message) ? 'a list' : `a ${typeof message}`}, not a message`,
			'Each message should be an object such as { "role": "user", "content": "Hello" }.',
		);
	}
	const rawRole = message.role ?? message.type;
	if (typeof rawRole !== 'string' || rawRole.trim() === '') {
		throw bad(`Chat message ${index + 1} has no role`, 'Give every message a role: "system", "user", "assistant" or "tool".');
	}
	const lowered = rawRole.trim().toLowerCase();
	const role = ROLE_ALIASES[lowered] ?? lowered;
	const rawContent = message.content !== undefined ? message.content : message.parts;
	const out: PromptMessage = { role, content: normalizeContent(rawContent) };
	for (const [k, v] of Object.entries(message)) {
		if (k === 'role' || k === 'type' || k === 'content' || k === 'parts' || MESSAGE_NOISE.has(k)) continue;
		if (v === undefined || v === null || (Array.isArray(v) && v.length === 0)) continue;
		out[k] = v;
	}
	const onlyRoleAndContent = Object.keys(out).length === 2;
	// An empty system prompt is no system prompt. Empty user turns carry nothing either.
	if (out.content === null && onlyRoleAndContent) return null;
	return out;
}

function normalizeMessages(messages: unknown): PromptMessage[] {
	let list = parseMaybeJson(messages, 'chat messages');
	// n8n's OpenAI and Anthropic nodes keep their messages as { values: [...] }.
	if (isObject(list) && Array.isArray(list.values)) list = list.values;
	if (typeof list === 'string') list = [{ role: 'user', content: list }];
	if (isObject(list)) list = [list];
	if (!Array.isArray(list)) {
		throw bad('The chat messages are not a list', 'Use a list such as [{ "role": "user", "content": "Hello" }], or an expression that returns one.');
	}
	const out: PromptMessage[] = [];
	list.forEach((m, i) => {
		const normalized = normalizeMessage(m, i);
		if (normalized) out.push(normalized);
	});
	return out;
}

function normalizeSystem(system: unknown): PromptMessage | null {
	if (system === undefined || system === null) return null;
	const parsed = parseMaybeJson(system, 'system prompt');
	if (isObject(parsed) && Array.isArray(parsed.parts)) return normalizeMessage({ role: 'system', parts: parsed.parts }, 0);
	if (typeof parsed !== 'string' && !Array.isArray(parsed)) {
		throw bad('The system prompt must be text', 'Put the instructions for the model in the System Prompt as text.');
	}
	return normalizeMessage({ role: 'system', content: parsed }, 0);
}

function toNumber(value: unknown, name: string): number {
	const n = typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
	if (typeof n !== 'number' || !Number.isFinite(n)) {
		throw bad(`The model parameter "${name}" must be a number, not ${JSON.stringify(value)}`, `Set ${name} to a number such as 0.7, or leave it out.`);
	}
	return n === 0 ? 0 : n;
}

const snake = (name: string) => name.replace(/([a-z0-9])([A-Z])/g, '$1_$2').replace(/[-\s]+/g, '_').toLowerCase();

/** What the normalization left out of the key or renamed, for the key receipt. */
interface LeftOut {
	/** Parameters that never change the answer (IGNORED_PARAMETERS), as the request spelled them. */
	always: string[];
	/** Parameters the caller chose to ignore, as the request spelled them. */
	chosen: string[];
	/** Defaults that change nothing (`n: 1`, a plain-text response format). */
	defaults: string[];
	/** Spellings unified under one name, e.g. `maxTokens → max_tokens`. */
	renamed: string[];
}

function normalizeParameters(input: Record<string, unknown>, extraIgnored: Set<string>, leftOut: LeftOut): Record<string, unknown> {
	const params: Record<string, unknown> = {};
	const source: Record<string, unknown> = { ...input };
	// Responses API: text.format is the response format; reasoning.effort is the reasoning effort.
	if (isObject(source.text) && source.text.format !== undefined) {
		const { format, ...rest } = source.text;
		source.response_format ??= format;
		source.text = Object.keys(rest).length ? rest : undefined;
	}
	if (isObject(source.reasoning) && source.reasoning.effort !== undefined) {
		const { effort, ...rest } = source.reasoning;
		source.reasoning_effort ??= effort;
		source.reasoning = Object.keys(rest).length ? rest : undefined;
	}
	for (const [rawName, rawValue] of Object.entries(source)) {
		const folded = fold(rawName);
		if (PROMPT_FIELDS.has(folded) || rawValue === undefined || rawValue === null || rawValue === '') continue;
		if (IGNORED.has(folded)) {
			leftOut.always.push(rawName);
			continue;
		}
		const canonical = ALIAS_TO_CANONICAL.get(folded);
		const name = canonical ?? snake(rawName);
		if (extraIgnored.has(folded) || extraIgnored.has(fold(name))) {
			leftOut.chosen.push(rawName);
			continue;
		}
		let value: unknown;
		switch (canonical ? ANSWER_PARAMETERS[canonical].kind : 'json') {
			case 'number':
				value = toNumber(rawValue, rawName);
				break;
			case 'stop':
				value = typeof rawValue === 'string' ? [rawValue] : parseMaybeJson(rawValue, 'stop sequences');
				if (Array.isArray(value) && value.length === 0) continue;
				break;
			default:
				value = parseMaybeJson(rawValue, `model parameter "${rawName}"`);
				if (Array.isArray(value) && value.length === 0) continue;
		}
		if (name === 'n' && value === 1) {
			leftOut.defaults.push('n: 1');
			continue;
		}
		if (name === 'response_format') {
			if (value === 'text' || (isObject(value) && value.type === 'text' && Object.keys(value).length === 1)) {
				leftOut.defaults.push('response format: text');
				continue;
			}
			if (typeof value === 'string') value = { type: value };
		}
		if (name in params && canonical === undefined) {
			throw bad(`The model parameter "${rawName}" is given twice`, 'Give each parameter once.');
		}
		if (name in params) {
			if (canonicalJson(params[name]) !== canonicalJson(value)) {
				throw bad(`The model parameter "${name}" is given twice with different values`, `Remove one of the spellings of ${name}.`);
			}
			continue;
		}
		params[name] = value;
		if (name !== rawName) leftOut.renamed.push(`${rawName} → ${name}`);
	}
	return params;
}

/**
 * Canonical JSON: object keys sorted by code unit, no whitespace, `undefined` members dropped,
 * `-0` as `0`. Strings are kept exactly (whitespace inside a stop sequence or a tool schema matters).
 */
export function canonicalJson(value: unknown): string {
	const out = write(value);
	return out === undefined ? 'null' : out;
}

function write(value: unknown): string | undefined {
	switch (typeof value) {
		case 'string':
			return JSON.stringify(value);
		case 'number':
			if (!Number.isFinite(value)) throw bad(`A model parameter is ${value}, which is not a number JSON can carry`);
			return JSON.stringify(value === 0 ? 0 : value);
		case 'boolean':
			return value ? 'true' : 'false';
		case 'bigint':
			return value.toString();
		case 'object':
			break;
		default:
			return undefined;
	}
	if (value === null) return 'null';
	if (value instanceof Date) return JSON.stringify(value.toISOString());
	if (Array.isArray(value)) return `[${value.map((v) => write(v) ?? 'null').join(',')}]`;
	const names = Object.keys(value).sort();
	const members: string[] = [];
	for (const name of names) {
		const member = write((value as Record<string, unknown>)[name]);
		if (member !== undefined) members.push(`${JSON.stringify(name)}:${member}`);
	}
	return `{${members.join(',')}}`;
}

/** The normalized envelope of one request. Throws LedgerInputError with a readable reason. */
export function promptEnvelope(input: PromptInput): PromptEnvelope {
	return normalizedRequest(input).envelope;
}

function normalizedRequest(input: PromptInput): { envelope: PromptEnvelope; leftOut: LeftOut } {
	if (typeof input.model !== 'string' || input.model.trim() === '') {
		throw bad(
			input.model === undefined || input.model === null || input.model === '' ? 'The model is missing' : `The model must be text, not ${JSON.stringify(input.model)}`,
			'Set Model to the model name the AI node uses, for example "gpt-4o-mini". The model is part of the cache key.',
		);
	}
	const messages: PromptMessage[] = [];
	const system = normalizeSystem(input.system);
	if (system) messages.push(system);
	if (input.messages !== undefined && input.messages !== null && input.messages !== '') {
		messages.push(...normalizeMessages(input.messages));
	}
	if (input.prompt !== undefined && input.prompt !== null) {
		const prompt = parseMaybeJson(input.prompt, 'prompt');
		if (typeof prompt !== 'string') {
			// Responses API `input` and legacy `prompt` may be a message list.
			if (Array.isArray(prompt)) messages.push(...normalizeMessages(prompt));
			else throw bad('The prompt must be text', 'Map the prompt to a text field, e.g. {{ $json.question }}.');
		} else {
			const message = normalizeMessage({ role: 'user', content: prompt }, messages.length);
			if (message) messages.push(message);
		}
	}
	if (!messages.some((m) => m.role !== 'system')) {
		throw bad(
			'The prompt is empty',
			'Map the prompt (or the chat messages) to the field that holds the text for the model. An empty prompt is never cached.',
		);
	}
	const ignore = new Set((input.ignore ?? []).map((name) => fold(name.trim())).filter(Boolean));
	const leftOut: LeftOut = { always: [], chosen: [], defaults: [], renamed: [] };
	const envelope: PromptEnvelope = {
		v: PROMPT_HASH_VERSION,
		model: input.model.trim(),
		messages,
		params: normalizeParameters(input.parameters ?? {}, ignore, leftOut),
	};
	return { envelope, leftOut };
}

/** SHA-256 (hex) of the canonical envelope. */
export function hashEnvelope(envelope: PromptEnvelope): string {
	return sha256(canonicalJson(envelope));
}

export function promptHash(input: PromptInput): PromptHash {
	const { envelope, leftOut } = normalizedRequest(input);
	return { hash: hashEnvelope(envelope), envelope, receipt: keyReceipt(envelope, leftOut, input.ignore ?? []) };
}

/** Parameters the receipt names on lines of their own, with what they mean. */
const RECEIPT_PARTS: Array<[param: string, label: string, summary: (value: unknown) => string]> = [
	['tools', 'tools', (v) => (Array.isArray(v) ? `${v.length}: ${v.map(toolName).join(', ')}` : 'given')],
	['tool_choice', 'tool choice', (v) => short(canonicalJson(v))],
	['response_format', 'response format', (v) => (isObject(v) && typeof v.type === 'string' ? v.type : short(canonicalJson(v)))],
];

/**
 * A short hash of one part of the key: the first 8 hex digits of the SHA-256 of its canonical
 * JSON. Two receipts whose line for a part shows the same short hash had the same part (all but
 * surely); a different one shows which part differs, without showing its text.
 */
export const partHash = (value: unknown) => `#${sha256(canonicalJson(value)).slice(0, 8)}`;

function toolName(tool: unknown): string {
	if (!isObject(tool)) return '?';
	const fn = isObject(tool.function) ? tool.function : tool;
	return typeof fn.name === 'string' ? fn.name : typeof tool.type === 'string' ? tool.type : '?';
}

const short = (text: string) => (text.length > 80 ? `${text.slice(0, 77)}...` : text);

/** A parameter's value for the receipt; shortened, with its part hash, when it is too long to show. */
const shownValue = (value: unknown) => {
	const text = canonicalJson(value);
	return text.length > 80 ? `${short(text)} ${partHash(value)}` : text;
};

/**
 * The key receipt: what went into a prompt's key, one readable line each, so that a person can
 * see why two requests share an answer or do not. It names the model, each parameter with its
 * value, whether a system prompt, tools, tool choice and response format were part of the key,
 * what was left out and why, the normalization, and the key version. The system prompt, the
 * messages, tools, tool choice, response format and any parameter value too long to show carry a
 * short hash of their own (partHash), so that two receipts of different keys differ on the line of
 * the part that changed, even where the summary reads the same (a tool's description, the wording
 * of a system prompt). It never holds prompt text.
 */
export function keyReceipt(envelope: PromptEnvelope, leftOut: LeftOut, chosenIgnore: string[]): string[] {
	const system = envelope.messages.filter((m) => m.role === 'system');
	const conversation = envelope.messages.filter((m) => m.role !== 'system');
	const roles = conversation.map((m) => m.role);
	const lines = [
		`key version ${envelope.v}: SHA-256 of the normalized request`,
		`model: ${envelope.model}`,
		`system prompt: ${system.length > 0 ? `included ${partHash(system)}` : 'none in the request'}`,
		`messages: ${roles.length} (${roles.join(', ')}) ${partHash(conversation)}`,
	];
	const own = new Set(RECEIPT_PARTS.map(([param]) => param));
	for (const [name, value] of Object.entries(envelope.params).sort(([a], [b]) => (a < b ? -1 : 1))) {
		if (!own.has(name)) lines.push(`${name}: ${shownValue(value)}`);
	}
	const chosen = chosenIgnore.map((n) => n.trim()).filter(Boolean);
	const chosenNames = new Set(chosen.map((n) => ALIAS_TO_CANONICAL.get(fold(n)) ?? snake(n)));
	for (const [param, label, summary] of RECEIPT_PARTS) {
		if (param in envelope.params) lines.push(`${label}: included (${summary(envelope.params[param])}) ${partHash(envelope.params[param])}`);
		else lines.push(`${label}: ${chosenNames.has(param) ? 'ignored, your choice' : 'none in the request'}`);
	}
	if (chosen.length) lines.push(`ignored, your choice: ${chosen.join(', ')}`);
	if (leftOut.always.length) lines.push(`left out, never changes the answer: ${leftOut.always.join(', ')}`);
	if (leftOut.defaults.length) lines.push(`left out, a default that changes nothing: ${leftOut.defaults.join(', ')}`);
	lines.push(
		`normalized: text trimmed, line endings as \\n, a text-only content list as its text${leftOut.renamed.length ? `, names unified (${leftOut.renamed.join(', ')})` : ''}`,
	);
	return lines;
}

/**
 * An API request body as the HTTP node would send it: OpenAI Chat Completions (`messages`),
 * OpenAI Responses (`input`, `instructions`), Anthropic Messages (`system`, `messages`),
 * legacy completions (`prompt`) or Gemini (`contents`, `systemInstruction`). Everything else
 * in the body is a parameter.
 */
export function inputFromRequestBody(body: unknown, ignore?: string[]): PromptInput {
	const parsed = parseMaybeJson(body, 'request body');
	if (!isObject(parsed)) {
		throw bad('The request body is not an object', 'Map the request body to the JSON object the AI node or HTTP Request sends, e.g. { "model": "...", "messages": [...] }.');
	}
	const systems = [parsed.system, parsed.instructions, parsed.systemInstruction].filter((s) => s !== undefined && s !== null && s !== '');
	if (systems.length > 1) throw bad('The request body has more than one system prompt', 'Use only one of "system", "instructions" or "systemInstruction".');
	const messageSources = [parsed.messages, parsed.contents].filter((m) => m !== undefined && m !== null);
	if (messageSources.length > 1) throw bad('The request body has both "messages" and "contents"', 'Use only one of them.');
	const prompt = parsed.input ?? parsed.prompt;
	return {
		model: parsed.model,
		system: systems[0],
		messages: messageSources[0],
		prompt,
		parameters: parsed,
		ignore,
	};
}
