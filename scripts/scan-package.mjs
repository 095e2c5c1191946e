#!/usr/bin/env node
// n8n's community-package scan, run locally on what `npm pack` makes (part of `npm run lint`).
//
// @n8n/scan-community-package (0.32.0) only scans a package that is already on the registry: it
// checks the npm provenance, downloads the attested GitHub source and the tarball, then lints
// both with one ESLint config (its exported buildScanConfig). That config is rebuilt here from
// the same plugins this repo already has, so the scan runs before publishing and offline:
//   - the tarball leg: every .js file and package.json of the packed tarball,
//   - the source leg: package.json and {nodes,credentials}/**/*.{js,ts,json} of this checkout.
// The provenance check is not reproducible before publishing; .github/workflows/publish.yml
// publishes with --provenance, which is what it asks for.
//
// Findings the package keeps on purpose are listed in KEPT with the reason; any other finding fails.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';
import { defineConfig } from 'eslint/config';
import tsParser from '@typescript-eslint/parser';
import { n8nCommunityNodesPlugin } from '@n8n/eslint-plugin-community-nodes';
import n8nNodesBase from 'eslint-plugin-n8n-nodes-base';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * Rule → where the finding may stand and why it stays. The scan runs n8n's Cloud profile (its
 * `recommended` config), stricter than `npm run lint`'s self-hosted profile; docs/development.md
 * ("Publishing") says the same. Anything not matched here fails.
 */
export const KEPT = {
	'@n8n/community-nodes/no-runtime-dependencies': {
		where: /^package\.json$/,
		why:
			'the ledger needs pg, ioredis, nodemailer and imapflow at run time. n8n verifies only packages ' +
			'without runtime dependencies, so this package stays unverified: it installs from ' +
			'Settings → Community Nodes on self-hosted n8n, not on n8n Cloud.',
	},
	'@n8n/community-nodes/no-restricted-imports': {
		where: /^(dist\/)?(lib|nodes)\//,
		why:
			'a Cloud-only rule: the runtime dependencies above, and Node\'s perf_hooks for the timings ' +
			'the nodes report. Self-hosted n8n loads them.',
	},
	'@n8n/community-nodes/no-restricted-globals': {
		where: /^(dist\/)?(lib|nodes)\//,
		why:
			'a Cloud-only rule: Node timers where n8n-workflow\'s sleep does not fit: the lease keeper ' +
			'renews a running step\'s lease on an interval, the idle-client sweeper closes unused ' +
			'connections, and the ledger (which knows nothing about n8n) backs off between retries and ' +
			'starts its background purge off the caller\'s path.',
	},
	'@n8n/community-nodes/no-credential-reuse': {
		where: /^nodes\/GuardedSend\/GuardedSend\.node\.ts$/,
		why:
			'Guarded Send sends through the credentials the user already has in n8n (Slack, SMTP, IMAP, ' +
			'the HTTP Request node\'s auth types), as n8n\'s own HTTP Request node does; copying them into ' +
			'this package would make the user enter every secret twice. n8n verification refuses this.',
	},
	'@n8n/community-nodes/valid-credential-references': {
		where: /^nodes\/GuardedSend\/GuardedSend\.node\.ts$/,
		why: 'the same n8n built-in credentials as no-credential-reuse: they are defined by n8n, not here.',
	},
	'n8n-nodes-base/node-class-description-credentials-name-unsuffixed': {
		where: /^nodes\/GuardedSend\/GuardedSend\.node\.ts$/,
		why: 'n8n\'s built-in SMTP credential is named "smtp"; a suffix would name a credential that does not exist.',
	},
	'@n8n/community-nodes/node-usable-as-tool': {
		where: /^nodes\/(DedupeGate|IdempotencyLedger|MarkStepDone|PromptCache|PromptCacheChatModel|StartStep)\//,
		why:
			'only Guarded Send is offered to AI agents (least privilege; Prompt Cache Chat Model is a ' +
			'sub-node that supplies a model, not an action); the other nodes carry an ' +
			'eslint-disable comment saying so, which the scan does not read (allowInlineConfig: false).',
	},
	'@n8n/community-nodes/require-node-api-error': {
		where: /^nodes\/PromptCacheChatModel\/cachedModel\.ts$/,
		why:
			'Prompt Cache Chat Model passes the connected model\'s own error on unchanged (after noting ' +
			'that nothing was cached): the AI Agent and LLM Chain, and their retry and error handling, ' +
			'know that error; wrapping it would hide what the model provider said.',
	},
	'@n8n/community-nodes/valid-peer-dependencies': {
		where: /^package\.json$/,
		why:
			'n8n-workflow names the versions the e2e matrix proves (test/e2e/support/matrix.js) instead ' +
			'of "*", so npm warns on an untested n8n; it is optional (peerDependenciesMeta) and n8n\'s ' +
			'installer drops peerDependencies, so it never pulls in a second n8n-workflow.',
	},
};

