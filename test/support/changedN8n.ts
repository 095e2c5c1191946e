/**
 * A future n8n, made from the real one: the fence tests (lineageCheck, shortcutCheck,
 * executionEndCheck) change what n8n-workflow's data proxy or a node's execution hooks answer
 * inside the engine the tests run, as such an n8n would, and watch what our nodes warn.
 */
import type { ExecutionLifecycleHooks } from 'n8n-core';
import { WorkflowDataProxy, type IExecuteFunctions, type INodeType } from 'n8n-workflow';

/** What n8n hands an expression: `$json`, `$input`, `$getPairedItem`... */
export type DataProxy = Record<string, unknown>;

/** While `change` is in place, every data proxy n8n builds is `change(the real one)`; call the answer to put n8n back. */
export function withChangedN8n(change: (proxy: DataProxy) => DataProxy): () => void {
	const original = Object.getOwnPropertyDescriptor(WorkflowDataProxy.prototype, 'getDataProxy')!;
	const real = original.value as (this: WorkflowDataProxy, ...args: unknown[]) => DataProxy;
	Object.defineProperty(WorkflowDataProxy.prototype, 'getDataProxy', {
		...original,
		value(this: WorkflowDataProxy, ...args: unknown[]) {
			return change(real.apply(this, args));
		},
	});
	return () => Object.defineProperty(WorkflowDataProxy.prototype, 'getDataProxy', original);
}

/** What a fence says when it finds n8n changed: one warning in n8n's log for the process, saying `what` and asking for the n8n version. */
export function expectWarnedOnce(warnings: string[], what: string): void {
	expect(warnings).toHaveLength(1);
	expect(warnings[0]).toContain(what);
	expect(warnings[0]).toContain('Please report your n8n version');
}

/** n8n's execution hooks, as a node finds them in its additional data. */
export type Hooks = ExecutionLifecycleHooks & Record<string, unknown>;

/**
 * The node type with `this.logger.warn` written to `warnings` (n8n's logger is read-only on the
 * context) and, with `change`, `this.additionalData.hooks` replaced by change(hooks), one per execution.
 */
export function watched(type: INodeType, warnings: string[], change?: (hooks: Hooks) => object): INodeType {
	const execute = type.execute!;
	const changed = new WeakMap<object, object>();
	return Object.assign(Object.create(type) as INodeType, {
		async execute(this: IExecuteFunctions) {
			const ctx = this;
			const logger = new Proxy(ctx.logger, { get: (target, key) => (key === 'warn' ? (message: string) => warnings.push(message) : Reflect.get(target, key)) });
			const seen = new Proxy({}, {
				get(_, key) {
					if (key === 'logger') return logger;
					const value = Reflect.get(ctx, key);
					if (key === 'additionalData' && change) {
						const hooks = (value as { hooks: Hooks }).hooks;
						if (!changed.has(hooks)) changed.set(hooks, change(hooks));
						return { ...(value as object), hooks: changed.get(hooks) };
					}
					return typeof value === 'function' ? value.bind(ctx) : value;
				},
			}) as IExecuteFunctions;
			return await execute.call(seen);
		},
	});
}
