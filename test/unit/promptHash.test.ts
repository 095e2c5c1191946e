import { LedgerInputError } from '../../lib/ledger/errors';
import {
	canonicalJson,
	inputFromRequestBody,
	normalizeText,
	PROMPT_HASH_VERSION,
	promptEnvelope,
	promptHash,
	type PromptInput,
} from '../../lib/ledger/promptHash';

const base: PromptInput = {
	model: 'gpt-4o-mini',
	system: 'You are terse.',
	prompt: 'Name three primes.',
	parameters: { temperature: 0.2, max_tokens: 100 },
};
const h = (input: PromptInput) => promptHash(input).hash;
const withParams = (parameters: Record<string, unknown>, input: PromptInput = base) => ({ ...input, parameters });

describe('prompt hash: the envelope is versioned and pinned', () => {
	test('version 1 envelope and its exact hash (changing either breaks every stored cache)', () => {
		const { hash, envelope } = promptHash(base);
		expect(envelope).toEqual({
			v: 1,
			model: 'gpt-4o-mini',
			messages: [
				{ role: 'system', content: 'You are terse.' },
				{ role: 'user', content: 'Name three primes.' },
			],
			params: { max_tokens: 100, temperature: 0.2 },
		});
		expect(canonicalJson(envelope)).toBe(
			'{"messages":[{"content":"You are terse.","role":"system"},{"content":"Name three primes.","role":"user"}],"model":"gpt-4o-mini","params":{"max_tokens":100,"temperature":0.2},"v":1}',
		);
		// sha256 of exactly that text (printf '%s' '<text>' | sha256sum).
		expect(hash).toBe('1e15303d08b6e78bcc6ae5588bc71a8c2d0edbb65c35db08f3107b7dbc752a20');
		expect(PROMPT_HASH_VERSION).toBe(1);
	});

	test('a second pinned hash: chat messages with tools and a JSON response format', () => {
		const { hash } = promptHash({
			model: 'claude-3-5-haiku-latest',
			messages: [{ role: 'user', content: 'Weather in Oslo?' }],
			parameters: {
				tools: [{ name: 'weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } }],
				response_format: { type: 'json_object' },
				seed: 7,
			},
		});
		expect(hash).toBe(PINNED.toolsAndJson);
	});
});

// Pinned when envelope version 1 was written. A different value means the envelope or its
// serialization changed, which must come with a new PROMPT_HASH_VERSION.
const PINNED = {
	toolsAndJson: 'f9879f8bce308c3c00b01366162f28f9f1c9eb9aa2632ec675062e60c477ad55',
};

describe('prompt hash: what must NOT change the hash', () => {
	const same: Array<[string, PromptInput]> = [
		['surrounding whitespace in the prompt', { ...base, prompt: '  Name three primes.\n\n' }],
		['surrounding whitespace in the system prompt', { ...base, system: '\tYou are terse.  ' }],
		['CRLF line endings', { ...base, prompt: 'Name three primes.', system: 'You are terse.\r\n' }],
		['whitespace around the model name', { ...base, model: ' gpt-4o-mini ' }],
		['parameter order', withParams({ max_tokens: 100, temperature: 0.2 })],
		['a number given as text', withParams({ temperature: '0.2', max_tokens: '100' })],
		['a number written differently', withParams({ temperature: 0.2, max_tokens: 100.0 })],
		['camelCase spelling (n8n options)', withParams({ temperature: 0.2, maxTokens: 100 })],
		['max_completion_tokens (OpenAI)', withParams({ temperature: 0.2, max_completion_tokens: 100 })],
		['max_output_tokens (Responses API)', withParams({ temperature: 0.2, max_output_tokens: 100 })],
		['a user id', withParams({ temperature: 0.2, max_tokens: 100, user: 'customer-42' })],
		['user_id / userId', withParams({ temperature: 0.2, max_tokens: 100, user_id: 'a', userId: 'b' })],
		['stream on', withParams({ temperature: 0.2, max_tokens: 100, stream: true, stream_options: { include_usage: true } })],
		['a request timeout', withParams({ temperature: 0.2, max_tokens: 100, timeout: 30000, requestTimeout: 5000, request_timeout: 9 })],
		['retries', withParams({ temperature: 0.2, max_tokens: 100, maxRetries: 3 })],
		['metadata', withParams({ temperature: 0.2, max_tokens: 100, metadata: { run: 'abc', ts: Date.now() } })],
		['store / service tier', withParams({ temperature: 0.2, max_tokens: 100, store: true, service_tier: 'flex' })],
		['prompt cache key and safety identifier', withParams({ temperature: 0.2, max_tokens: 100, prompt_cache_key: 'x', safety_identifier: 'y' })],
		['null and undefined parameters', withParams({ temperature: 0.2, max_tokens: 100, top_p: null, seed: undefined })],
		['an empty parameter string', withParams({ temperature: 0.2, max_tokens: 100, seed: '' })],
		['an empty tool list', withParams({ temperature: 0.2, max_tokens: 100, tools: [] })],
		['response format "text" (the default)', withParams({ temperature: 0.2, max_tokens: 100, response_format: 'text' })],
		['response format { type: "text" }', withParams({ temperature: 0.2, max_tokens: 100, response_format: { type: 'text' } })],
		['n = 1 (the default)', withParams({ temperature: 0.2, max_tokens: 100, n: 1 })],
		['chat messages instead of system + prompt', {
			model: 'gpt-4o-mini',
			messages: [
				{ role: 'system', content: 'You are terse.' },
				{ role: 'user', content: 'Name three primes.' },
			],
			parameters: base.parameters,
		}],
		['messages as JSON text', {
			model: 'gpt-4o-mini',
			messages: '[{"role":"system","content":"You are terse."},{"role":"user","content":"Name three primes."}]',
			parameters: base.parameters,
		}],
		['n8n OpenAI node messages ({ values: [...] })', {
			model: 'gpt-4o-mini',
			messages: { values: [{ role: 'system', content: 'You are terse.' }, { content: 'Name three primes.', role: 'user' }] },
			parameters: base.parameters,
		}],
		['a single text part instead of text', {
			model: 'gpt-4o-mini',
			system: [{ type: 'text', text: 'You are terse.', cache_control: { type: 'ephemeral' } }],
			messages: [{ role: 'user', content: [{ type: 'text', text: 'Name three primes.' }] }],
			parameters: base.parameters,
		}],
		['Responses API input_text parts', {
			model: 'gpt-4o-mini',
			system: 'You are terse.',
			messages: [{ role: 'user', content: [{ type: 'input_text', text: 'Name three primes. ' }] }],
			parameters: base.parameters,
		}],
		['LangChain message types', {
			model: 'gpt-4o-mini',
			messages: [{ type: 'system', content: 'You are terse.' }, { type: 'human', content: 'Name three primes.' }],
			parameters: base.parameters,
		}],
		['role written in capitals', {
			model: 'gpt-4o-mini',
			messages: [{ role: 'System', content: 'You are terse.' }, { role: 'USER', content: 'Name three primes.' }],
			parameters: base.parameters,
		}],
		['an empty extra system message', {
			model: 'gpt-4o-mini',
			messages: [{ role: 'system', content: '' }, { role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Name three primes.' }],
			parameters: base.parameters,
		}],
		['OpenAI chat request body (HTTP node)', inputFromRequestBody({
			model: 'gpt-4o-mini',
			messages: [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Name three primes.' }],
			temperature: 0.2,
			max_tokens: 100,
			user: 'u-1',
			stream: false,
		})],
		['Anthropic request body (top-level system)', inputFromRequestBody({
			model: 'gpt-4o-mini',
			system: 'You are terse.',
			messages: [{ role: 'user', content: [{ type: 'text', text: 'Name three primes.' }] }],
			temperature: 0.2,
			max_tokens: 100,
			metadata: { user_id: 'u-1' },
		})],
		['OpenAI Responses request body (instructions + input)', inputFromRequestBody({
			model: 'gpt-4o-mini',
			instructions: 'You are terse.',
			input: 'Name three primes.',
			temperature: 0.2,
			max_output_tokens: 100,
			store: false,
		})],
		['a request body given as JSON text', inputFromRequestBody(
			'{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Name three primes."}],"max_tokens":100,"temperature":0.2}',
		)],
		['Gemini contents with parts', inputFromRequestBody({
			model: 'gpt-4o-mini',
			systemInstruction: { parts: [{ text: 'You are terse.' }] },
			contents: [{ role: 'user', parts: [{ text: 'Name three primes.' }] }],
			temperature: 0.2,
			maxOutputTokens: 100,
		})],
	];
	test.each(same)('%s', (_name, input) => {
		expect(h(input)).toBe(h(base));
	});

	test('bookkeeping fields on a replayed assistant message', () => {
		const history = (extra: Record<string, unknown>) => ({
			model: 'm',
			messages: [
				{ role: 'user', content: 'Hi' },
				{ role: 'assistant', content: 'Hello!', ...extra },
				{ role: 'user', content: 'Bye' },
			],
		});
		expect(h(history({ refusal: null, annotations: [], logprobs: null }))).toBe(h(history({})));
	});

	test('-0 is 0', () => {
		expect(h(withParams({ frequency_penalty: -0 }))).toBe(h(withParams({ frequency_penalty: 0 })));
	});

	test('tool schema key order', () => {
		const tools = (a: object) => ({ ...base, parameters: { tools: [a] } });
		expect(h(tools({ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: {} } } }))).toBe(
			h(tools({ function: { parameters: { properties: {}, type: 'object' }, name: 'f' }, type: 'function' })),
		);
	});

	test('Responses API text.format is the response format; reasoning.effort the reasoning effort', () => {
		expect(h(withParams({ text: { format: { type: 'json_object' } }, reasoning: { effort: 'low' } }))).toBe(
			h(withParams({ response_format: { type: 'json_object' }, reasoningEffort: 'low' })),
		);
		expect(h(withParams({ response_format: 'json_object' }))).toBe(h(withParams({ response_format: { type: 'json_object' } })));
	});

	test('parameters the caller chooses to ignore, in any spelling', () => {
		const a = { ...base, parameters: { ...base.parameters, logit_bias: { 50256: -100 } }, ignore: ['logitBias'] };
		expect(h(a)).toBe(h(base));
		const b = { ...base, parameters: { ...base.parameters, top_k: 4 }, ignore: [' top_k '] };
		expect(h(b)).toBe(h(base));
		const c = { ...base, parameters: { temperature: 0.2, maxTokens: 100, seed: 1 }, ignore: ['SEED'] };
		expect(h(c)).toBe(h(base));
	});
});

describe('prompt hash: what MUST change the hash', () => {
	const different: Array<[string, PromptInput]> = [
		['another model', { ...base, model: 'gpt-4o' }],
		['model name case', { ...base, model: 'GPT-4o-mini' }],
		['another temperature', withParams({ temperature: 0.3, max_tokens: 100 })],
		['no temperature (provider default)', withParams({ max_tokens: 100 })],
		['temperature 1 (not assumed to equal the default)', withParams({ temperature: 1, max_tokens: 100 })],
		['another max tokens', withParams({ temperature: 0.2, max_tokens: 101 })],
		['top_p', withParams({ temperature: 0.2, max_tokens: 100, top_p: 0.9 })],
		['top_k', withParams({ temperature: 0.2, max_tokens: 100, topK: 5 })],
		['a seed', withParams({ temperature: 0.2, max_tokens: 100, seed: 42 })],
		['tools', withParams({ temperature: 0.2, max_tokens: 100, tools: [{ type: 'function', function: { name: 'f' } }] })],
		['tool choice', withParams({ temperature: 0.2, max_tokens: 100, tool_choice: 'required' })],
		['JSON response format', withParams({ temperature: 0.2, max_tokens: 100, response_format: { type: 'json_object' } })],
		['stop sequences', withParams({ temperature: 0.2, max_tokens: 100, stop: ['\n\n'] })],
		['frequency penalty', withParams({ temperature: 0.2, max_tokens: 100, frequencyPenalty: 0.5 })],
		['presence penalty', withParams({ temperature: 0.2, max_tokens: 100, presence_penalty: 0.5 })],
		['reasoning effort', withParams({ temperature: 0.2, max_tokens: 100, reasoning_effort: 'high' })],
		['n = 2', withParams({ temperature: 0.2, max_tokens: 100, n: 2 })],
		['an unknown parameter (kept, to be safe)', withParams({ temperature: 0.2, max_tokens: 100, logit_bias: { 1: 5 } })],
		['Anthropic extended thinking', withParams({ temperature: 0.2, max_tokens: 100, thinking: { type: 'enabled', budget_tokens: 1024 } })],
		['another prompt', { ...base, prompt: 'Name four primes.' }],
		['whitespace inside the prompt', { ...base, prompt: 'Name  three primes.' }],
		['a line break inside the prompt', { ...base, prompt: 'Name three\nprimes.' }],
		['letter case inside the prompt', { ...base, prompt: 'name three primes.' }],
		['another system prompt', { ...base, system: 'You are verbose.' }],
		['no system prompt', { ...base, system: '' }],
		['the system text sent as a user turn', { model: base.model, prompt: 'You are terse.\nName three primes.', parameters: base.parameters }],
		['a different role', {
			model: 'gpt-4o-mini',
			messages: [{ role: 'developer', content: 'You are terse.' }, { role: 'user', content: 'Name three primes.' }],
			parameters: base.parameters,
		}],
		['an extra turn', {
			model: 'gpt-4o-mini',
			messages: [
				{ role: 'system', content: 'You are terse.' },
				{ role: 'user', content: 'Name three primes.' },
				{ role: 'assistant', content: '2, 3, 5' },
				{ role: 'user', content: 'Name three primes.' },
			],
			parameters: base.parameters,
		}],
		['two text parts instead of one text', {
			model: 'gpt-4o-mini',
			system: 'You are terse.',
			messages: [{ role: 'user', content: [{ type: 'text', text: 'Name three' }, { type: 'text', text: 'primes.' }] }],
			parameters: base.parameters,
		}],
		['an image part', {
			model: 'gpt-4o-mini',
			system: 'You are terse.',
			messages: [{ role: 'user', content: [{ type: 'text', text: 'Name three primes.' }, { type: 'image_url', image_url: { url: 'https://x/y.png' } }] }],
			parameters: base.parameters,
		}],
	];
	test.each(different)('%s', (_name, input) => {
		expect(h(input)).not.toBe(h(base));
	});

	test('message order matters', () => {
		const a = { model: 'm', messages: [{ role: 'user', content: 'A' }, { role: 'assistant', content: 'B' }, { role: 'user', content: 'C' }] };
		const b = { model: 'm', messages: [{ role: 'user', content: 'C' }, { role: 'assistant', content: 'B' }, { role: 'user', content: 'A' }] };
		expect(h(a)).not.toBe(h(b));
	});

	test('a stop sequence keeps its whitespace', () => {
		expect(h(withParams({ stop: '\n' }))).not.toBe(h(withParams({ stop: ' ' })));
		expect(h(withParams({ stop: '\n' }))).toBe(h(withParams({ stop: ['\n'] })));
		expect(h(withParams({ stop: ['a', 'b'] }))).not.toBe(h(withParams({ stop: ['b', 'a'] })));
	});

	test('tool order matters', () => {
		const t1 = { type: 'function', function: { name: 'a' } };
		const t2 = { type: 'function', function: { name: 'b' } };
		expect(h(withParams({ tools: [t1, t2] }))).not.toBe(h(withParams({ tools: [t2, t1] })));
	});

	test('the text "1" and the number 1 differ in unknown parameters', () => {
		expect(h(withParams({ custom: '1' }))).not.toBe(h(withParams({ custom: 1 })));
	});

	test('a tool call turn is kept whole', () => {
		const turn = (args: string) => ({
			model: 'm',
			messages: [
				{ role: 'user', content: 'Weather?' },
				{ role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'w', arguments: args } }] },
				{ role: 'tool', tool_call_id: 'c1', content: 'sunny' },
			],
		});
		expect(h(turn('{"city":"Oslo"}'))).not.toBe(h(turn('{"city":"Bergen"}')));
		expect(promptEnvelope(turn('{}')).messages[1]).toEqual({
			role: 'assistant',
			content: null,
			tool_calls: [{ id: 'c1', type: 'function', function: { name: 'w', arguments: '{}' } }],
		});
	});
});