const isKept = (f) => KEPT[f.rule]?.where.test(f.file) ?? false;

/** The config of @n8n/scan-community-package 0.32.0 (scanner/scanner.mjs, buildScanConfig). */
function scanConfig() {
	return defineConfig(
		n8nCommunityNodesPlugin.configs.recommended,
		{ rules: { 'no-console': 'error' } },
		{ plugins: { 'n8n-nodes-base': n8nNodesBase } },
		{ files: ['package.json'], rules: { ...n8nNodesBase.configs.community.rules } },
		{
			files: ['**/credentials/**/*.ts'],
			rules: {
				...n8nNodesBase.configs.credentials.rules,
				'n8n-nodes-base/cred-class-field-documentation-url-miscased': 'off',
				'n8n-nodes-base/cred-class-field-type-options-password-missing': 'off',
			},
		},
		{
			files: ['**/nodes/**/*.ts'],
			rules: {
				...n8nNodesBase.configs.nodes.rules,
				'n8n-nodes-base/node-class-description-inputs-wrong-regular-node': 'off',
				'n8n-nodes-base/node-class-description-outputs-wrong': 'off',
				'n8n-nodes-base/node-param-type-options-max-value-present': 'off',
			},
		},
		{ files: ['**/*.json'], languageOptions: { parser: tsParser } },
		{ files: ['**/*.ts'], languageOptions: { parser: tsParser } },
	);
}

async function lint(cwd, patterns) {
	const eslint = new ESLint({
		cwd,
		allowInlineConfig: false,
		overrideConfigFile: true,
		overrideConfig: scanConfig(),
		ignorePatterns: ['node_modules/**', '**/package-lock.json'],
	});
	const results = await eslint.lintFiles(patterns);
	if (results.length === 0) throw new Error(`the scan found no files to lint in ${cwd}`);
	return results.flatMap((r) =>
		r.messages
			.filter((m) => m.severity === 2)
			.map((m) => ({ file: path.relative(cwd, r.filePath), line: m.line, rule: m.ruleId, message: m.message })),
	);
}

async function main() {
	const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'scan-package-'));
	try {
		// The build that npm pack's `prepare` runs (as npm publish does), then the pack itself; apart so
		// that the build's output stays off the JSON that npm pack prints.
		execFileSync('npm', ['run', 'build', '--silent'], { cwd: root, stdio: ['ignore', 2, 'inherit'] });
		const packed = JSON.parse(
			execFileSync('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', tmp], {
				cwd: root,
				encoding: 'utf8',
				stdio: ['ignore', 'pipe', 'inherit'],
			}),
		)[0];
		const unpacked = path.join(tmp, 'package');
		execFileSync('tar', ['-xzf', path.join(tmp, packed.filename), '-C', tmp]);

		const findings = [
			...(await lint(unpacked, ['**/*.js', 'package.json'])).map((f) => ({ ...f, leg: 'tarball' })),
			...(await lint(root, ['package.json', '{nodes,credentials}/**/*.{js,ts,json}'])).map((f) => ({
				...f,
				leg: 'source',
			})),
		];
		const kept = findings.filter(isKept);
		const failing = findings.filter((f) => !isKept(f));
		for (const rule of new Set(kept.map((f) => f.rule))) {
			const where = kept.filter((f) => f.rule === rule).map((f) => `${f.leg}:${f.file}`);
			const files = [...new Set(where)];
			const shown = files.length > 3 ? `${files.slice(0, 3).join(', ')} and ${files.length - 3} more` : files.join(', ');
			console.log(`kept ${rule} (${shown}): ${KEPT[rule].why}`);
		}
		for (const f of failing) console.error(`${f.leg}:${f.file}:${f.line} ${f.rule}: ${f.message}`);
		console.log(
			`n8n community-package scan of ${packed.filename} (${packed.entryCount} files): ` +
				`${failing.length} finding(s) to fix, ${kept.length} kept on purpose`,
		);
		if (failing.length > 0) process.exitCode = 1;
	} finally {
		fs.rmSync(tmp, { recursive: true, force: true });
	}
}

main().catch((err) => {
	console.error(err);
	process.exitCode = 1;
});
