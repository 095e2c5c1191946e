import {
	NodeConnectionTypes,
	NodeOperationError,
	type IDataObject,
	type IExecuteFunctions,
	type INodeExecutionData,
	type INodeType,
	type INodeTypeDescription,
} from 'n8n-workflow';

/**
 * Small node types for running workflow JSON through the real n8n engine in tests
 * (see ./engine.ts). They are registered there by default under the type names below.
 */

/** The description of a plain test node: one main input and output, no properties, unless `extra` says otherwise. */
export const testNodeDescription = (
	name: string,
	displayName: string,
	extra: Partial<INodeTypeDescription>,
): INodeTypeDescription => ({
	displayName,
	name,
	group: ['transform'],
	version: 1,
	description: displayName,
	defaults: { name: displayName },
	inputs: [NodeConnectionTypes.Main],
	outputs: [NodeConnectionTypes.Main],
	properties: [],
	...extra,
});

/**
 * `test.manualTrigger`: the usual start node. Like n8n's Manual Trigger it emits one empty
 * item. It has an `execute` method rather than `trigger`, so the engine runs it as a plain node
 * (whatever the execution mode) and needs no trigger machinery.
 */
export class ManualTriggerFixture implements INodeType {
	description = testNodeDescription('test.manualTrigger', 'Manual Trigger', {
		group: ['trigger'],
		inputs: [],
		properties: [],
	});

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		return [[{ json: {} }]];
	}
}

/**
 * `test.items`: emits the objects of its `items` parameter (a JSON array of objects) as items.
 * Works as a start node or after another node; with input, every emitted item is paired with
 * the first input item (n8n's convention for a node that creates new items from one trigger).
 */
export class ItemsFixture implements INodeType {
	description = testNodeDescription('test.items', 'Items', {
		properties: [
			{
				displayName: 'Items (JSON Array of Objects)',
				name: 'items',
				type: 'json',
				default: '[]',
			},
			// Each item's JSON behind a proxy, as n8n 1.x hands on the items of a Code node that ran
			// in its vm2 sandbox (task runners off).
			{ displayName: 'Behind a Proxy', name: 'proxied', type: 'boolean', default: false },
		],
	});

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		const raw = this.getNodeParameter('items', 0) as string | IDataObject[];
		let parsed: unknown;
		try {
			parsed = typeof raw === 'string' ? JSON.parse(raw) : raw;
		} catch (error) {
			throw new NodeOperationError(this.getNode(), `Items is not valid JSON: ${(error as Error).message}`);
		}
		if (!Array.isArray(parsed)) {
			throw new NodeOperationError(this.getNode(), 'Items must be a JSON array of objects');
		}
		const proxied = this.getNodeParameter('proxied', 0, false) as boolean;
		return [
			parsed.map((json, index) => {
				if (json === null || typeof json !== 'object' || Array.isArray(json)) {
					throw new NodeOperationError(this.getNode(), `Item ${index} is not an object`);
				}
				return { json: (proxied ? new Proxy(json, {}) : json) as IDataObject, pairedItem: { item: 0 } };
			}),
		];
	}
}

/**
 * `test.replace`: replaces each item's JSON with `{ replaced: true, index }`, keeping
 * `pairedItem` (like a Slack or HTTP node whose response replaces the item). Lineage-based code
 * downstream must then find the original fields through `pairedItem`, not `$json`.
 */
export class ReplaceFixture implements INodeType {
	description = testNodeDescription('test.replace', 'Replace', { properties: [] });

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		return [
			this.getInputData().map((item, index) => ({
				json: { replaced: true, index },
				pairedItem: { item: index },
			})),
		];
	}
}

/**
 * `test.set`: sets `json[field] = value` on a copy of each item. `value` is an ordinary string
 * parameter read per item with `getNodeParameter('value', i)`, so it may hold an expression such
 * as `={{ $json.id }}` that the real engine evaluates. If `value` evaluates to the text in
 * `failOn` (default: never), the node throws for that item, which lets tests exercise errors and
 * `onError` settings.
 */
export class SetFixture implements INodeType {
	description = testNodeDescription('test.set', 'Set', {
		properties: [
			{ displayName: 'Field', name: 'field', type: 'string', default: 'value' },
			{ displayName: 'Value', name: 'value', type: 'string', default: '' },
			{ displayName: 'Fail On', name: 'failOn', type: 'string', default: '' },
		],
	});

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		const items = this.getInputData();
		const out: INodeExecutionData[] = [];
		for (let i = 0; i < items.length; i++) {
			try {
				const field = this.getNodeParameter('field', i) as string;
				const value = this.getNodeParameter('value', i);
				const failOn = this.getNodeParameter('failOn', i) as string;
				if (failOn !== '' && value === failOn) {
					throw new NodeOperationError(this.getNode(), `Refusing value "${String(value)}"`, { itemIndex: i });
				}
				out.push({ json: { ...items[i].json, [field]: value } as IDataObject, pairedItem: { item: i } });
			} catch (error) {
				if (this.continueOnFail()) {
					out.push({ json: { error: (error as Error).message }, pairedItem: { item: i } });
					continue;
				}
				throw error;
			}
		}
		return [out];
	}
}

/** The fixture node types, keyed by the type name used in workflow JSON. */
export const fixtureNodeTypes = (): Record<string, INodeType> => ({
	'test.manualTrigger': new ManualTriggerFixture(),
	'test.items': new ItemsFixture(),
	'test.replace': new ReplaceFixture(),
	'test.set': new SetFixture(),
});
