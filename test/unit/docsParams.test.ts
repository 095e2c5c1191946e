/**
 * The docs stay true to the code:
 * - each node's reference page (docs/nodes/*.md) carries the parameter table that
 *   scripts/docs-params.js renders from the node's description (here: from the TypeScript
 *   source, so a parameter change that was not regenerated fails);
 * - every relative link and image in README.md and docs/**\/*.md points at a file that exists, and
 *   a #fragment on a link to a markdown file names one of its headings (GitHub's anchors);
 * - every name the prose of README.md and docs/ sets in *italics* or **bold** that looks like a
 *   panel name (Title Case) is one the nodes or credentials really show.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'fs';
import path from 'path';

import type { ICredentialType, INodeProperties, INodeType, INodeTypeDescription } from 'n8n-workflow';

interface DocsParams {
	renderTable(description: INodeTypeDescription): string;
	generatedBlock(nodeName: string, table: string): string;
	currentBlock(text: string, nodeName: string): string | null;
	findPage(nodeName: string): string | null;
	nodeFiles(): string[];
	START(nodeName: string): string;
}

const root = path.join(__dirname, '../..');
// eslint-disable-next-line @typescript-eslint/no-require-imports
const docs = require(path.join(root, 'scripts/docs-params.js')) as DocsParams;

/** dist/nodes/X/X.node.js (as package.json lists it) → the node's description from nodes/X/X.node.ts. */
function sourceDescription(distFile: string): INodeTypeDescription {
	const source = path.join(root, distFile.replace(/^dist\//, '').replace(/\.js$/, ''));
	// eslint-disable-next-line @typescript-eslint/no-require-imports
	const mod = require(source) as Record<string, new () => INodeType>;
	const NodeClass = Object.values(mod).find((v) => typeof v === 'function')!;
	return new NodeClass().description as INodeTypeDescription;
}

const descriptions = docs.nodeFiles().map(sourceDescription);

describe('parameter tables in docs/nodes match the node descriptions', () => {
	test('package.json lists the seven nodes', () => {
		expect(descriptions.map((d) => d.name).sort()).toEqual(['dedupeGate', 'guardedSend', 'idempotencyLedger', 'markStepDone', 'promptCache', 'promptCacheChatModel', 'startStep']);
	});

	test.each(descriptions.map((d) => [d.name, d] as const))('%s', (name, description) => {
		const page = docs.findPage(name);
		if (!page) throw new Error(`No page under docs/nodes/ has the marker ${docs.START(name)}: add it, then run npm run docs:params`);
		const current = docs.currentBlock(readFileSync(page, 'utf8'), name);
		const want = docs.generatedBlock(name, docs.renderTable(description));
		if (current !== want) {
			throw new Error(
				`The parameter table in ${path.relative(root, page)} differs from the ${name} node's description: run npm run docs:params\n\n` +
					`--- in the page\n${current}\n\n--- from the description\n${want}`,
			);
		}
	});
});

function markdownFiles(): string[] {
	const out = [path.join(root, 'README.md')];
	const walk = (dir: string) => {
		for (const entry of readdirSync(dir)) {
			const abs = path.join(dir, entry);
			if (statSync(abs).isDirectory()) walk(abs);
			else if (entry.endsWith('.md')) out.push(abs);
		}
	};
	walk(path.join(root, 'docs'));
	return out;
}

/** Link and image targets: [text](target), ![alt](target), <img src="target">, outside code. */
function targets(markdown: string): string[] {
	const prose = markdown.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');
	const found: string[] = [];
	for (const m of prose.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) found.push(m[1]);
	for (const m of prose.matchAll(/<img\b[^>]*\bsrc="([^"]+)"/g)) found.push(m[1]);
	for (const m of prose.matchAll(/^\[[^\]]+\]:\s*(\S+)/gm)) found.push(m[1]);
	return found;
}

/** GitHub's heading anchors of a markdown file: lower case, punctuation dropped, spaces as dashes. */
function anchors(markdown: string): Set<string> {
	const seen = new Map<string, number>();
	const out = new Set<string>();
	for (const m of markdown.replace(/^```[\s\S]*?^```/gm, '').matchAll(/^#{1,6} +(.+?) *#*$/gm)) {
		const base = m[1]
			.replace(/<[^>]+>/g, '')
			.toLowerCase()
			.replace(/[^\p{L}\p{N} _-]/gu, '')
			.replace(/ /g, '-');
		const n = seen.get(base) ?? 0;
		seen.set(base, n + 1);
		out.add(n === 0 ? base : `${base}-${n}`);
	}
	return out;
}

describe('relative links and images in README.md and docs/ point at files that exist', () => {
	const files = markdownFiles();

	test('there are pages to check', () => {
		expect(files.length).toBeGreaterThan(5);
	});

	test.each(files.map((f) => [path.relative(root, f), f]))('%s', (_rel, file) => {
		const broken = targets(readFileSync(file, 'utf8'))
			.filter((t) => !/^[a-z][a-z0-9+.-]*:/i.test(t) && !t.startsWith('#'))
			.filter((t) => !existsSync(path.resolve(path.dirname(file), decodeURIComponent(t.split('#')[0].split('?')[0]))));
		expect(broken).toEqual([]);
	});

	test.each(files.map((f) => [path.relative(root, f), f]))('%s: #anchors name a heading', (_rel, file) => {
		const wrong = targets(readFileSync(file, 'utf8'))
			.filter((t) => !/^[a-z][a-z0-9+.-]*:/i.test(t) && t.includes('#'))
			.filter((t) => {
				const [target, fragment] = t.split('#');
				const abs = target ? path.resolve(path.dirname(file), decodeURIComponent(target)) : file;
				if (!abs.endsWith('.md') || !existsSync(abs)) return false;
				return !anchors(readFileSync(abs, 'utf8')).has(decodeURIComponent(fragment));
			});
		expect(wrong).toEqual([]);
	});
});

describe('the Guarded Send page lists exactly the reasons the node puts on items', () => {
	test('every reason in nodes/GuardedSend/reasons.ts has a row, and no row names another', () => {
		// eslint-disable-next-line @typescript-eslint/no-require-imports
		const { REASONS, IN_PROGRESS_REASONS } = require(path.join(root, 'nodes/GuardedSend/reasons')) as { REASONS: readonly string[]; IN_PROGRESS_REASONS: Record<string, string> };
		const page = readFileSync(path.join(root, 'docs/nodes/guarded-send.md'), 'utf8');
		const section = page.slice(page.indexOf('`reason` on **Skipped**'), page.indexOf('**In Progress** (the fourth output)'));
		const rows = [...section.matchAll(/^\| `([a-z_]+)` \|/gm)].map((m) => m[1]);
		const onlyInProgress = (r: string) => r in IN_PROGRESS_REASONS && !rows.includes(r);
		expect([...new Set(rows)].sort()).toEqual(REASONS.filter((r) => !onlyInProgress(r)).sort());
		// In Progress's reasons are named in its own paragraph.
		const inProgress = page.slice(page.indexOf('**In Progress** (the fourth output)'), page.indexOf('Needs Review carries only what needs a person'));
		expect(inProgress).toContain('`reason` are `in_progress`');
		for (const reason of Object.keys(IN_PROGRESS_REASONS)) expect(inProgress).toContain(`\`${reason}\``);
	});
});

describe('the README troubleshooting table quotes messages the code really has', () => {
	const sources = (dir: string): string[] =>
		readdirSync(dir).flatMap((entry) => {
			const abs = path.join(dir, entry);
			if (statSync(abs).isDirectory()) return sources(abs);
			return abs.endsWith('.ts') ? [readFileSync(abs, 'utf8')] : [];
		});
	const code = [...sources(path.join(root, 'lib')), ...sources(path.join(root, 'nodes'))].join('\n');
	const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
	const table = readme.slice(readme.indexOf('## Troubleshooting'), readme.indexOf('## Read more'));
	// Column 1 of each row that quotes messages (in italics); not n8n's own messages or situations
	// described in plain words.
	const quoted = [...table.matchAll(/^\| ([^|]+) \|/gm)]
		.map((m) => m[1])
		.filter((cell) => cell.startsWith('*'))
		.flatMap((cell) => [...cell.matchAll(/\*([^*]+)\*/g)].map((m) => m[1]));

	test('the table quotes at least ten messages', () => {
		expect(quoted.length).toBeGreaterThanOrEqual(10);
	});

	test.each(quoted.map((q) => [q]))('%s', (message) => {
		// What varies per case ("…", numbers, quoted names, a parenthesis naming the field) and the
		// joints where the code composes a message (": ") are left out; each literal piece of some
		// length must appear in the code as it is.
		const pieces = message
			.split(/…|"[^"]*"|\([^)]*\)|\d+|: /)
			.map((p) => p.trim())
			.filter((p) => p.length >= 8);
		expect(pieces.length).toBeGreaterThan(0);
		for (const piece of pieces) expect({ piece, found: code.includes(piece) }).toEqual({ piece, found: true });
	});
});

describe("the README's table of tested n8n versions is the e2e matrix", () => {
	// eslint-disable-next-line @typescript-eslint/no-require-imports
	const { MATRIX } = require('../e2e/support/matrix') as { MATRIX: Array<{ version: string; node: number; n8nWorkflow: string }> };
	const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
	const section = readme.slice(readme.indexOf('**Tested with**'), readme.indexOf('## Quick start'));

	test('one row per version, newest first, with the Node it runs on', () => {
		const rows = [...section.matchAll(/^\| (\d+\.\d+\.\d+) \| (\d+) \|/gm)].map((m) => ({ version: m[1], node: Number(m[2]) }));
		expect(rows).toEqual(MATRIX.map(({ version, node }) => ({ version, node })));
	});

	test('the peer range of n8n-workflow admits the n8n-workflow of each version, and nothing of another minor line', () => {
		// eslint-disable-next-line @typescript-eslint/no-require-imports
		const semver = require('semver') as { satisfies(version: string, range: string): boolean };
		// eslint-disable-next-line @typescript-eslint/no-require-imports
		const range: string = require('../../package.json').peerDependencies['n8n-workflow'];
		for (const { n8nWorkflow } of MATRIX) {
			expect({ n8nWorkflow, ok: semver.satisfies(n8nWorkflow, range) }).toEqual({ n8nWorkflow, ok: true });
			const [major, minor] = n8nWorkflow.split('.').map(Number);
			expect(semver.satisfies(`${major}.${minor + 5}.0`, range)).toBe(false);
		}
		expect(semver.satisfies('1.80.0', range)).toBe(false);
	});
});

/** What the panel shows, over all nodes and credentials, and per node. */
interface PanelNames {
	/** Node, parameter, option, choice and output names; credential names and their fields; node names in examples/. */
	names: Set<string>;
	/** Which name leads to which: "Options → Step Name", "Key → Release", "Model Parameters → Temperature". */
	paths: Set<string>;
	/** The choices of each options parameter, by its name (joined where nodes share a name). */
	choices: Map<string, Set<string>>;
	/** Each node page's own names: its parameters, options, choices and outputs. */
	byNode: Map<string, Set<string>>;
}

function panelNames(): PanelNames {
	const all: PanelNames = { names: new Set(), paths: new Set(), choices: new Map(), byNode: new Map() };
	type Prop = INodeProperties & { values?: Prop[] };
	type Choice = { name: string; value: unknown };
	const walk = (props: Prop[], own: Set<string>) => {
		const add = (n: string) => (all.names.add(n), own.add(n));
		const path2 = (a: string, b: string) => all.paths.add(`${a} → ${b}`);
		for (const p of props) {
			add(p.displayName);
			for (const o of (p.options ?? []) as Array<Prop | Choice>) {
				if ('value' in o) {
					const { name } = o as Choice;
					add(name);
					path2(p.displayName, name);
					if (!all.choices.has(p.displayName)) all.choices.set(p.displayName, new Set());
					all.choices.get(p.displayName)!.add(name);
				} else {
					// An option of a collection, or a group of a fixed collection.
					const sub = o as Prop;
					path2(p.displayName, sub.displayName);
					walk([sub], own);
					for (const v of sub.values ?? []) path2(sub.displayName, v.displayName);
				}
			}
			if (p.values) walk(p.values, own);
		}
		// A choice leads to what it shows: "Key → Release" (Resource: Key, then Operation: Release).
		for (const p of props) {
			for (const [param, values] of Object.entries(p.displayOptions?.show ?? {})) {
				for (const q of props.filter((x) => x.name === param && x.type === 'options')) {
					for (const o of (q.options ?? []) as Choice[]) {
						if (!(values as unknown[]).includes(o.value)) continue;
						path2(o.name, p.displayName);
						for (const c of (p.type === 'options' ? (p.options ?? []) : []) as Choice[]) path2(o.name, c.name);
					}
				}
			}
		}
	};
	for (const d of descriptions) {
		const own = new Set<string>([d.displayName]);
		all.names.add(d.displayName);
		walk(d.properties as Prop[], own);
		const outputs = [...(d.outputNames ?? [])];
		// Outputs that depend on the parameters are an expression over literals: read its names.
		if (typeof d.outputs === 'string') for (const m of d.outputs.matchAll(/displayName:\s*(['"])(.*?)\1/g)) outputs.push(m[2]);
		for (const n of outputs) (all.names.add(n), own.add(n));
		all.byNode.set(d.name, own);
	}
	const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { n8n: { credentials: string[] } };
	for (const file of pkg.n8n.credentials) {
		// eslint-disable-next-line @typescript-eslint/no-require-imports
		const mod = require(path.join(root, file.replace(/^dist\//, '').replace(/\.js$/, ''))) as Record<string, new () => ICredentialType>;
		const credential = new (Object.values(mod).find((v) => typeof v === 'function')!)();
		all.names.add(credential.displayName);
		walk(credential.properties as Prop[], new Set());
	}
	// The README walks through the example workflows by their nodes' names ("Do the Work").
	for (const file of readdirSync(path.join(root, 'examples')).filter((f) => f.endsWith('.json'))) {
		const workflow = JSON.parse(readFileSync(path.join(root, 'examples', file), 'utf8')) as { nodes: Array<{ name: string }> };
		for (const node of workflow.nodes) all.names.add(node.name);
	}
	return all;
}

/**
 * Emphasis that is Title Case and still no name of this package's panels. Keep it short; a name
 * the panel has, spelled otherwise, belongs fixed in the docs, not here.
 */
const NOT_PANEL_NAMES = new Set([
	// n8n's own screens, settings, nodes and credentials, which the docs tell people to open.
	'Settings → Community Nodes',
	'Settings → Community Nodes → Install',
	'Workflows → Import from File',
	'Executions',
	'Docs', // the link at the top of every node panel
	'On Error',
	'On Error → Continue',
	'Continue',
	'Continue On Fail',
	'Execute',
	'Test', // the button on a credential
	'Respond', // the Webhook node's setting, and its choices
	'Immediately',
	"Using 'Respond to Webhook' Node",
	'Respond to Webhook',
	'Slack API', // n8n's credentials that Guarded Send uses, and fields of theirs
	'SMTP',
	'IMAP',
	'Access Token',
	'SSL/TLS',
	'Disable STARTTLS',
	'Client Host Name',
	'Allow Self-Signed Certificates',
	'OpenAI', // prompt-cache-ai-nodes.md: the AI nodes a Prompt Cache sits around, and their settings
	'Anthropic',
	'Text → Message a Model',
	'System Message',
	'Simplify Output',
	'Output Content as JSON',
	'Resend', // Stripe's dashboard button
	'Charge Card', // guarded-send-examples.md: a node renamed in a worked example
	// Prose that happens to be capitalised words.
	'Claim', // guarded-send.md: the four phases of a batch
	'Mark',
	'Send',
	'Record',
	'Routing', // benchmarks.md: a phase of the gate's run time
]);

/** An emphasised span, and whether a colon follows it ("**Key From**: …"). */
interface Span {
	text: string;
	colon: boolean;
}

/**
 * The paragraphs, list items and table rows of a markdown text (soft-wrapped lines joined, since
 * emphasis may run across them), each with its emphasised spans and where it starts. Code and
 * the generated parameter tables are left out (blanked, so offsets stay), links reduced to their text.
 */
function emphasisBlocks(markdown: string): Array<{ at: number; spans: Span[] }> {
	const blank = (m: string) => m.replace(/[^\n]/g, ' ');
	const prose = markdown
		.replace(/<!-- params:[\s\S]*?<!-- \/params -->/g, blank)
		.replace(/<!--[\s\S]*?-->/g, blank)
		.replace(/^```[\s\S]*?^```/gm, blank)
		.replace(/`[^`\n]*`/g, (m) => '\u0000'.repeat(m.length));
	const blocks: Array<{ at: number; text: string }> = [];
	let at = 0;
	let joinable = false;
	for (const line of prose.split('\n')) {
		const starts = !joinable || /^\s*([-*+]|\d+\.)\s|^\s*[#|>]/.test(line);
		if (line.trim() === '') joinable = false;
		else if (starts) blocks.push({ at, text: line });
		else blocks[blocks.length - 1].text += ` ${line.trim()}`;
		if (line.trim() !== '') joinable = !/^\s*[#|]/.test(line);
		at += line.length + 1;
	}
	return blocks.map(({ at, text }) => {
		const spans: Array<Span & { at: number }> = [];
		const linkless = text.replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1');
		const rest = linkless.replace(/\*\*(?!\s)([^*]+?)(?<!\s)\*\*(:?)/g, (m, span: string, colon: string, i: number) => {
			spans.push({ text: span, colon: colon === ':', at: i });
			return ' '.repeat(m.length);
		});
		for (const m of rest.matchAll(/(?<![*\w\\])\*(?![\s*])([^*]+?)(?<![\s\\])\*(?!\*)(:?)/g)) spans.push({ text: m[1], colon: m[2] === ':', at: m.index });
		return { at, spans: spans.sort((x, y) => x.at - y.at).map(({ text, colon }) => ({ text, colon })) };
	});
}

const emphasis = (markdown: string): string[] => emphasisBlocks(markdown).flatMap((b) => b.spans.map((s) => s.text));

/** Words n8n writes in lower case inside a Title Case name ("Send to Needs Review", "Price per 1,000 Input Tokens"). */
const SMALL_WORDS = new Set(['a', 'an', 'and', 'as', 'at', 'by', 'for', 'from', 'if', 'in', 'is', 'of', 'on', 'or', 'per', 'the', 'to', 'with']);

/**
 * Plainly prose, not a name: no letters, or a number first (10×, 0.71 / 0.63); a sentence or a
 * paragraph's lead-in (ends in . : ? !); a quoted message (its own test checks those); inline
 * code; or a word that Title Case would capitalise written in lower case ("safe to run twice",
 * "not", "once", "Tested with").
 */
function plainlyProse(span: string): boolean {
	if (!/\p{L}/u.test(span) || /[.:?!]$/.test(span) || /["“\u0000]/.test(span)) return true;
	const words = span.split(/[\s→,/()]+/).filter(Boolean);
	if (words.length === 0 || !/^\p{Lu}/u.test(words[0]) || /^\p{Ll}/u.test(words[words.length - 1])) return true;
	return words.some((w) => /^\p{Ll}/u.test(w) && !SMALL_WORDS.has(w));
}

/**
 * A panel name as the docs may shorten it, without the unit or the explanation at its end: "Max
 * Wait" for "Max Wait (Seconds)", "It Was Sent" for "It Was Sent: Record It as Done".
 */
const short = (name: string) => name.replace(/\s*\([^)]*\)$|: .*$/, '');

function nearest(span: string, known: Iterable<string>, n = 3): string {
	const distance = (a: string, b: string) => {
		a = a.toLowerCase();
		b = b.toLowerCase();
		let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
		for (let i = 1; i <= a.length; i++) {
			const row = [i];
			for (let j = 1; j <= b.length; j++) row[j] = Math.min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
			prev = row;
		}
		return prev[b.length];
	};
	return [...known]
		// A name that contains the span ("Step Name" for "Step") first, then by edit distance.
		.map((k) => [k, k.toLowerCase().includes(span.toLowerCase()) ? k.length / 1000 : distance(span, k)] as const)
		.sort((x, y) => x[1] - y[1])
		.slice(0, n)
		.map(([k]) => `"${k}"`)
		.join(', ');
}

describe('names the docs emphasise are names the panel shows', () => {
	const panel = panelNames();
	const byShort = new Map<string, string[]>();
	for (const n of panel.names) byShort.set(short(n), [...(byShort.get(short(n)) ?? []), n]);
	const known = (name: string, among: Set<string> = panel.names) => among.has(name) || (byShort.get(name) ?? []).some((n) => among.has(n));
	const nodeOfPage = new Map(descriptions.map((d) => [docs.findPage(d.name), d.name]));

	test('the panel names include each kind: node, parameter, choice, option, output, credential field', () => {
		for (const n of ['Dedupe Gate', 'Key From', 'Hash of Whole Item', 'Step Name', 'Needs Review', 'Payload Mismatch', 'Stored', 'Reject Unauthorized', 'Idempotency Ledger (Redis) API'])
			expect({ n, known: panel.names.has(n) }).toEqual({ n, known: true });
		for (const p of ['Options → Step Name', 'Key → Release', 'Model Parameters → Temperature', 'When Another Run Is Sending → Wait for It'])
			expect({ p, known: panel.paths.has(p) }).toEqual({ p, known: true });
		expect(panel.byNode.get('guardedSend')?.has('Step')).toBe(false);
	});

	test('the check tells names from prose', () => {
		expect(emphasis('- **Key From**: *Expression* `*x*` and **not** *once*, **Outputs:** 2 * 3 * 4')).toEqual(['Key From', 'Expression', 'not', 'once', 'Outputs:']);
		expect(emphasisBlocks('**A**: *B*: c **D\ne** f\n\n- *G*\n  h').map((b) => b.spans)).toEqual([
			[{ text: 'A', colon: true }, { text: 'B', colon: true }, { text: 'D e', colon: false }],
			[{ text: 'G', colon: false }],
		]);
		expect(['not', 'once', 'Outputs:', 'safe to run twice', 'Tested with', '10×', '0.66 / 0.63 and 0.71 / 0.64', 'The ledger is down.'].filter((s) => !plainlyProse(s))).toEqual([]);
		expect(['Lease', 'Step', 'Send to Needs Review', 'Failed (Retryable)', 'Options → Step', 'Keep Keys For'].filter(plainlyProse)).toEqual([]);
	});

	test.each(markdownFiles().map((f) => [path.relative(root, f), f]))('%s', (rel, file) => {
		const wrong: string[] = [];
		const text = readFileSync(file, 'utf8');
		const node = nodeOfPage.get(file);
		// The section of a node page that holds the generated table: what its lists name is that node's.
		const marker = node ? text.indexOf(docs.START(node)) : -1;
		const section = marker < 0 ? [0, 0] : [text.lastIndexOf('\n## ', marker), (text.indexOf('\n## ', marker) + 1 || text.length + 1) - 1];
		// A worked example's list item that sets up one node ("- Guarded Send: *Channel* = …"), with
		// the items under it: which node, and how far its item is indented.
		let example: { node: string; indent: number } | undefined;
		for (const { at, spans } of emphasisBlocks(text)) {
			const names = spans.filter((s) => !plainlyProse(s.text) && !NOT_PANEL_NAMES.has(s.text));
			const item = /^( *)- (.*)/.exec(text.slice(at, text.indexOf('\n', at) + 1 || undefined));
			if (!item || (example && item[1].length <= example.indent)) example = undefined;
			const setsUp = item && descriptions.find((d) => new RegExp(`^${d.displayName}\\b[^:]{0,30}:`).test(item[2]));
			if (setsUp) example = { node: setsUp.name, indent: item[1].length };
			if (example) {
				const own = panel.byNode.get(example.node)!;
				for (const { text: name } of names)
					if (known(name) && !known(name, own) && name !== descriptions.find((d) => d.name === example!.node)!.displayName)
						wrong.push(`${rel}: "${name}" is set on ${example.node} in an example, which has no such parameter; nearest: ${nearest(name, own)}`);
			}
			for (const { text: span } of names) {
				// "A → B → C": each step of the path leads to the next one.
				const steps = span.split(/\s*→\s*/);
				if (steps.length > 1) {
					for (const p of steps.slice(1).map((b, i) => `${steps[i]} → ${b}`).filter((p) => !panel.paths.has(p)))
						wrong.push(`${rel}: "${span}": the panel has no "${p}"; nearest: ${nearest(p, panel.paths)}`);
					continue;
				}
				// "A, B": each is a name.
				for (const name of known(span) ? [span] : span.split(/,\s+/))
					if (!known(name)) wrong.push(`${rel}: "${name}" is no name in the panel; nearest: ${nearest(name, panel.names)}`);
			}
			// A list item of that section ("- **Step Name**: …") names a parameter of the page's node.
			const lead = names[0];
			if (node && at > section[0] && at < section[1] && lead?.colon && text.slice(at).trimStart().startsWith(`- **${lead.text}**:`)) {
				const own = panel.byNode.get(node)!;
				for (const name of known(lead.text) ? [lead.text] : lead.text.split(/,\s+/))
					if (known(name) && !known(name, own)) wrong.push(`${rel}: "${name}" is no parameter of ${node}; nearest: ${nearest(name, own)}`);
			}
			// "**P**: **A** … **B**": the choices named after an options parameter are its own.
			spans.forEach((p, i) => {
				if (!p.colon) return;
				const choices = new Set([p.text, ...(byShort.get(p.text) ?? [])].flatMap((n) => [...(panel.choices.get(n) ?? [])]));
				if (choices.size === 0) return;
				for (const c of spans.slice(i + 1)) {
					const isChoice = [...panel.choices.values()].some((set) => set.has(c.text));
					if (c.colon && !isChoice) break; // the next parameter
					if (isChoice && !choices.has(c.text)) wrong.push(`${rel}: "${c.text}" is no choice of "${p.text}"; its choices: ${[...choices].map((x) => `"${x}"`).join(', ')}`);
				}
			});
		}
		if (wrong.length) throw new Error(`${wrong.length} emphasised name(s) the panel does not show so:\n${wrong.join('\n')}`);
	});
});
