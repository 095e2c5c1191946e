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
 *
 * Being internals, they are checked, not trusted (as the key shortcuts are, shortcutCheck.ts): the
 * first time a process needs them, it checks that the hooks are there with the API it calls, that
 * they belong to this execution, and, on a fresh hooks object of the same class, that a handler
 * added for the end of an execution is run, with the run, when n8n runs that hook. If anything
 * fails, the process acts as on an n8n without hooks until it restarts (the Dedupe Gate's
 * documented fallback), says so once in n8n's log, and puts a warning hint on every node run that
 * would have used them.
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

type RunHandler = (run: RunShape) => Promise<void>;

interface HooksShape {
	/** ExecutionLifecycleHooks (n8n 1.8x and later, 2.x). */
	addHandler?: (name: string, handler: RunHandler) => void;
	runHook?: (name: string, parameters: unknown[]) => Promise<void>;
	/** The older WorkflowHooks. */
	hookFunctions?: Record<string, RunHandler[] | undefined>;
	executeHookFunctions?: (name: string, parameters: unknown[]) => Promise<void>;
	executionId?: unknown;
	mode?: unknown;
	workflowData?: unknown;
}

/** One list of handlers per execution (per hooks object), so a node in a loop registers one hook. */
const handlersByHooks = new WeakMap<object, EndHandler[]>();

export function endOf(run: RunShape | undefined): ExecutionEnd {
	if (!run) return 'failed';
	if (run.waitTill) return 'waiting';
	if (run.data?.resultData?.error || run.status === 'error' || run.status === 'canceled' || run.status === 'crashed') return 'failed';
	return 'succeeded';
}

type Verdict = { trusted: true } | { trusted: false; why: string };
let verdict: Verdict | null = null;
/** Node runs (their contexts) already told that the execution-end hooks are not used. */
const hinted = new WeakSet<object>();

/** The execution's hooks, when this process trusts them (checking them now if it has not yet); else null. */
function hooksOf(ctx: IExecuteFunctions): HooksShape | null {
	const hooks = (ctx as unknown as { additionalData?: { hooks?: unknown } }).additionalData?.hooks;
	const shape = hooks && typeof hooks === 'object' ? (hooks as HooksShape) : null;
	if (!verdict) {
		const why = untrusted(ctx, shape);
		verdict = why ? { trusted: false, why } : { trusted: true };
		if (why) {
			ctx.logger.warn(
				`n8n-nodes-idempotency: "${ctx.getNode().name}" does not use n8n's execution-end hooks, because ${why}. Until n8n restarts, the Dedupe Gate works as on an n8n without them: "Mark Keys Done: When the Execution Succeeds" leaves its keys to a Mark Step Done or Guarded Send that follows, or else marks them done as they pass, and leases are kept for the configured lease only. Please report your n8n version at https://github.com/n8n-nodes-idempotency/n8n-nodes-idempotency/issues.`,
			);
		}
	}
	return verdict.trusted ? shape : null;
}

/** Why this process cannot rely on these hooks, or null when it can. */
function untrusted(ctx: IExecuteFunctions, hooks: HooksShape | null): string | null {
	if (!hooks) return 'this n8n gives nodes no execution hooks';
	const lifecycle = typeof hooks.addHandler === 'function' && typeof hooks.runHook === 'function';
	const table = !!hooks.hookFunctions && typeof hooks.hookFunctions === 'object' && typeof hooks.executeHookFunctions === 'function';
	if (!lifecycle && !table) return 'its execution hooks lack the addHandler and runHook the package calls';
	const id = typeof ctx.getExecutionId === 'function' ? ctx.getExecutionId() : undefined;
	if (typeof id === 'string' && id !== '' && typeof hooks.executionId === 'string' && hooks.executionId !== id) {
		return "the execution hooks a node is given belong to another execution";
	}
	return endHookRuns(hooks, lifecycle);
}

/**
 * On a fresh hooks object of the same class (nothing of the running execution is touched), adds a
 * handler for the end of an execution and runs that hook as n8n does at the end: null when the
 * handler ran at once, given the run; else what went wrong.
 */
function endHookRuns(hooks: HooksShape, lifecycle: boolean): string | null {
	const run: RunShape = { status: 'success', data: { resultData: {} } };
	let given: unknown[] | null = null;
	const handler = async (...args: unknown[]) => void (given = args);
	try {
		let pending: Promise<void>;
		if (lifecycle) {
			const Hooks = hooks.constructor as new (...args: unknown[]) => HooksShape;
			if (typeof Hooks !== 'function' || Hooks === Object) return 'its execution hooks are not of a class the package can check';
			const probe = new Hooks(hooks.mode, hooks.executionId, hooks.workflowData);
			hooks.addHandler!.call(probe, 'workflowExecuteAfter', handler);
			pending = hooks.runHook!.call(probe, 'workflowExecuteAfter', [run]);
		} else {
			const probe = Object.assign(Object.create(Object.getPrototypeOf(hooks) as object) as HooksShape, { hookFunctions: { workflowExecuteAfter: [handler] } });
			pending = hooks.executeHookFunctions!.call(probe, 'workflowExecuteAfter', [run]);
		}
		Promise.resolve(pending).catch(() => undefined);
	} catch (error) {
		return `trying its end-of-execution hook failed (${error instanceof Error ? error.message : String(error)})`;
	}
	if (!given) return 'a handler added for the end of an execution did not run when that hook ran';
	if ((given as unknown[])[0] !== run) return 'a handler for the end of an execution was not given the run';
	return null;
}

/** Says on this node run, once, that the execution-end hooks are not used (when this process does not trust them). */
function hintUnused(ctx: IExecuteFunctions): void {
	if (verdict?.trusted !== false || hinted.has(ctx)) return;
	hinted.add(ctx);
	ctx.addExecutionHints({
		message: `The Dedupe Gate works here as on an n8n without execution-end hooks (keys are left to a Mark Step Done or Guarded Send that follows, or else marked done as they pass): this n8n failed the package's check of those hooks, because ${verdict.why}. See n8n's log.`,
		type: 'warning',
		location: 'outputPane',
	});
}

/**
 * Something that stands for this execution and lives as long as it does (its hooks object), for
 * state that nodes of one execution share with its end handlers; null on an n8n without hooks.
 */
export const executionOf = (ctx: IExecuteFunctions): object | null => hooksOf(ctx);

/** Whether this n8n lets a node act when its execution ends. */
export function canActAtExecutionEnd(ctx: IExecuteFunctions): boolean {
	const hooks = hooksOf(ctx);
	if (!hooks) hintUnused(ctx);
	return hooks !== null;
}

/** Forgets the verdict on the execution-end hooks, as a new process would: for tests that change n8n under them. */
export function forgetExecutionEndCheck(): void {
	verdict = null;
}

/**
 * Calls `handler` once when this execution ends, with how it ended. Handlers run one after
 * another in the order they were added; one that throws does not stop the others. Returns false,
 * and adds nothing, when this n8n offers no execution hooks.
 */
export function atExecutionEnd(ctx: IExecuteFunctions, handler: EndHandler): boolean {
	const hooks = hooksOf(ctx);
	if (!hooks) {
		hintUnused(ctx);
		return false;
	}
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
