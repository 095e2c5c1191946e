/**
 * lib/n8n/executionEnd.ts, the one place that touches n8n's execution hooks: both shapes n8n has
 * had (ExecutionLifecycleHooks.addHandler, and the older WorkflowHooks.hookFunctions table), one
 * hook per execution however many times a node asks, how an execution ended, and `false` on an
 * n8n without hooks; and lib/n8n/openUnits.ts, the units of work kept per execution on top of it.
 */
import type { IExecuteFunctions } from 'n8n-workflow';

import { atExecutionEnd, canActAtExecutionEnd, endOf, type ExecutionEnd } from '../../lib/n8n/executionEnd';
import { leaveUnitsOpen, openUnitsOf } from '../../lib/n8n/openUnits';

type Handler = (run: unknown) => Promise<void>;
const ctxWith = (hooks: unknown) => ({ additionalData: { hooks } }) as unknown as IExecuteFunctions;

describe('acting when the execution ends', () => {
	test('ExecutionLifecycleHooks (n8n 1.8x and 2.x): one hook for many requests, run in order, one failure does not stop the rest', async () => {
		const added: Handler[] = [];
		const ctx = ctxWith({ addHandler: (name: string, handler: Handler) => name === 'workflowExecuteAfter' && added.push(handler) });
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
		const ctx = ctxWith({ hookFunctions });
		let ended: ExecutionEnd | undefined;
		expect(atExecutionEnd(ctx, async (end) => void (ended = end))).toBe(true);
		await hookFunctions.workflowExecuteAfter[0]({ data: { resultData: { error: { message: 'boom' } } } });
		expect(ended).toBe('failed');
	});

	test('an n8n without hooks: false, and nothing is registered', () => {
		for (const ctx of [ctxWith(undefined), ({}) as IExecuteFunctions, ctxWith({ something: 1 })]) {
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

describe('units a node of this execution left open', () => {
	test('kept per execution: another execution does not see them, and an n8n without hooks keeps nothing', () => {
		const one = ctxWith({ addHandler: () => undefined });
		const other = ctxWith({ addHandler: () => undefined });
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
