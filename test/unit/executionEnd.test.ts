/**
 * lib/n8n/executionEnd.ts, the one place that touches n8n's execution hooks: both shapes n8n has
 * had (ExecutionLifecycleHooks.addHandler, and the older WorkflowHooks.hookFunctions table), one
 * hook per execution however many times a node asks, how an execution ended, and `false` on an
 * n8n without hooks; and lib/n8n/openUnits.ts, the units of work kept per execution on top of it.
 */
import type { IExecuteFunctions } from 'n8n-workflow';

import { atExecutionEnd, canActAtExecutionEnd, endOf, forgetExecutionEndCheck, type ExecutionEnd } from '../../lib/n8n/executionEnd';
import { leaveUnitsOpen, openUnitsOf } from '../../lib/n8n/openUnits';

type Handler = (run: unknown) => Promise<void>;

/** n8n's ExecutionLifecycleHooks as n8n-core 1.8x to 2.x write it: a list of handlers per hook. */
class LifecycleHooks {
	readonly handlers: Record<string, Handler[]> = { workflowExecuteAfter: [], nodeExecuteAfter: [] };
	constructor(
		readonly mode = 'trigger',
		readonly executionId = 'e-1',
		readonly workflowData = {},
	) {}
	addHandler(name: string, ...handlers: Handler[]) {
		this.handlers[name].push(...handlers);
	}
	async runHook(name: string, parameters: unknown[]) {
		for (const handler of this.handlers[name]) await handler.apply(this, parameters as [unknown]);
	}
}

/** The older WorkflowHooks: a table of handlers per hook. */
class WorkflowHooks {
	constructor(readonly hookFunctions: Record<string, Handler[] | undefined>) {}
	async executeHookFunctions(name: string, parameters: unknown[]) {
		for (const handler of this.hookFunctions[name] ?? []) await handler.apply(this, parameters as [unknown]);
	}
}

const node = {
	getNode: () => ({ name: 'Gate' }),
	logger: { warn: () => undefined },
	addExecutionHints: () => undefined,
};
const ctxWith = (hooks: unknown) => ({ ...node, additionalData: { hooks } }) as unknown as IExecuteFunctions;

beforeEach(forgetExecutionEndCheck);

describe('acting when the execution ends', () => {
	test('ExecutionLifecycleHooks (n8n 1.8x and 2.x): one hook for many requests, run in order, one failure does not stop the rest', async () => {
		const hooks = new LifecycleHooks();
		const added = hooks.handlers.workflowExecuteAfter;
		const ctx = ctxWith(hooks);
		const seen: string[] = [];
		expect(canActAtExecutionEnd(ctx)).toBe(true);
		expect(atExecutionEnd(ctx, async (end) => void seen.push(`a:${end}`))).toBe(true);
		atExecutionEnd(ctx, async () => {
			throw new Error('ledger down');
		});
		atExecutionEnd(ctx, async (end) => void seen.push(`c:${end}`));
		expect(added).toHaveLength(1);
		await added[0]({ status: 'success', data: { resultData: {} } });
		expect(seen).toEqual(['a:succeeded', 'c:succeeded']);
	});

	test('the older WorkflowHooks table works the same', async () => {
		const hookFunctions: Record<string, Handler[]> = {};
		const ctx = ctxWith(new WorkflowHooks(hookFunctions));
		let ended: ExecutionEnd | undefined;
		expect(atExecutionEnd(ctx, async (end) => void (ended = end))).toBe(true);
		await hookFunctions.workflowExecuteAfter[0]({ data: { resultData: { error: { message: 'boom' } } } });
		expect(ended).toBe('failed');
	});

	test('an n8n without hooks: false, and nothing is registered', () => {
		for (const ctx of [ctxWith(undefined), node as unknown as IExecuteFunctions, ctxWith({ something: 1 })]) {
			expect(canActAtExecutionEnd(ctx)).toBe(false);
			expect(atExecutionEnd(ctx, async () => undefined)).toBe(false);
		}
	});

	test.each([
		[{ status: 'success', data: { resultData: {} } }, 'succeeded'],
		[{ status: 'error', data: { resultData: {} } }, 'failed'],
		[{ status: 'success', data: { resultData: { error: { message: 'x' } } } }, 'failed'],
		[{ status: 'canceled' }, 'failed'],
		[{ status: 'crashed' }, 'failed'],
		[{ status: 'waiting', waitTill: new Date() }, 'waiting'],
		[undefined, 'failed'],
	] as const)('%j ended %s', (run, end) => {
		expect(endOf(run as never)).toBe(end);
	});
});

