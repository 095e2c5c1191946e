/**
 * A future n8n, made from the real one: the fence tests (lineageCheck, shortcutCheck) change what
 * n8n-workflow's data proxy answers inside the engine the tests run, as such an n8n would.
 */
import { WorkflowDataProxy } from 'n8n-workflow';

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
