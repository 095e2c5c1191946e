#!/usr/bin/env node
/**
 * Writes each node's parameter table into its reference page, from the node's own description,
 * so the docs cannot drift from the panel (`npm run docs:params`, after `npm run build`).
 *
 * The nodes are the ones package.json's "n8n" section lists. A page holds a table between
 * `<!-- params:<nodeName> -->` and `<!-- /params -->`; the page is the file under docs/nodes/ that
 * has that marker. Nothing here names a parameter: rows, defaults, choices and "shown when" all come
 * from the description. test/unit/docsParams.test.ts renders the same tables from the TypeScript
 * sources and fails when a page differs.
 */
'use strict';

const fs = require('fs');
const path = require('path');

const root = path.join(__dirname, '..');
const pagesDir = path.join(root, 'docs', 'nodes');

/** The node files package.json's "n8n" section lists, relative to the root (dist/…js). */
function nodeFiles() {
	const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
	return pkg.n8n.nodes;
}

/** Each node's description, read from dist/ (built by `npm run build`). */
function loadDescriptions() {
	return nodeFiles().map((file) => {
		const abs = path.join(root, file);
		if (!fs.existsSync(abs)) throw new Error(`${file} is missing: run npm run build first`);
		const mod = require(abs);
		const Node = Object.values(mod).find((v) => typeof v === 'function');
		return new Node().description;
	});
}

// ---------------------------------------------------------------------------------------------
// Rendering

const cell = (text) =>
	String(text)
		.replace(/\r?\n/g, ' ')
		.replace(/\|/g, '\\|')
		.replace(/\s+/g, ' ')
		.trim();

/** Inline code that survives backticks inside the value. */
const code = (text) => {
	const s = String(text);
	const fence = s.includes('`') ? '``' : '`';
	const pad = s.startsWith('`') || s.endsWith('`') ? ' ' : '';
	return `${fence}${pad}${s}${pad}${fence}`;
};

/** Strips n8n's "=" expression prefix for display. */
const shownValue = (value) => (typeof value === 'string' && value.startsWith('=') ? value.slice(1) : value);

function renderDefault(prop) {
	const value = prop.default;
	if (prop.type === 'options' && Array.isArray(prop.options)) {
		const choice = prop.options.find((o) => o.value === value);
		if (choice) return choice.name;
	}
	if (prop.type === 'multiOptions' && Array.isArray(value)) {
		if (value.length === 0) return '*(none)*';
		return value.map((v) => (prop.options || []).find((o) => o.value === v)?.name ?? code(v)).join(', ');
	}
	if (typeof value === 'boolean') return value ? 'on' : 'off';
	if (typeof value === 'number') return String(value);
	if (value === undefined || value === null || value === '') return '*(empty)*';
	if (typeof value === 'object') return Object.keys(value).length === 0 ? '*(none)*' : code(JSON.stringify(value));
	return code(shownValue(value));
}

/**
 * Every property the description defines under a name, with the path to it, so "shown when"
 * can name the parameter and the choice the way the panel does.
 */
function indexProperties(properties) {
	const byName = new Map();
	const add = (prop) => {
		if (!byName.has(prop.name)) byName.set(prop.name, []);
		byName.get(prop.name).push(prop);
	};
	for (const prop of properties) {
		add(prop);
		if (prop.type === 'collection' && Array.isArray(prop.options)) for (const sub of prop.options) add(sub);
	}
	return byName;
}

function valueName(candidates, value) {
	for (const prop of candidates) {
		const choice = (prop.options || []).find((o) => o.value === value);
		if (choice && choice.name !== undefined) return choice.name;
	}
	const type = candidates[0]?.type;
	if (type === 'boolean' && typeof value === 'boolean') return value ? 'on' : 'off';
	return code(typeof value === 'string' ? value : JSON.stringify(value));
}

function describeValues(candidates, values) {
	const names = values.map((v) => {
		if (v && typeof v === 'object' && v._cnd) {
			const [op, arg] = Object.entries(v._cnd)[0];
			return `${op} ${JSON.stringify(arg)}`;
		}
		return valueName(candidates, v);
	});
	if (names.length <= 1) return names.join('');
	return `${names.slice(0, -1).join(', ')} or ${names[names.length - 1]}`;
}