describe('the check of the hooks, once per process', () => {
	const watchedCtx = (hooks: unknown, executionId = 'e-1') => {
		const said = { warnings: [] as string[], hints: [] as unknown[] };
		const ctx = {
			...node,
			getExecutionId: () => executionId,
			logger: { warn: (message: string) => said.warnings.push(message) },
			addExecutionHints: (...hints: unknown[]) => said.hints.push(...hints),
			additionalData: { hooks },
		} as unknown as IExecuteFunctions;
		return { ctx, said };
	};

	test.each([
		['that no longer runs what was added for the end of an execution', new (class extends LifecycleHooks {
			async runHook(name: string, parameters: unknown[]) {
				if (name !== 'workflowExecuteAfter') await super.runHook(name, parameters);
			}
		})(), 'e-1', 'did not run when that hook ran'],
		['of another execution', new LifecycleHooks(), 'e-2', 'belong to another execution'],
		['without runHook', { addHandler: () => undefined }, 'e-1', 'lack the addHandler and runHook'],
		['whose class cannot be made again', new (class extends LifecycleHooks {
			// A later n8n's class, made with other arguments than n8n-core 1.8x to 2.x's.
			constructor(push: unknown) {
				if (typeof push !== 'object') throw new Error('a hooks object needs its push connection');
				super();
			}
		})({}), 'e-1', 'a hooks object needs its push connection'],
	] as const)('hooks %s: not used, nothing added to them, said once in the log and once per node run', (_what, hooks, executionId, why) => {
		const { ctx, said } = watchedCtx(hooks, executionId);
		expect(canActAtExecutionEnd(ctx)).toBe(false);
		expect(atExecutionEnd(ctx, async () => undefined)).toBe(false);
		if (hooks instanceof LifecycleHooks) expect(hooks.handlers.workflowExecuteAfter).toEqual([]);
		expect(said.warnings).toEqual([expect.stringContaining(why)]);
		expect(said.hints).toEqual([expect.objectContaining({ type: 'warning', message: expect.stringContaining(why) })]);
		const next = watchedCtx(hooks, executionId);
		expect(canActAtExecutionEnd(next.ctx)).toBe(false);
		expect(next.said.warnings).toEqual([]);
		expect(next.said.hints).toHaveLength(1);
	});

	test("n8n's own hooks pass: the check adds nothing to them and says nothing", () => {
		const hooks = new LifecycleHooks();
		const { ctx, said } = watchedCtx(hooks);
		expect(canActAtExecutionEnd(ctx)).toBe(true);
		expect(hooks.handlers.workflowExecuteAfter).toEqual([]);
		expect(said).toEqual({ warnings: [], hints: [] });
	});
});

describe('units a node of this execution left open', () => {
	test('kept per execution: another execution does not see them, and an n8n without hooks keeps nothing', () => {
		const one = ctxWith(new LifecycleHooks());
		const other = ctxWith(new LifecycleHooks());
		const askOne = openUnitsOf(one);
		leaveUnitsOpen(one, [{ namespace: 'workflow:1', key: 'a' }]);
		leaveUnitsOpen(one, []);
		// Asked after the fact, as the gate's end handler does.
		expect(askOne({ namespace: 'workflow:1', key: 'a' })).toBe(true);
		expect(askOne({ namespace: 'workflow:1', key: 'b' })).toBe(false);
		expect(askOne({ namespace: 'workflow:2', key: 'a' })).toBe(false);
		expect(openUnitsOf(other)({ namespace: 'workflow:1', key: 'a' })).toBe(false);
		const none = ctxWith(undefined);
		leaveUnitsOpen(none, [{ namespace: 'workflow:1', key: 'a' }]);
		expect(openUnitsOf(none)({ namespace: 'workflow:1', key: 'a' })).toBe(false);
	});
});