describe('prompt hash: bad input is refused with a reason', () => {
	const refused: Array<[string, PromptInput, RegExp]> = [
		['no model', { prompt: 'x', model: undefined }, /model is missing/],
		['an empty model', { prompt: 'x', model: '  ' }, /model/],
		['a model that is not text', { prompt: 'x', model: 4 }, /model must be text/],
		['no prompt at all', { model: 'm' }, /prompt is empty/],
		['a blank prompt', { model: 'm', prompt: ' \r\n ' }, /prompt is empty/],
		['only a system prompt', { model: 'm', system: 'Be nice', prompt: '' }, /prompt is empty/],
		['a message without a role', { model: 'm', messages: [{ content: 'x' }] }, /has no role/],
		['a message that is a number', { model: 'm', messages: [1] }, /not a message/],
		['messages that are not a list', { model: 'm', messages: 42 }, /not a list/],
		['broken JSON messages', { model: 'm', messages: '[{"role":' }, /does not parse/],
		['a temperature that is not a number', { model: 'm', prompt: 'x', parameters: { temperature: 'warm' } }, /temperature.*must be a number/],
		['an infinite parameter', { model: 'm', prompt: 'x', parameters: { custom: Infinity } }, /not a number/],
		['one parameter twice with different values', { model: 'm', prompt: 'x', parameters: { max_tokens: 1, maxTokens: 2 } }, /given twice/],
		['a prompt that is an object', { model: 'm', prompt: { a: 1 } as never }, /prompt must be text/],
	];
	test.each(refused)('%s', (_name, input, message) => {
		expect(() => promptHash(input)).toThrow(LedgerInputError);
		expect(() => promptHash(input)).toThrow(message);
	});

	test('the same parameter twice with the same value is fine', () => {
		expect(h(withParams({ temperature: 0.2, max_tokens: 100, maxTokens: 100 }))).toBe(h(base));
	});

	test('request bodies', () => {
		expect(() => inputFromRequestBody('nope')).toThrow(/not an object/);
		expect(() => inputFromRequestBody([1, 2])).toThrow(/not an object/);
		expect(() => inputFromRequestBody({ model: 'm', system: 'a', instructions: 'b', input: 'x' })).toThrow(/more than one system prompt/);
		expect(() => promptHash(inputFromRequestBody({ messages: [{ role: 'user', content: 'x' }] }))).toThrow(/model is missing/);
	});

	test('every refusal carries a hint saying how to fix it', () => {
		try {
			promptHash({ model: 'm', prompt: '' });
			throw new Error('expected a refusal');
		} catch (error) {
			expect((error as LedgerInputError).hint).toMatch(/Map the prompt/);
		}
	});
});

