/**
 * Reading the answer and its token usage out of the response shapes the Prompt Cache meets.
 * The cache stores the AI node's output as it is; these helpers only read it, for the `text`
 * fact, the tokens and money saved, and the comparison of answers in shadow mode. No n8n imports.
 *
 * - n8n OpenAI node, "Message a Model" simplified: `{ message: { content } }` (one item per choice)
 * - OpenAI Chat Completions, full (OpenAI node with Simplify off, or the HTTP Request node):
 *   `{ choices: [{ message: { content } }], usage: { total_tokens } }`
 * - OpenAI Responses API: `{ output: [{ type: "message", content: [{ type: "output_text", text }] }] }`
 *   or `output_text`
 * - n8n Anthropic node and the Messages API: `{ content: [{ type: "text", text }], usage: { input_tokens, output_tokens } }`
 * - Gemini: `{ candidates: [{ content: { parts: [{ text }] } }], usageMetadata: { totalTokenCount } }`
 * - LangChain chains and the AI Agent: `{ text }`, `{ output }`, `{ response }`
 */

import { sha256 } from '../../lib/ledger/fingerprint';
import { canonicalJson, normalizeText } from '../../lib/ledger/promptHash';

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Text of a content value: a string, a parsed JSON answer, or a list of parts. */
function contentText(content: unknown): string | null {
	if (typeof content === 'string') return content;
	if (Array.isArray(content)) {
		const texts = content
			.map((part) => (typeof part === 'string' ? part : isObject(part) && typeof part.text === 'string' && (part.type === undefined || part.type === 'text' || part.type === 'output_text') ? part.text : null))
			.filter((t): t is string => t !== null);
		return texts.length ? texts.join('') : null;
	}
	// The OpenAI node parses JSON answers ("Output Content as JSON") into objects.
	if (isObject(content)) return JSON.stringify(content);
	return null;
}

/** The answer's text, or null when the shape is not one we know. */
export function responseText(response: unknown): string | null {
	if (typeof response === 'string') return response;
	if (!isObject(response)) return null;
	if (isObject(response.message) && response.message.content !== undefined) {
		const text = contentText(response.message.content);
		if (text !== null) return text;
	}
	if (Array.isArray(response.choices) && response.choices.length > 0) {
		const first = response.choices[0];
		if (isObject(first)) {
			if (isObject(first.message)) {
				const text = contentText(first.message.content);
				if (text !== null) return text;
			}
			if (typeof first.text === 'string') return first.text;
		}
	}
	if (typeof response.output_text === 'string') return response.output_text;
	if (Array.isArray(response.output)) {
		const texts: string[] = [];
		for (const item of response.output) {
			if (isObject(item) && item.type === 'message') {
				const text = contentText(item.content);
				if (text !== null) texts.push(text);
			}
		}
		if (texts.length) return texts.join('');
	}
	if (typeof response.merged_response === 'string') return response.merged_response;
	if (Array.isArray(response.content)) {
		const text = contentText(response.content);
		if (text !== null) return text;
	}
	if (Array.isArray(response.candidates) && isObject(response.candidates[0]) && isObject(response.candidates[0].content)) {
		const text = contentText(response.candidates[0].content.parts);
		if (text !== null) return text;
	}
	for (const field of ['text', 'output', 'response', 'content', 'answer', 'completion']) {
		if (typeof response[field] === 'string') return response[field] as string;
	}
	return null;
}

const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : null);

/** The usage object of a response, wherever the shape keeps it. */
export function responseUsage(response: unknown): Record<string, unknown> | null {
	if (!isObject(response)) return null;
	if (isObject(response.usage)) return response.usage;
	if (isObject(response.usageMetadata)) return response.usageMetadata;
	if (isObject(response.tokenUsage)) return response.tokenUsage;
	if (isObject(response.response_metadata) && isObject(response.response_metadata.tokenUsage)) return response.response_metadata.tokenUsage;
	return null;
}

/**
 * Total tokens of a usage object: OpenAI `total_tokens` (or prompt + completion), Anthropic
 * `input_tokens + output_tokens` (cache reads and writes included), Gemini `totalTokenCount`,
 * LangChain `totalTokens`. Null when the usage says nothing we can count.
 */
export function usageTokens(usage: unknown): number | null {
	if (!isObject(usage)) return null;
	const total = num(usage.total_tokens) ?? num(usage.totalTokens) ?? num(usage.totalTokenCount);
	if (total !== null) return total;
	const input = num(usage.input_tokens) ?? num(usage.prompt_tokens) ?? num(usage.promptTokens) ?? num(usage.promptTokenCount);
	const output = num(usage.output_tokens) ?? num(usage.completion_tokens) ?? num(usage.completionTokens) ?? num(usage.candidatesTokenCount);
	if (input === null && output === null) return null;
	const cached = (num(usage.cache_creation_input_tokens) ?? 0) + (num(usage.cache_read_input_tokens) ?? 0);
	return (input ?? 0) + (output ?? 0) + cached;
}

/**
 * Input (prompt) and output (completion) tokens of a usage object, each null when the usage does
 * not say: OpenAI `prompt_tokens`/`completion_tokens` (Chat Completions) or
 * `input_tokens`/`output_tokens` (Responses API), Anthropic `input_tokens`/`output_tokens` with its
 * cache reads and writes counted as input, Gemini `promptTokenCount`/`candidatesTokenCount`,
 * LangChain `promptTokens`/`completionTokens` (n8n's AI nodes).
 */
export function usageSplit(usage: unknown): { input: number | null; output: number | null } {
	if (!isObject(usage)) return { input: null, output: null };
	let input = num(usage.input_tokens) ?? num(usage.prompt_tokens) ?? num(usage.promptTokens) ?? num(usage.promptTokenCount);
	const cached = (num(usage.cache_creation_input_tokens) ?? 0) + (num(usage.cache_read_input_tokens) ?? 0);
	if (input !== null || cached > 0) input = (input ?? 0) + cached;
	const output = num(usage.output_tokens) ?? num(usage.completion_tokens) ?? num(usage.completionTokens) ?? num(usage.candidatesTokenCount);
	return { input, output };
}

/**
 * A digest of the answer, for shadow mode's "did the fresh answer differ from the cached one": the
 * answer's text (trimmed, line endings normalized) where the shape has one, so that ids, creation
 * times and usage that differ on every call do not count as a different answer; otherwise the
 * whole response as canonical JSON.
 */
export function answerDigest(response: unknown): string {
	const text = responseText(response);
	return sha256(text !== null ? `text:${normalizeText(text)}` : `json:${canonicalJson(response)}`);
}

/** The model the provider says answered, if the response names it. */
export function responseModel(response: unknown): string | null {
	if (!isObject(response)) return null;
	if (typeof response.model === 'string') return response.model;
	if (typeof response.modelVersion === 'string') return response.modelVersion;
	return null;
}

/**
 * Whether the item is an error the AI node passed on (with "Continue on fail"), rather than
 * an answer. Errors are never cached.
 */
export function looksLikeError(response: unknown): boolean {
	if (!isObject(response)) return false;
	if (response.error === undefined || response.error === null || response.error === false) return false;
	return responseText(response) === null;
}
