import { looksLikeError, responseModel, responseText, responseUsage, usageTokens } from '../../nodes/PromptCache/responseShapes';

describe('reading answers out of the response shapes the Prompt Cache meets', () => {
	const cases: Array<[string, unknown, string | null]> = [
		['OpenAI node V1, simplified', { index: 0, message: { role: 'assistant', content: 'Hi' }, finish_reason: 'stop' }, 'Hi'],
		['OpenAI node, JSON output parsed into an object', { message: { role: 'assistant', content: { a: 1 } } }, '{"a":1}'],
		['OpenAI chat completion (full / HTTP)', { choices: [{ message: { content: 'Hello' } }, { message: { content: 'other' } }] }, 'Hello'],
		['legacy completion', { choices: [{ text: 'Done' }] }, 'Done'],
		['OpenAI Responses, simplified', { output: [{ type: 'reasoning' }, { type: 'message', content: [{ type: 'output_text', text: 'A' }, { type: 'output_text', text: 'B' }] }] }, 'AB'],
		['OpenAI Responses output_text', { output_text: 'T' }, 'T'],
		['Anthropic node, simplified', { content: [{ type: 'text', text: 'x' }, { type: 'tool_use', id: 't' }, { type: 'text', text: 'y' }] }, 'xy'],
		['Anthropic merged_response', { merged_response: 'm', content: [] }, 'm'],
		['Gemini', { candidates: [{ content: { parts: [{ text: 'g' }] } }] }, 'g'],
		['LangChain chain', { text: 'chain' }, 'chain'],
		['AI Agent', { output: 'agent' }, 'agent'],
		['a plain string', 'raw', 'raw'],
		['an unknown shape', { foo: 1 }, null],
		['null', null, null],
	];
	test.each(cases)('%s', (_name, response, text) => {
		expect(responseText(response)).toBe(text);
	});

	test('token usage in each provider\'s words', () => {
		expect(usageTokens({ prompt_tokens: 21, completion_tokens: 9, total_tokens: 30 })).toBe(30);
		expect(usageTokens({ prompt_tokens: 21, completion_tokens: 9 })).toBe(30);
		expect(usageTokens({ input_tokens: 40, output_tokens: 12 })).toBe(52);
		expect(usageTokens({ input_tokens: 40, output_tokens: 12, cache_read_input_tokens: 100, cache_creation_input_tokens: 8 })).toBe(160);
		expect(usageTokens({ input_tokens: 5, output_tokens: 6, total_tokens: 11 })).toBe(11);
		expect(usageTokens({ totalTokenCount: 77 })).toBe(77);
		expect(usageTokens({ promptTokens: 1, completionTokens: 2 })).toBe(3);
		expect(usageTokens({ something: 1 })).toBeNull();
		expect(usageTokens(null)).toBeNull();
		expect(usageTokens({ total_tokens: -3 })).toBeNull();
	});

	test('where usage and the model are found', () => {
		expect(responseUsage({ usage: { total_tokens: 1 } })).toEqual({ total_tokens: 1 });
		expect(responseUsage({ usageMetadata: { totalTokenCount: 2 } })).toEqual({ totalTokenCount: 2 });
		expect(responseUsage({ response_metadata: { tokenUsage: { totalTokens: 3 } } })).toEqual({ totalTokens: 3 });
		expect(responseUsage({ message: {} })).toBeNull();
		expect(responseModel({ model: 'gpt-4o' })).toBe('gpt-4o');
		expect(responseModel({ modelVersion: 'gemini-2.0' })).toBe('gemini-2.0');
		expect(responseModel({})).toBeNull();
	});

	test('an error the AI node passed on is recognized; an answer that mentions errors is not', () => {
		expect(looksLikeError({ error: 'Rate limit reached' })).toBe(true);
		expect(looksLikeError({ error: { message: 'bad key' } })).toBe(true);
		expect(looksLikeError({ message: { content: 'The error was fixed' }, error: null })).toBe(false);
		expect(looksLikeError({ choices: [{ message: { content: 'ok' } }], error: 'partial' })).toBe(false);
		expect(looksLikeError({ content: [{ type: 'text', text: 'fine' }] })).toBe(false);
	});
});
