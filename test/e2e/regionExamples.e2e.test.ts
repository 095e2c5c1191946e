/**
 * The workflows in examples/ name only what exists: each node type and typeVersion is one the
 * installed n8n (N8N_VERSION, default 2.41.1) has, or one of this package's nodes; every
 * parameter set in a file is one that node version's description has and shows with the file's
 * other settings (at the top and inside collections and fixed collections, all the way down);
 * every fixed choice is one of its options; every credential is one the node takes, referenced
 * by name with a placeholder id; every connection leaves an output the node has.
 *
 * A fast test: it starts no n8n. It is in the e2e suite because it reads the installed n8n's own
 * node classes (n8n-nodes-base's package.json "n8n.nodes" list), which scripts/n8n-runtime.sh
 * installs there and `npm test` does not have on a fresh machine; ensureRuntime() installs it (or
 * fails), so the test never passes for want of n8n.
 */
import { execFileSync } from 'child_process';
import { readdirSync, readFileSync } from 'fs';
import path from 'path';

import type { INodeProperties, INodeType, INodeTypeDescription } from 'n8n-workflow';

import { ensureRuntime, repoRoot, type N8nRuntime } from './support/n8n';

/** The examples Start Step's recipes use (docs/nodes/start-step.md); all of examples/ is checked. */
const REGION_EXAMPLES = ['region-hubspot-contact.json', 'region-send-email.json', 'region-telegram.json', 'region-http-invoice.json', 'region-postgres-insert.json'];

interface ExampleNode {
	name: string;
	type: string;
	typeVersion: number;
	parameters: Record<string, unknown>;
	credentials?: Record<string, { id: string; name: string }>;
}
interface Example {
	name: string;
	nodes: ExampleNode[];
	connections: Record<string, { main: Array<Array<{ node: string; type: string; index: number }> | null> }>;
}

type Prop = INodeProperties & { values?: Prop[] };
type Choice = { name: string; value: unknown };

/** One node type: the versions it has, and each version's description. */
interface NodeTypeInfo {
	versions: number[];
	description(version: number): INodeTypeDescription;
}

const asList = (v: number | number[]) => (Array.isArray(v) ? v : [v]);

function typeInfo(instance: INodeType & { nodeVersions?: Record<string, INodeType> }): NodeTypeInfo {
	if (instance.nodeVersions) {
		const byVersion = new Map(Object.entries(instance.nodeVersions).map(([v, node]) => [Number(v), node.description]));
		return { versions: [...byVersion.keys()], description: (v) => byVersion.get(v)! };
	}
	return { versions: asList(instance.description.version), description: () => instance.description };
}

const instantiate = (file: string): INodeType => {
	// eslint-disable-next-line @typescript-eslint/no-require-imports
	const mod = require(file) as Record<string, unknown>;
	const NodeClass = Object.values(mod).find((v) => typeof v === 'function') as new () => INodeType;
	return new NodeClass();
};

/**
 * n8n-nodes-base's node types, as the installed n8n's own classes describe them (read in a child
 * process on n8n's Node: see support/nodeDescriptions.js), by type name.
 */
function baseNodeTypes(runtime: N8nRuntime, types: string[]): Map<string, NodeTypeInfo> {
	const script = path.join(__dirname, 'support', 'nodeDescriptions.js');
	const stdout = execFileSync(runtime.nodeBin, [script, runtime.n8nDir, ...types], { maxBuffer: 256 * 1024 * 1024, timeout: 5 * 60_000 });
	const read = JSON.parse(stdout.toString('utf8')) as Record<string, { versions: number[]; byVersion: Record<string, INodeTypeDescription> }>;
	return new Map(Object.entries(read).map(([type, { versions, byVersion }]) => [type, { versions, description: (v: number) => byVersion[String(v)] }]));
}

