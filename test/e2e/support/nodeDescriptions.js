#!/usr/bin/env node
/**
 * Prints, as JSON on stdout, the descriptions of some node types of an installed n8n, read from its
 * own node classes: `node nodeDescriptions.js <n8n project dir> <type> [<type>…]`, types such as
 * n8n-nodes-base.hubspot. The classes are found through n8n-nodes-base's package.json "n8n.nodes"
 * list (the file named after the type, else every file), as n8n itself loads them.
 *
 * Run with the Node that n8n runs on (test/e2e/regionExamples.e2e.test.ts uses ensureRuntime()'s):
 * n8n-nodes-base requires ES modules that jest's module loader cannot read.
 *
 * Output: { "<type>": { "versions": [2, 2.1, 2.2], "byVersion": { "2.2": { name, credentials, properties, outputs } } } },
 * a type n8n does not have is left out.
 */
'use strict';

const fs = require('fs');
const path = require('path');

const [n8nDir, ...types] = process.argv.slice(2);
const base = path.join(n8nDir, 'node_modules', 'n8n-nodes-base');
const files = JSON.parse(fs.readFileSync(path.join(base, 'package.json'), 'utf8')).n8n.nodes;

const found = new Map();
const tried = new Set();
function load(file) {
	if (tried.has(file)) return;
	tried.add(file);
	const mod = require(path.join(base, file));
	const NodeClass = Object.values(mod).find((v) => typeof v === 'function');
	const instance = new NodeClass();
	const type = `n8n-nodes-base.${instance.description.name}`;
	const byVersion = {};
	const keep = (d) => ({ name: d.name, credentials: d.credentials ?? [], properties: d.properties, outputs: Array.isArray(d.outputs) ? d.outputs : null });
	if (instance.nodeVersions) {
		for (const [version, node] of Object.entries(instance.nodeVersions)) byVersion[Number(version)] = keep(node.description);
	} else {
		const versions = Array.isArray(instance.description.version) ? instance.description.version : [instance.description.version];
		for (const version of versions) byVersion[version] = keep(instance.description);
	}
	found.set(type, { versions: Object.keys(byVersion).map(Number), byVersion });
}

for (const type of types) {
	const name = type.replace(/^n8n-nodes-base\./, '').toLowerCase();
	for (const file of files.filter((f) => path.basename(f, '.node.js').toLowerCase() === name)) load(file);
	// Else every file, as n8n does; one that does not load here (an optional dependency) is skipped.
	if (!found.has(type)) {
		for (const file of files) {
			if (found.has(type)) break;
			try {
				load(file);
			} catch {
				// not this one
			}
		}
	}
}

const out = {};
for (const type of types) if (found.has(type)) out[type] = found.get(type);
process.stdout.write(JSON.stringify(out));