/** `{ show: { mode: ['lease'] }, hide: { … } }` in words, e.g. "Mark Keys Done is Only Newer Versions". */
function describeConditions(displayOptionsList, byName) {
	const parts = [];
	for (const displayOptions of displayOptionsList) {
		if (!displayOptions) continue;
		for (const [kind, conditions] of Object.entries(displayOptions)) {
			for (const [rawName, values] of Object.entries(conditions || {})) {
				const name = rawName.replace(/^\//, '');
				const list = Array.isArray(values) ? values : [values];
				if (name === '@version') {
					parts.push(`node version ${kind === 'hide' ? 'is not ' : ''}${describeValues([], list)}`);
					continue;
				}
				const candidates = byName.get(name) || [];
				const label = candidates[0]?.displayName ?? name;
				const verb = kind === 'hide' ? 'is not' : 'is';
				parts.push(`${label} ${verb} ${describeValues(candidates, list)}`);
			}
		}
	}
	return parts.length ? parts.join('; ') : 'always';
}

function describeProperty(prop) {
	const text = [];
	if (prop.description) text.push(prop.description);
	else if (prop.hint) text.push(prop.hint);
	if ((prop.type === 'options' || prop.type === 'multiOptions') && Array.isArray(prop.options)) {
		const choices = prop.options
			.filter((o) => o.name !== undefined)
			.map((o) => (o.description ? `**${o.name}**: ${o.description}` : `**${o.name}**`));
		if (choices.length) text.push(`Choices: ${choices.join(' · ')}`);
	}
	if (prop.type === 'fixedCollection' && Array.isArray(prop.options)) {
		const fields = prop.options.flatMap((group) => (group.values || []).map((v) => v.displayName));
		if (fields.length) text.push(`Each entry has ${fields.join(', ')}.`);
	}
	if (prop.required) text.push('Required.');
	const joined = text
		.map((t) => cell(t))
		.map((t, i, all) => (i < all.length - 1 && !/[.!?:)]$/.test(t) ? `${t}.` : t))
		.join(' ');
	return joined || ' ';
}

const skipped = (prop) => prop.type === 'notice' || prop.type === 'hidden' || prop.type === 'callout';

/**
 * The table for one node: its top-level parameters in panel order, then the entries of each
 * collection (Options first), named "<Collection> → <Entry>".
 */
function renderTable(description) {
	const properties = description.properties || [];
	const byName = indexProperties(properties);
	const rows = [];
	const row = (name, prop, displayOptionsList) =>
		rows.push(`| ${cell(name)} | ${cell(renderDefault(prop))} | ${cell(describeConditions(displayOptionsList, byName))} | ${describeProperty(prop)} |`);

	const collections = [];
	for (const prop of properties) {
		if (skipped(prop)) continue;
		if (prop.type === 'collection') {
			collections.push(prop);
			continue;
		}
		row(prop.displayName, prop, [prop.displayOptions]);
	}
	collections.sort((a, b) => (a.name === 'options' ? 0 : 1) - (b.name === 'options' ? 0 : 1));
	for (const collection of collections) {
		for (const entry of collection.options || []) {
			if (skipped(entry)) continue;
			row(`${collection.displayName} → ${entry.displayName}`, entry, [collection.displayOptions, entry.displayOptions]);
		}
	}
	return [
		'| parameter | default | shown when | description |',
		'|---|---|---|---|',
		...rows,
	].join('\n');
}

// ---------------------------------------------------------------------------------------------
// Pages

const START = (nodeName) => `<!-- params:${nodeName} -->`;
const END = '<!-- /params -->';

function generatedBlock(nodeName, table) {
	return `${START(nodeName)}\n<!-- Generated by npm run docs:params from the node's description; do not edit by hand. -->\n\n${table}\n\n${END}`;
}

/** The page under docs/nodes/ that holds the node's marker, or null. */
function findPage(nodeName) {
	if (!fs.existsSync(pagesDir)) return null;
	for (const file of fs.readdirSync(pagesDir).filter((f) => f.endsWith('.md')).sort()) {
		const abs = path.join(pagesDir, file);
		if (fs.readFileSync(abs, 'utf8').includes(START(nodeName))) return abs;
	}
	return null;
}

/** The page's text with the block for nodeName replaced; throws when the markers are missing. */
function replaceBlock(text, nodeName, table) {
	const start = text.indexOf(START(nodeName));
	const end = text.indexOf(END, start);
	if (start < 0 || end < 0) throw new Error(`no ${START(nodeName)} … ${END} markers`);
	return text.slice(0, start) + generatedBlock(nodeName, table) + text.slice(end + END.length);
}

/** The block currently in the page, or null. */
function currentBlock(text, nodeName) {
	const start = text.indexOf(START(nodeName));
	const end = text.indexOf(END, start);
	if (start < 0 || end < 0) return null;
	return text.slice(start, end + END.length);
}

function main() {
	let failed = false;
	for (const description of loadDescriptions()) {
		const page = findPage(description.name);
		if (!page) {
			console.error(`${description.name}: no page under docs/nodes/ has the marker ${START(description.name)}`);
			failed = true;
			continue;
		}
		const before = fs.readFileSync(page, 'utf8');
		const after = replaceBlock(before, description.name, renderTable(description));
		if (after !== before) fs.writeFileSync(page, after);
		console.log(`${path.relative(root, page)}: ${after === before ? 'up to date' : 'updated'}`);
	}
	if (failed) process.exitCode = 1;
}

module.exports = { renderTable, generatedBlock, replaceBlock, currentBlock, findPage, nodeFiles, START, END };

if (require.main === module) main();
