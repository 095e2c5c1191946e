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
