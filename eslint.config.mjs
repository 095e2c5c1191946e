// n8n's community-node rules, self-hosted profile ("without n8n Cloud support").
import { n8nCommunityNodesPlugin } from '@n8n/eslint-plugin-community-nodes';
import n8nNodesBase from 'eslint-plugin-n8n-nodes-base';
import tseslint from 'typescript-eslint';

const selfHosted = n8nCommunityNodesPlugin.configs.recommendedWithoutN8nCloudSupport;

export default [
	{ ignores: ['dist/**', 'node_modules/**', 'test/**', 'bench/**', 'scripts/**', 'examples/**', 'docs/**', '.tmp/**', '*.js', '*.mjs'] },
	{
		// lib/ledger knows nothing about n8n, so the n8n rules stop at the glue in lib/n8n.
		files: ['nodes/**/*.ts', 'credentials/**/*.ts', 'lib/n8n/**/*.ts'],
		languageOptions: { parser: tseslint.parser, parserOptions: { sourceType: 'module' } },
		...selfHosted,
		rules: {
			...selfHosted.rules,
			// This package needs pg, ioredis, nodemailer and imapflow at run time, so it is for self-hosted n8n
			// only; that is exactly what this rule exists to flag.
			'@n8n/community-nodes/no-runtime-dependencies': 'off',
		},
	},
	{
		files: ['package.json'],
		languageOptions: { parser: tseslint.parser },
		...selfHosted,
		rules: {
			...selfHosted.rules,
			// Same reason as above: runtime dependencies are deliberate (self-hosted only).
			'@n8n/community-nodes/no-runtime-dependencies': 'off',
			// This rule wants `"n8n-workflow": "*"`. The range names the n8n-workflow lines the e2e
			// matrix proves (test/e2e/support/matrix.js; a unit test holds it to them), so npm warns
			// whoever installs on an untested n8n. n8n's own installer drops peerDependencies, and the
			// peer is optional (peerDependenciesMeta), so the range never pulls in a second n8n-workflow.
			// n8n's verification of community packages requires "*": set it back before applying.
			'@n8n/community-nodes/valid-peer-dependencies': 'off',
		},
	},
	{
		files: ['nodes/**/*.ts'],
		languageOptions: { parser: tseslint.parser },
		plugins: { 'n8n-nodes-base': n8nNodesBase },
		rules: {
			...n8nNodesBase.configs.nodes.rules,
			// Contradicts @n8n/community-nodes/node-connection-type-literal (above), the newer rule,
			// which asks for NodeConnectionTypes.Main instead of the string 'main'.
			'n8n-nodes-base/node-class-description-inputs-wrong-regular-node': 'off',
			'n8n-nodes-base/node-class-description-outputs-wrong': 'off',
		},
	},
	{
		files: ['credentials/**/*.ts'],
		languageOptions: { parser: tseslint.parser },
		plugins: { 'n8n-nodes-base': n8nNodesBase },
		rules: {
			...n8nNodesBase.configs.credentials.rules,
			// By its own description "only applicable to nodes in the main repository": it wants a
			// docs.n8n.io slug; a community credential links a full URL, which
			// @n8n/community-nodes/credential-documentation-url validates instead.
			'n8n-nodes-base/cred-class-field-documentation-url-miscased': 'off',
		},
	},
	{
		files: ['package.json'],
		languageOptions: { parser: tseslint.parser },
		plugins: { 'n8n-nodes-base': n8nNodesBase },
		rules: { ...n8nNodesBase.configs.community.rules },
	},
];