/** This package's node types, from the TypeScript sources package.json's "n8n.nodes" names. */
function ownNodeTypes(): Map<string, NodeTypeInfo> {
	const pkg = JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { name: string; n8n: { nodes: string[] } };
	const out = new Map<string, NodeTypeInfo>();
	for (const file of pkg.n8n.nodes) {
		const instance = instantiate(path.join(repoRoot, file.replace(/^dist\//, '').replace(/\.js$/, '')));
		out.set(`${pkg.name}.${instance.description.name}`, typeInfo(instance));
	}
	return out;
}

type Condition = { _cnd: Record<string, unknown> };

function versionMatches(version: number, allowed: unknown): boolean {
	if (typeof allowed === 'number') return version === allowed;
	const cnd = (allowed as Condition)?._cnd;
	if (!cnd) return false;
	return Object.entries(cnd).every(([op, v]) => {
		const n = Number(v);
		switch (op) {
			case 'eq': return version === n;
			case 'not': return version !== n;
			case 'gte': return version >= n;
			case 'gt': return version > n;
			case 'lte': return version <= n;
			case 'lt': return version < n;
			case 'between': return version >= Number((v as { from: number }).from) && version <= Number((v as { to: number }).to);
			default: throw new Error(`displayOptions condition "${op}" on @version is not known to this test`);
		}
	});
}

/**
 * What a parameter is set to, or else the default of the property of that name n8n shows with
 * these settings (Telegram has an "operation" per resource, each with its own default).
 */
function valueOf(name: string, version: number, local: Record<string, unknown>, localProps: Prop[], root: Record<string, unknown>, rootProps: Prop[], depth: number): unknown {
	const [values, props, key] = name.startsWith('/') ? [root, rootProps, name.slice(1)] : [local, localProps, name];
	if (key in values) return values[key];
	if (depth > 10) throw new Error(`displayOptions of "${key}" depend on themselves`);
	return props.find((p) => p.name === key && shown(p, version, values, props, root, rootProps, depth + 1))?.default;
}

function valueMatches(value: unknown, allowed: unknown): boolean {
	const cnd = (allowed as Condition)?._cnd;
	if (!cnd) return value === allowed;
	return Object.entries(cnd).every(([op, v]) => {
		switch (op) {
			case 'eq': return value === v;
			case 'not': return value !== v;
			case 'exists': return value !== undefined && value !== null && value !== '';
			case 'startsWith': return typeof value === 'string' && value.startsWith(String(v));
			case 'endsWith': return typeof value === 'string' && value.endsWith(String(v));
			case 'includes': return typeof value === 'string' && value.includes(String(v));
			default: throw new Error(`displayOptions condition "${op}" is not known to this test`);
		}
	});
}

/** Whether n8n shows this property with these settings (its displayOptions: show, hide, @version). */
function shown(p: Prop, version: number, local: Record<string, unknown>, localProps: Prop[], root: Record<string, unknown>, rootProps: Prop[], depth = 0): boolean {
	const { show, hide } = p.displayOptions ?? {};
	for (const [name, allowed] of Object.entries(show ?? {})) {
		if (name === '@version') {
			if (!(allowed as unknown[]).some((a) => versionMatches(version, a))) return false;
		} else if (name.startsWith('@')) {
			return false; // @tool and the like: only when n8n runs the node as an agent's tool
		} else if (!(allowed as unknown[]).some((a) => valueMatches(valueOf(name, version, local, localProps, root, rootProps, depth), a))) {
			return false;
		}
	}
	for (const [name, hidden] of Object.entries(hide ?? {})) {
		if (name === '@version') {
			if ((hidden as unknown[]).some((a) => versionMatches(version, a))) return false;
		} else if (!name.startsWith('@') && (hidden as unknown[]).some((a) => valueMatches(valueOf(name, version, local, localProps, root, rootProps, depth), a))) {
			return false;
		}
	}
	return true;
}

const isExpression = (v: unknown) => typeof v === 'string' && v.startsWith('=');

/** Every parameter in `values` exists among `props`, is shown, and holds one of its fixed choices; the same inside collections. */
function checkParameters(where: string, props: Prop[], values: Record<string, unknown>, version: number, root: Record<string, unknown>, rootProps: Prop[]): string[] {
	const wrong: string[] = [];
	for (const [name, value] of Object.entries(values)) {
		const named = props.filter((p) => p.name === name);
		const at = `${where}${name}`;
		if (named.length === 0) {
			wrong.push(`${at}: no such parameter (there are: ${[...new Set(props.map((p) => p.name))].join(', ')})`);
			continue;
		}
		const visible = named.filter((p) => shown(p, version, values, props, root, rootProps));
		if (visible.length === 0) {
			wrong.push(`${at}: the parameter exists but n8n does not show it with the other settings of this node (displayOptions ${JSON.stringify(named.map((p) => p.displayOptions))})`);
			continue;
		}
		const p = visible[0];
		const fixed = !p.typeOptions?.loadOptionsMethod && !p.typeOptions?.loadOptions;
		if (p.type === 'options' && fixed && !isExpression(value)) {
			const choices = ((p.options ?? []) as Choice[]).map((o) => o.value);
			if (!choices.includes(value)) wrong.push(`${at}: ${JSON.stringify(value)} is no choice of "${p.displayName}" (${choices.map((c) => JSON.stringify(c)).join(', ')})`);
		} else if (p.type === 'multiOptions' && fixed && Array.isArray(value)) {
			const choices = ((p.options ?? []) as Choice[]).map((o) => o.value);
			for (const v of value) if (!choices.includes(v)) wrong.push(`${at}: ${JSON.stringify(v)} is no choice of "${p.displayName}"`);
		} else if (p.type === 'collection') {
			wrong.push(...checkParameters(`${at}.`, (p.options ?? []) as Prop[], (value ?? {}) as Record<string, unknown>, version, root, rootProps));
		} else if (p.type === 'fixedCollection') {
			const groups = (p.options ?? []) as Prop[];
			for (const [groupName, entries] of Object.entries((value ?? {}) as Record<string, unknown>)) {
				const group = groups.find((g) => g.name === groupName);
				if (!group) {
					wrong.push(`${at}.${groupName}: no such group (there are: ${groups.map((g) => g.name).join(', ')})`);
					continue;
				}
				const list = Array.isArray(entries) ? entries : [entries];
				list.forEach((entry, i) => wrong.push(...checkParameters(`${at}.${groupName}[${i}].`, group.values ?? [], (entry ?? {}) as Record<string, unknown>, version, root, rootProps)));
			}
		}
	}
	return wrong;
}

/** How many main outputs a node has with these settings, where the description says so plainly. */
function outputCount(type: string, description: INodeTypeDescription, parameters: Record<string, unknown>): number | null {
	if (type === 'n8n-nodes-idempotency.startStep') return parameters.onUncertain === 'check' ? 5 : 4;
	if (Array.isArray(description.outputs)) return description.outputs.length;
	return null;
}

const exampleFiles = readdirSync(path.join(repoRoot, 'examples')).filter((f) => f.endsWith('.json')).sort();
const loadExample = (file: string) => JSON.parse(readFileSync(path.join(repoRoot, 'examples', file), 'utf8')) as Example;

describe('examples/: every node type, version, parameter, choice and credential exists in the installed n8n (or this package)', () => {
	let runtime: N8nRuntime;
	let base: Map<string, NodeTypeInfo>;
	const baseType = (type: string) => base.get(type);
	const own = ownNodeTypes();

	beforeAll(async () => {
		runtime = await ensureRuntime();
		const types = new Set(exampleFiles.flatMap((f) => loadExample(f).nodes.map((n) => n.type)).filter((t) => t.startsWith('n8n-nodes-base.')));
		base = baseNodeTypes(runtime, [...types, 'n8n-nodes-base.hubspot']);
	});

	test('the region examples are there, and the installed n8n is the one asked for', () => {
		for (const file of REGION_EXAMPLES) expect(exampleFiles).toContain(file);
		const installed = JSON.parse(readFileSync(path.join(runtime.n8nDir, 'node_modules', 'n8n', 'package.json'), 'utf8')) as { version: string };
		expect(installed.version).toBe(runtime.version);
		expect(own.has('n8n-nodes-idempotency.startStep')).toBe(true);
	});

	test('the check finds what is invented: an unknown parameter, a hidden one, a wrong choice, an unknown group field, a missing version', () => {
		const hubspot = baseType('n8n-nodes-base.hubspot')!;
		const props = hubspot.description(2.2).properties as Prop[];
		const check = (parameters: Record<string, unknown>) => checkParameters('', props, parameters, 2.2, parameters, props);
		expect(check({ operation: 'search', limit: 1 })).toEqual([]);
		expect(check({ operation: 'create' })[0]).toMatch(/"create" is no choice of "Operation"/);
		expect(check({ emailAddress: 'a@b.c' })[0]).toMatch(/emailAddress: no such parameter/);
		expect(check({ operation: 'search', email: 'a@b.c' })[0]).toMatch(/email: the parameter exists but n8n does not show it/);
		expect(check({ operation: 'search', filterGroupsUi: { filterGroupsValues: [{ filtersUi: { filterValues: [{ property: 'email' }] } }] } })[0]).toMatch(/filterValues\[0\]\.property: no such parameter/);
		expect(hubspot.versions).not.toContain(2.9);
	});

	test.each(exampleFiles.map((f) => [f]))('%s', (file) => {
		const example = loadExample(file);
		const wrong: string[] = [];
		const byName = new Map(example.nodes.map((n) => [n.name, n]));
		for (const node of example.nodes) {
			const info = node.type.startsWith('n8n-nodes-base.') ? baseType(node.type) : own.get(node.type);
			const at = `"${node.name}" (${node.type} v${node.typeVersion})`;
			if (!info) {
				wrong.push(`${at}: no such node type in n8n ${runtime.version} or this package`);
				continue;
			}
			if (!info.versions.includes(node.typeVersion)) {
				wrong.push(`${at}: n8n ${runtime.version} has versions ${info.versions.join(', ')} of this node`);
				continue;
			}
			const description = info.description(node.typeVersion);
			const props = description.properties as Prop[];
			wrong.push(...checkParameters(`${at}: `, props, node.parameters, node.typeVersion, node.parameters, props));
			for (const [credentialType, ref] of Object.entries(node.credentials ?? {})) {
				const declared = (description.credentials ?? []).filter((c) => c.name === credentialType);
				// HTTP Request takes any credential type, named by a parameter (Generic or Predefined Credential Type).
				const namedByParameter = [node.parameters.genericAuthType, node.parameters.nodeCredentialType].includes(credentialType);
				if (namedByParameter) continue;
				if (declared.length === 0) wrong.push(`${at}: takes no "${credentialType}" credential (it takes ${(description.credentials ?? []).map((c) => c.name).join(', ')})`);
				else if (!declared.some((c) => shown({ ...c, displayName: c.name, type: 'string', default: '' } as Prop, node.typeVersion, node.parameters, props, node.parameters, props)))
					wrong.push(`${at}: the "${credentialType}" credential is not shown with these settings`);
				if (!/^replace-with-/.test(ref.id) || !ref.name) wrong.push(`${at}: credential "${credentialType}" must be referenced by name with a replace-with-… id`);
			}
			const outputs = outputCount(node.type, description, node.parameters);
			const main = example.connections[node.name]?.main ?? [];
			if (outputs !== null && main.length > outputs) wrong.push(`${at}: connected on output ${main.length - 1}, but it has ${outputs} outputs`);
			for (const target of main.flat()) if (target && !byName.has(target.node)) wrong.push(`${at}: connects to "${target.node}", which is not in the file`);
		}
		for (const from of Object.keys(example.connections)) if (!byName.has(from)) wrong.push(`connections from "${from}", which is not in the file`);
		// A Start Step's region ends: a Mark Step Done follows it (the node refuses to run otherwise).
		for (const start of example.nodes.filter((n) => n.type === 'n8n-nodes-idempotency.startStep')) {
			const seen = new Set<string>();
			const queue = [start.name];
			while (queue.length) for (const t of (example.connections[queue.shift()!]?.main ?? []).flat()) if (t && !seen.has(t.node)) (seen.add(t.node), queue.push(t.node));
			if (![...seen].some((n) => byName.get(n)?.type === 'n8n-nodes-idempotency.markStepDone')) wrong.push(`"${start.name}": no Mark Step Done after it`);
			if (start.parameters.onUncertain === 'check' && !(example.connections[start.name]?.main?.[4] ?? []).length) wrong.push(`"${start.name}": Send to Check First, but Check First leads nowhere`);
		}
		expect(wrong).toEqual([]);
	});
});
