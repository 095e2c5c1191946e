import type { IExecuteFunctions } from 'n8n-workflow';

/**
 * "Do this when the execution ends", which n8n's node API does not offer. n8n runs each
 * execution's lifecycle hooks at its end, and the node's execution context carries them as
 * `additionalData.hooks`: an `ExecutionLifecycleHooks` with `addHandler` (n8n 1.8x and later,
 * 2.x), or the older `WorkflowHooks` with a `hookFunctions` table. Both are internals, so this
 * module is the one place that touches them, and it reports `false` when neither shape is there,
 * so that the caller can fall back to something that needs no hook.
 *
 * The hook runs in the process that ran the execution (a queue-mode worker included) and is
 * awaited before n8n reports the execution finished. A process that dies runs no hook at all.
 */

/** How the execution ended, as far as the ledger cares. */
export type ExecutionEnd =
	/** Ended without an error. */
	| 'succeeded'
	/** Ended with an error, or was cancelled. */
	| 'failed'
	/** Paused (a Wait node); it goes on later in a new run of hooks, which this one does not see. */
	| 'waiting';

type EndHandler = (end: ExecutionEnd) => Promise<void>;

interface RunShape {
	status?: string;
	waitTill?: unknown;
	data?: { resultData?: { error?: unknown } };
}

interface HooksShape {
	addHandler?: (name: string, handler: (run: RunShape) => Promise<void>) => void;
	hookFunctions?: Record<string, Array<(run: RunShape) => Promise<void>> | undefined>;
}

/** One list of handlers per execution (per hooks object), so a node in a loop registers one hook. */
const handlersByHooks = new WeakMap<object, EndHandler[]>();

export function endOf(run: RunShape | undefined): ExecutionEnd {
	if (!run) return 'failed';
	if (run.waitTill) return 'waiting';
	if (run.data?.resultData?.error || run.status === 'error' || run.status === 'canceled' || run.status === 'crashed') return 'failed';
	return 'succeeded';
}

function hooksOf(ctx: IExecuteFunctions): HooksShape | null {
	const hooks = (ctx as unknown as { additionalData?: { hooks?: unknown } }).additionalData?.hooks;
	if (!hooks || typeof hooks !== 'object') return null;
	const shape = hooks as HooksShape;
	if (typeof shape.addHandler === 'function') return shape;
	if (shape.hookFunctions && typeof shape.hookFunctions === 'object') return shape;
	return null;
}

/**
 * Something that stands for this execution and lives as long as it does (its hooks object), for
 * state that nodes of one execution share with its end handlers; null on an n8n without hooks.
 */
export const executionOf = (ctx: IExecuteFunctions): object | null => hooksOf(ctx);

/** Whether this n8n lets a node act when its execution ends. */
export const canActAtExecutionEnd = (ctx: IExecuteFunctions): boolean => hooksOf(ctx) !== null;

/**
 * Calls `handler` once when this execution ends, with how it ended. Handlers run one after
 * another in the order they were added; one that throws does not stop the others. Returns false,
 * and adds nothing, when this n8n offers no execution hooks.
 */
export function atExecutionEnd(ctx: IExecuteFunctions, handler: EndHandler): boolean {
	const hooks = hooksOf(ctx);
	if (!hooks) return false;
	let handlers = handlersByHooks.get(hooks);
	if (!handlers) {
		const list: EndHandler[] = [];
		handlers = list;
		handlersByHooks.set(hooks, list);
		const runAll = async (run: RunShape) => {
			const end = endOf(run);
			for (const each of list.splice(0)) {
				await each(end).catch(() => undefined);
			}
		};
		if (typeof hooks.addHandler === 'function') hooks.addHandler('workflowExecuteAfter', runAll);
		else (hooks.hookFunctions!.workflowExecuteAfter ??= []).push(runAll);
	}
	handlers.push(handler);
	return true;
}
