import type { IDataObject, INodeProperties } from 'n8n-workflow';

import { LedgerInputError } from '../../lib/ledger/errors';
import type { DurationSpec } from '../../lib/n8n/scope';

/** Prompt Cache's durations, under Options: one spec each for the panel and the reader. */
export const WAIT_UP_TO: DurationSpec = {
	name: 'waitTimeout',
	displayName: 'Wait Up To',
	amount: 60,
	unit: 'seconds',
	description:
		'With "When Another Run Is Asking" set to wait: how long to wait for the other run\'s answer. After that the item goes to Miss.',
	what: 'wait ("Wait Up To")',
};

export const ANSWER_WITHIN: DurationSpec = {
	name: 'lease',
	displayName: 'Answer Expected Within',
	amount: 2,
	unit: 'minutes',
	description:
		'How long other runs wait for this run\'s answer after a Miss. If Store has not saved an answer by then, another run may ask the model itself.',
	what: 'time to answer ("Answer Expected Within")',
};

export const KEEP_ANSWERS: DurationSpec = {
	name: 'ttl',
	displayName: 'Keep Answers For',
	amount: 30,
	unit: 'days',
	description: 'How long a stored answer is served. After that the prompt goes to Miss again.',
	what: 'time to keep answers ("Keep Answers For")',
};

/** The prices a hit's savings are counted in (Get Stats), the same in Prompt Cache and Prompt Cache Chat Model. */
export const PRICE_OPTIONS: INodeProperties[] = [
	{
		displayName: 'Price per 1,000 Input Tokens',
		name: 'priceInputPer1k',
		type: 'number',
		typeOptions: { minValue: 0, numberPrecision: 6 },
		default: 0,
		description: 'What your provider charges for 1,000 prompt tokens, in your currency. With it, each hit counts the money it saved (Get Stats).',
	},
	{
		displayName: 'Price per 1,000 Output Tokens',
		name: 'priceOutputPer1k',
		type: 'number',
		typeOptions: { minValue: 0, numberPrecision: 6 },
		default: 0,
		description: 'What your provider charges for 1,000 answer tokens, in your currency',
	},
];

/** Price per 1,000 input and output tokens, in the user's currency. */
export interface Prices {
	input: number;
	output: number;
}

/** The prices of PRICE_OPTIONS from a node's options, or null where none is set. */
export function readPrices(options: IDataObject): Prices | null {
	const price = (name: string, label: string) => {
		const value = options[name];
		if (value === undefined || value === null || value === '') return 0;
		const n = typeof value === 'string' ? Number(value) : value;
		if (typeof n !== 'number' || !Number.isFinite(n) || n < 0) {
			throw new LedgerInputError(`"${label}" must be a number of 0 or more, not ${JSON.stringify(value)}`, 'Enter the price your provider charges per 1,000 tokens, e.g. 0.00015, or remove the option.');
		}
		return n;
	};
	const prices = { input: price('priceInputPer1k', 'Price per 1,000 Input Tokens'), output: price('priceOutputPer1k', 'Price per 1,000 Output Tokens') };
	return prices.input > 0 || prices.output > 0 ? prices : null;
}
