import { createRequire } from 'module';

/**
 * The package does not depend on LangChain. A cached answer is given back to the agent as the
 * message class the connected model itself would have produced, taken at run time from the
 * `@langchain/core` that n8n loaded. Nothing checks that for us, so, as with the shortcuts of
 * lib/n8n/shortcutCheck.ts, the first use in a process checks it, once per model class:
 *
 * - n8n's `@langchain/core/messages` and `@langchain/core/outputs` are found and have
 *   `AIMessage`, `AIMessageChunk`, `ChatGenerationChunk` and `mapStoredMessageToChatMessage`;
 * - a message the model's own LangChain makes is an instance of that `AIMessage` (the same copy
 *   of LangChain, so the agent treats a revived answer exactly as a fresh one);
 * - an answer with a tool call, stored and revived, gives back the same text and tool call.
 *
 * If any of it fails, the Chat Model is used uncached: never a wrong answer. The caller says so
 * in n8n's log once and on every run that went uncached because of it.
 */

type Ctor = new (fields: Record<string, unknown>) => LcMessage;

/** The parts of a LangChain message this package reads. */
export interface LcMessage {
	content: unknown;
	tool_calls?: Array<{ name: string; args: Record<string, unknown>; id?: string; type?: string }>;
	tool_call_id?: string;
	name?: string;
	id?: string;
	additional_kwargs?: Record<string, unknown>;
	response_metadata?: Record<string, unknown>;
	usage_metadata?: Record<string, unknown>;
	_getType?: () => string;
	getType?: () => string;
	type?: string;
	toDict?: () => StoredMessage;
}

export interface StoredMessage {
	type: string;
	data: Record<string, unknown>;
}

export interface LcCore {
	AIMessage: Ctor;
	AIMessageChunk: Ctor;
	ChatGenerationChunk: new (fields: { text: string; message: LcMessage; generationInfo?: Record<string, unknown> }) => unknown;
	mapStoredMessageToChatMessage: (stored: StoredMessage) => LcMessage;
}

export type Verdict = { ok: true; core: LcCore } | { ok: false; why: string };

const resolvers = (): Array<() => NodeRequire> => [
	// n8n's own entry point: resolves what n8n itself resolves.
	() => {
		if (!require.main) throw new Error('no main module');
		return createRequire(require.main.filename);
	},
	// The n8n-workflow this node was loaded with is n8n's own copy.
	() => createRequire(require.resolve('n8n-workflow')),
	() => createRequire(require.resolve('n8n-core')),
];

let found: { core: LcCore } | { why: string } | undefined;
let verdicts = new WeakMap<object, Verdict>();

function findCore(): { core: LcCore } | { why: string } {
	if (found) return found;
	const misses: string[] = [];
	for (const resolver of resolvers()) {
		try {
			const req = resolver();
			const messages = req('@langchain/core/messages') as Record<string, unknown>;
			const outputs = req('@langchain/core/outputs') as Record<string, unknown>;
			const core = {
				AIMessage: messages.AIMessage,
				AIMessageChunk: messages.AIMessageChunk,
				ChatGenerationChunk: outputs.ChatGenerationChunk,
				mapStoredMessageToChatMessage: messages.mapStoredMessageToChatMessage,
			};
			const missing = Object.entries(core)
				.filter(([, v]) => typeof v !== 'function')
				.map(([k]) => k);
			if (missing.length === 0) return (found = { core: core as unknown as LcCore });
			misses.push(`it lacks ${missing.join(', ')}`);
		} catch (error) {
			misses.push((error as Error).message.split('\n')[0]);
		}
	}
	return (found = { why: `LangChain's messages could not be loaded from n8n (${[...new Set(misses)].join('; ')})` });
}



/** Whether answers of this model can be stored and given back as its own; checked once per model class. */
export function revivalFor(model: object): Verdict {
	const cls = (model as { constructor?: object }).constructor ?? model;
	const known = verdicts.get(cls);
	if (known) return known;
	const verdict = check(model);
	verdicts.set(cls, verdict);
	return verdict;
}

function check(model: object): Verdict {
	const got = findCore();
	if ('why' in got) return { ok: false, why: got.why };
	const { core } = got;
	try {
		const convert = (model.constructor as { _convertInputToPromptValue?: (input: unknown) => { toChatMessages(): LcMessage[] } })._convertInputToPromptValue;
		if (typeof convert !== 'function') return { ok: false, why: 'the connected model is not a LangChain chat model this package knows' };
		const own = convert([['ai', 'probe']]).toChatMessages()[0];
		if (!(own instanceof core.AIMessage)) {
			return { ok: false, why: 'the connected model uses another copy of LangChain than the one n8n loads' };
		}
		const sample = new core.AIMessage({
			content: 'probe',
			tool_calls: [{ name: 'probe_tool', args: { a: 1, b: ['x'] }, id: 'call_probe', type: 'tool_call' }],
		});
		const back = core.mapStoredMessageToChatMessage(storedMessage(sample));
		const call = back.tool_calls?.[0];
		if (
			!(back instanceof core.AIMessage) ||
			back.content !== 'probe' ||
			back.tool_calls?.length !== 1 ||
			call?.name !== 'probe_tool' ||
			call.id !== 'call_probe' ||
			JSON.stringify(call.args) !== JSON.stringify({ a: 1, b: ['x'] })
		) {
			return { ok: false, why: "a stored answer with a tool call did not come back the same from LangChain's own message store" };
		}
		const chunk = revivedChunk(core, storedMessage(sample));
		if (chunk.tool_calls?.[0]?.name !== 'probe_tool' || JSON.stringify(chunk.tool_calls[0].args) !== JSON.stringify({ a: 1, b: ['x'] })) {
			return { ok: false, why: 'a stored answer with a tool call did not come back the same as a streamed message' };
		}
	} catch (error) {
		return { ok: false, why: `LangChain's messages did not behave as expected (${(error as Error).message.split('\n')[0]})` };
	}
	return { ok: true, core };
}

/** A message as LangChain's own message store keeps it: `{ type, data }`. */
export function storedMessage(message: LcMessage): StoredMessage {
	if (typeof message.toDict !== 'function') throw new Error('the answer is not a LangChain message');
	const dict = message.toDict();
	return { type: dict.type, data: JSON.parse(JSON.stringify(dict.data)) as Record<string, unknown> };
}

export const messageType = (message: LcMessage): string =>
	(typeof message._getType === 'function' ? message._getType() : typeof message.getType === 'function' ? message.getType() : message.type) ?? 'unknown';

/** The stored answer as the chunk a streaming model would have given, tool calls included. */
export function revivedChunk(core: LcCore, stored: StoredMessage): LcMessage {
	const data = stored.data;
	const toolCalls = Array.isArray(data.tool_calls) ? (data.tool_calls as NonNullable<LcMessage['tool_calls']>) : [];
	return new core.AIMessageChunk({
		content: data.content ?? '',
		id: data.id,
		additional_kwargs: data.additional_kwargs ?? {},
		response_metadata: data.response_metadata ?? {},
		usage_metadata: data.usage_metadata,
		tool_call_chunks: toolCalls.map((call, index) => ({
			name: call.name,
			args: JSON.stringify(call.args ?? {}),
			id: call.id,
			index,
			type: 'tool_call_chunk',
		})),
	});
}

/** Forgets every verdict, as a new process would (tests). */
export function forgetRevivalChecks(): void {
	found = undefined;
	verdicts = new WeakMap();
}