describe('prompt hash: helpers', () => {
	test('normalizeText', () => {
		expect(normalizeText(' a\r\nb\rc \n')).toBe('a\nb\nc');
		expect(normalizeText('a  b')).toBe('a  b');
	});
	test('canonicalJson sorts keys, keeps strings exactly, drops undefined', () => {
		expect(canonicalJson({ b: [1, { d: ' x ', c: undefined }], a: -0 })).toBe('{"a":0,"b":[1,{"d":" x "}]}');
		expect(canonicalJson(undefined)).toBe('null');
		expect(canonicalJson({ 'é': 1, e: 2, Z: 3 })).toBe('{"Z":3,"e":2,"é":1}');
	});
	test('hashing is deterministic across calls and object identity', () => {
		const a = promptHash(JSON.parse(JSON.stringify(base)));
		const b = promptHash(base);
		expect(a.hash).toBe(b.hash);
		expect(a.envelope).toEqual(b.envelope);
	});
	test('the envelope does not keep ignored parameters, so a stored prompt never carries them', () => {
		const { envelope } = promptHash(withParams({ temperature: 0.2, user: 'secret-user', metadata: { email: 'x@y' } }));
		expect(JSON.stringify(envelope)).not.toMatch(/secret-user|x@y/);
	});
});

describe('key receipt: what went into the key, readable', () => {
	const chat: PromptInput = {
		model: ' gpt-4o-mini ',
		system: 'You are terse.',
		messages: [
			{ role: 'user', content: 'Weather in Oslo?' },
			{ role: 'assistant', content: 'Checking.' },
			{ role: 'user', content: 'Thanks' },
		],
		parameters: {
			temperature: 0,
			maxTokens: 50,
			n: 1,
			user: 'u-17',
			stream: false,
			seed: 7,
			tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object' } } }, { type: 'function', function: { name: 'search' } }],
			tool_choice: 'auto',
			response_format: { type: 'json_object' },
		},
		ignore: ['seed'],
	};

	test('names the model, each parameter, the four parts, what was left out and why, the normalization and the key version', () => {
		expect(promptHash(chat).receipt).toEqual([
			'key version 1: SHA-256 of the normalized request',
			'model: gpt-4o-mini',
			'system prompt: included #99c24e59',
			'messages: 3 (user, assistant, user) #905c7808',
			'max_tokens: 50',
			'temperature: 0',
			'tools: included (2: get_weather, search) #4ca454f3',
			'tool choice: included ("auto") #634635a2',
			'response format: included (json_object) #376bde79',
			'ignored, your choice: seed',
			'left out, never changes the answer: user, stream',
			'left out, a default that changes nothing: n: 1',
			'normalized: text trimmed, line endings as \\n, a text-only content list as its text, names unified (maxTokens → max_tokens)',
		]);
	});

	test('says "none in the request" for parts the request does not have, and "ignored" for a part the user chose to leave out', () => {
		const receipt = promptHash({ model: 'm', prompt: 'hi', parameters: { tool_choice: 'none' }, ignore: ['toolChoice'] }).receipt;
		expect(receipt).toEqual(
			expect.arrayContaining(['system prompt: none in the request', 'tools: none in the request', 'tool choice: ignored, your choice', 'response format: none in the request']),
		);
	});

	test('never holds prompt text, also for long parameter values', () => {
		const receipt = promptHash({ ...chat, parameters: { ...chat.parameters, logit_bias: { x: 'y'.repeat(500) } } }).receipt;
		const text = receipt.join('\n');
		for (const secret of ['Weather in Oslo', 'You are terse', 'Checking', 'Thanks']) expect(text).not.toContain(secret);
		// Shortened to 80 characters, then its short hash (" #" and 8 hex digits).
		expect(receipt.find((l) => l.startsWith('logit_bias: '))).toMatch(/^logit_bias: .{77}\.\.\. #[0-9a-f]{8}$/);
	});

	// Each part of the request that the receipt says is in the key must change the key: change
	// only that part, and the hash (so the cache entry) differs.
	test.each<[string, (input: PromptInput) => PromptInput]>([
		['tools', (i) => ({ ...i, parameters: { ...i.parameters, tools: [{ type: 'function', function: { name: 'get_weather' } }] } })],
		['tool choice', (i) => ({ ...i, parameters: { ...i.parameters, tool_choice: 'required' } })],
		['response format', (i) => ({ ...i, parameters: { ...i.parameters, response_format: { type: 'json_schema', json_schema: { name: 'x' } } } })],
		['system prompt', (i) => ({ ...i, system: 'You are verbose.' })],
		['model', (i) => ({ ...i, model: 'gpt-4o' })],
		['a parameter', (i) => ({ ...i, parameters: { ...i.parameters, temperature: 0.5 } })],
	])('changing only the %s changes the key', (_part, change) => {
		expect(h(change(chat))).not.toBe(h(chat));
	});

	// Issue 32: a changed system prompt and a changed tool description gave identical receipts
	// although the key changed. Each part's line carries a short hash of that part, so exactly the
	// line of the part that changed differs.
	const tools = chat.parameters!.tools as Array<{ function: Record<string, unknown> }>;
	const longValue = { ...chat, parameters: { ...chat.parameters, logit_bias: { x: 'y'.repeat(201) } } };
	test.each<[string, PromptInput, RegExp, (input: PromptInput) => PromptInput]>([
		['system prompt', chat, /^system prompt: /, (i) => ({ ...i, system: 'You are verbose.' })],
		['tool description', chat, /^tools: /, (i) => ({ ...i, parameters: { ...i.parameters, tools: [{ ...tools[0], function: { ...tools[0].function, description: 'Now with a description' } }, tools[1]] } })],
		['messages', chat, /^messages: /, (i) => ({ ...i, messages: [{ role: 'user', content: 'Weather in Bergen?' }, ...(i.messages as unknown[]).slice(1)] })],
		['tool choice', chat, /^tool choice: /, (i) => ({ ...i, parameters: { ...i.parameters, tool_choice: { type: 'function', function: { name: 'search' } } } })],
		['response format schema', chat, /^response format: /, (i) => ({ ...i, parameters: { ...i.parameters, response_format: { type: 'json_object', schema: { a: 1 } } } })],
		['end of a long parameter value', longValue, /^logit_bias: /, (i) => ({ ...i, parameters: { ...i.parameters, logit_bias: { x: `${'y'.repeat(200)}z` } } })],
	])('changing only the %s changes exactly its own receipt line, which shows a short hash of the part', (_part, input, line, change) => {
		const before = promptHash(input).receipt;
		const after = promptHash(change(input)).receipt;
		expect(after).toHaveLength(before.length);
		const differing = after.filter((l, k) => l !== before[k]);
		expect(differing).toHaveLength(1);
		expect(differing[0]).toMatch(line);
		expect(differing[0]).toMatch(/#[0-9a-f]{8}\b/);
	});

	test('changing only an ignored or never-relevant field keeps the key, and the receipt says so', () => {
		expect(h({ ...chat, parameters: { ...chat.parameters, seed: 8, user: 'u-99', stream: true } })).toBe(h(chat));
	});
});
