import type { IDataObject, INode, INodeParameters } from 'n8n-workflow';

import { FAKE_LLM_TYPE } from '../integration/fixtures/prompt-llm-node';

export const PROMPT_CACHE_TYPE = 'n8n-nodes-idempotency.promptCache';

export interface FlowOptions {
	prompts: IDataObject[];
	/** The ledger of both Prompt Cache nodes (PostgreSQL when left out). */
	backend?: 'postgres' | 'redis';
	lookup?: INodeParameters;
	store?: INodeParameters;
	llm?: INodeParameters;
	/** Extra settings for single nodes (onError etc.). */
	lookupNode?: Partial<INode>;
	storeNode?: Partial<INode>;
}

/** Trigger → Prompts → Lookup; Lookup's Miss → Fake LLM → Store. The engine tests' Prompt Cache flow. */
export function promptCacheFlow(o: FlowOptions) {
	const node = (name: string, type: string, parameters: INodeParameters, x: number, extra: Partial<INode> = {}): INode => ({
		id: name,
		name,
		type,
		typeVersion: 1,
		position: [x, 0],
		parameters,
		...extra,
	});
	const backend = o.backend ? { backend: o.backend } : {};
	return {
		nodes: [
			node('Trigger', 'test.manualTrigger', {}, 0),
			node('Prompts', 'test.items', { items: JSON.stringify(o.prompts) }, 200),
			node(
				'Lookup',
				PROMPT_CACHE_TYPE,
				{
					...backend,
					operation: 'lookup',
					promptSource: 'text',
					model: 'gpt-4o-mini',
					systemPrompt: 'You are terse.',
					prompt: '={{ $json.prompt }}',
					modelParameters: { temperature: 0.2 },
					...o.lookup,
				},
				400,
				o.lookupNode,
			),
			node('LLM', FAKE_LLM_TYPE, { shape: 'openai-simple', ...o.llm }, 600),
			node('Store', PROMPT_CACHE_TYPE, { ...backend, operation: 'store', ...o.store }, 800, o.storeNode),
		],
		connections: {
			Trigger: { main: [[{ node: 'Prompts', type: 'main' as const, index: 0 }]] },
			Prompts: { main: [[{ node: 'Lookup', type: 'main' as const, index: 0 }]] },
			Lookup: { main: [[], [{ node: 'LLM', type: 'main' as const, index: 0 }]] },
			LLM: { main: [[{ node: 'Store', type: 'main' as const, index: 0 }]] },
		},
	};
}
