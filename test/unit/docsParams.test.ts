/**
 * The docs stay true to the code:
 * - each node's reference page (docs/nodes/*.md) carries the parameter table that
 *   scripts/docs-params.js renders from the node's description (here: from the TypeScript
 *   source, so a parameter change that was not regenerated fails);
 * - every relative link and image in README.md and docs/**\/*.md points at a file that exists, and
 *   a #fragment on a link to a markdown file names one of its headings (GitHub's anchors).
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'fs';
import path from 'path';

import type { INodeType, INodeTypeDescription } from 'n8n-workflow';

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
	test('package.json lists the five nodes', () => {
		expect(descriptions.map((d) => d.name).sort()).toEqual(['dedupeGate', 'guardedSend', 'idempotencyLedger', 'markStepDone', 'promptCache']);
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
		const { REASONS } = require(path.join(root, 'nodes/GuardedSend/reasons')) as { REASONS: readonly string[] };
		const page = readFileSync(path.join(root, 'docs/nodes/guarded-send.md'), 'utf8');
		const section = page.slice(page.indexOf('`reason` on **Skipped**'), page.indexOf('**In Progress** (the fourth output)'));
		const rows = [...section.matchAll(/^\| `([a-z_]+)` \|/gm)].map((m) => m[1]);
		expect([...new Set(rows)].sort()).toEqual(REASONS.filter((r) => r !== 'in_progress').sort());
		expect(page).toContain('`reason` are `in_progress`');
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
