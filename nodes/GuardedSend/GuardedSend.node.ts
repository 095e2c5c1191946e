// First: refuses, with a clear message, an n8n too old to run the package.
import '../../lib/n8n/supportedN8n';
import {
	NodeConnectionTypes,
	type IExecuteFunctions,
	type INodeExecutionData,
	type INodeType,
	type INodeTypeDescription,
} from 'n8n-workflow';

import { backendProperties, credentialTest, NODE_VERSIONS } from '../../lib/n8n/ledgerAccess';
import { unitKeyNamespaceOption, unitKeyProperties } from '../../lib/n8n/lineage';
import { durationOptions } from '../../lib/n8n/scope';
import { editorTestRunsOption } from '../../lib/n8n/testRuns';
import { emailProperties } from './channels/email';
import { httpCheckOption, httpOptions, httpProperties } from './channels/http';
import { slackProperties } from './channels/slack';
import { executeGuardedSend } from './execute';
import { HOLD_STEP, KEEP_RECORDS } from './options';

export class GuardedSend implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Guarded Send',
		name: 'guardedSend',
		icon: { light: 'file:guardedSend.svg', dark: 'file:guardedSend.dark.svg' },
		group: ['output'],
		version: NODE_VERSIONS,
		subtitle: '={{ {"http": "HTTP request", "slack": "Slack message", "email": "Email"}[$parameter["channel"]] + " (once per key)" }}',
		description: 'Send a Slack message, an email or an HTTP request at most once per key, even when the flow is retried or a run dies halfway',
		defaults: { name: 'Guarded Send' },
		// An agent deciding to send a message or call an API, exactly once, is a real use.
		usableAsTool: true,
		inputs: [NodeConnectionTypes.Main],
		outputs: [NodeConnectionTypes.Main, NodeConnectionTypes.Main, NodeConnectionTypes.Main, NodeConnectionTypes.Main],
		outputNames: ['Sent', 'Skipped', 'Needs Review', 'In Progress'],
		// The ledger's credential (as lib/n8n/ledgerAccess.ts's ledgerCredentials: a spread here
		// crashes an n8n lint rule), then the ones users already have: Slack API, SMTP (and IMAP), and the HTTP
		// Request node's generic types (one entry each: n8n only hands a node the types it lists).
		// Each says when it is NOT needed (`hide`): n8n's editor removes from the panel every
		// parameter that a credential's `show` rule names, which hid Backend and Channel.
		/* eslint-disable @n8n/community-nodes/no-credential-reuse, @n8n/community-nodes/valid-credential-references, n8n-nodes-base/node-class-description-credentials-name-unsuffixed --
		   Deliberate: users expect to pick the Slack, SMTP and HTTP credentials they already have
		   (n8n-nodes-base's own types, resolved by name in self-hosted n8n) rather than re-enter
		   secrets in a copy; "smtp" is n8n's name for its SMTP credential and cannot be renamed. */
		credentials: [
			{
				name: 'idempotencyPostgresApi',
				required: true,
				testedBy: 'idempotencyPostgresApiTest',
				displayOptions: { hide: { backend: ['redis', 'builtin'] } },
			},
			{
				name: 'idempotencyRedisApi',
				required: true,
				testedBy: 'idempotencyRedisApiTest',
				displayOptions: { hide: { backend: ['postgres', 'builtin'] } },
			},
			{
				name: 'idempotencyBuiltinApi',
				required: false,
				testedBy: 'idempotencyBuiltinApiTest',
				displayOptions: { hide: { backend: ['postgres', 'redis'] } },
			},
			{ name: 'slackApi', required: true, displayOptions: { hide: { channel: ['http', 'email'] } } },
			{ name: 'smtp', required: true, displayOptions: { hide: { channel: ['http', 'slack'] } } },
			// Optional: the sender's mailbox, whose Sent folder says whether an email went out when a
			// run died while sending it. Without it such a step goes to Needs Review.
			{ name: 'imap', required: false, displayOptions: { hide: { channel: ['http', 'slack'] } } },
			{
				name: 'httpBasicAuth',
				required: true,
				displayOptions: { hide: { channel: ['slack', 'email'], authentication: ['none'], genericAuthType: ['httpBearerAuth', 'httpCustomAuth', 'httpHeaderAuth', 'httpQueryAuth', 'oAuth1Api', 'oAuth2Api'] } },
			},
			{
				name: 'httpBearerAuth',
				required: true,
				displayOptions: { hide: { channel: ['slack', 'email'], authentication: ['none'], genericAuthType: ['httpBasicAuth', 'httpCustomAuth', 'httpHeaderAuth', 'httpQueryAuth', 'oAuth1Api', 'oAuth2Api'] } },
			},
			{
				name: 'httpCustomAuth',
				required: true,
				displayOptions: { hide: { channel: ['slack', 'email'], authentication: ['none'], genericAuthType: ['httpBasicAuth', 'httpBearerAuth', 'httpHeaderAuth', 'httpQueryAuth', 'oAuth1Api', 'oAuth2Api'] } },
			},
			{
				name: 'httpHeaderAuth',
				required: true,
				displayOptions: { hide: { channel: ['slack', 'email'], authentication: ['none'], genericAuthType: ['httpBasicAuth', 'httpBearerAuth', 'httpCustomAuth', 'httpQueryAuth', 'oAuth1Api', 'oAuth2Api'] } },
			},
			{
				name: 'httpQueryAuth',
				required: true,
				displayOptions: { hide: { channel: ['slack', 'email'], authentication: ['none'], genericAuthType: ['httpBasicAuth', 'httpBearerAuth', 'httpCustomAuth', 'httpHeaderAuth', 'oAuth1Api', 'oAuth2Api'] } },
			},
			{
				name: 'oAuth1Api',
				required: true,
				displayOptions: { hide: { channel: ['slack', 'email'], authentication: ['none'], genericAuthType: ['httpBasicAuth', 'httpBearerAuth', 'httpCustomAuth', 'httpHeaderAuth', 'httpQueryAuth', 'oAuth2Api'] } },
			},
			{
				name: 'oAuth2Api',
				required: true,
				displayOptions: { hide: { channel: ['slack', 'email'], authentication: ['none'], genericAuthType: ['httpBasicAuth', 'httpBearerAuth', 'httpCustomAuth', 'httpHeaderAuth', 'httpQueryAuth', 'oAuth1Api'] } },
			},
		],
		/* eslint-enable @n8n/community-nodes/no-credential-reuse, @n8n/community-nodes/valid-credential-references, n8n-nodes-base/node-class-description-credentials-name-unsuffixed */
		properties: [
			...backendProperties,
			{
				displayName: 'Channel',
				name: 'channel',
				type: 'options',
				noDataExpression: true,
				options: [
					{ name: 'HTTP Request', value: 'http', description: 'Any API (CRM, billing), sent with an Idempotency-Key header' },
					{ name: 'Slack Message', value: 'slack', description: 'Post a message through the Slack Web API' },
					{ name: 'Email (SMTP)', value: 'email', description: 'Send an email through an SMTP server' },
				],
				default: 'http',
			},
			...httpProperties,
			...slackProperties,
			...emailProperties,
			...unitKeyProperties,
			{
				displayName: 'Options',
				name: 'options',
				type: 'collection',
				placeholder: 'Add Option',
				default: {},
				options: [
					{
						displayName: 'Also Complete the Unit of Work',
						name: 'completeUnit',
						type: 'boolean',
						default: false,
						description:
							'Whether a sent (or already sent) item also marks the Dedupe Gate\'s unit of work as done at once, with this send\'s ID and answer for the next delivery\'s Duplicate item. Needed only when the gate waits for Mark Step Done and none follows; by default the gate marks it done when the execution succeeds.',
					},
					{
						displayName: 'Batch Size',
						name: 'batchSize',
						type: 'number',
						typeOptions: { minValue: 1, maxValue: 5000 },
						default: 100,
						description: 'Items claimed, sent and recorded together. Smaller batches leave fewer items uncertain if the run dies.',
					},
					httpCheckOption,
					{
						displayName: 'Checks Before Review',
						name: 'checksBeforeReview',
						type: 'number',
						typeOptions: { minValue: 1, maxValue: 100 },
						default: 5,
						description:
							'When a run died while it may have been sending, the destination is asked whether the message arrived. A check that cannot answer for now (rate limit, timeout, server error) leaves the item on In Progress and the next delivery asks again; after this many such checks the item goes to Needs Review.',
					},
					...durationOptions(HOLD_STEP),
					...httpOptions,
					editorTestRunsOption(false, 'When the key comes from the Dedupe Gate (automatic), the gate\'s own setting applies, so this matters only for a key given as an expression.'),
					...durationOptions(KEEP_RECORDS),
					{
						displayName: 'Initial Backoff (Ms)',
						name: 'initialBackoff',
						type: 'number',
						typeOptions: { minValue: 1, maxValue: 60000 },
						default: 500,
						description: 'Longest wait before the second attempt; it doubles for each further attempt, with random jitter',
					},
					{
						displayName: 'Longest Wait (Seconds)',
						name: 'maxBackoff',
						type: 'number',
						typeOptions: { minValue: 0.01, maxValue: 3600, numberPrecision: 2 },
						default: 30,
						description: 'No single wait is longer. When a destination asks (Retry-After) for a longer wait, the item is left for a later run.',
					},
					{
						displayName: 'Max Attempts',
						name: 'maxAttempts',
						type: 'number',
						typeOptions: { minValue: 1, maxValue: 20 },
						default: 5,
						description: 'Attempts per item in one run, counting the first. After that the item is recorded as "failed, retry later".',
					},
					{
						displayName: 'Max Wait (Seconds)',
						name: 'maxWait',
						type: 'number',
						typeOptions: { minValue: 1, maxValue: 3600 },
						default: 60,
						description:
							'With "When Another Run Is Sending" set to "Wait for It": how long to wait for the other run at most. Items still waiting after that go to In Progress.',
					},
					{
						displayName: 'Sends at Once',
						name: 'concurrency',
						type: 'number',
						typeOptions: { minValue: 1, maxValue: 100 },
						default: 5,
						description: 'Maximum number of requests in flight at the same time',
					},
					unitKeyNamespaceOption,
					{
						displayName: 'Step Name',
						name: 'step',
						type: 'string',
						default: '',
						placeholder: 'e.g. welcomeEmail',
						description:
							'Name of this send in the ledger. Leave it out to use this node\'s name. Two sends for the same key need different names.',
					},
					{
						displayName: 'Timeout (Seconds)',
						name: 'timeout',
						type: 'number',
						typeOptions: { minValue: 1, maxValue: 600 },
						default: 30,
						description: 'How long one attempt may take',
					},
					{
						displayName: 'Total Wait per Item (Seconds)',
						name: 'maxTotalWait',
						type: 'number',
						typeOptions: { minValue: 0, maxValue: 3600 },
						default: 60,
						description: 'All waits between attempts of one item together stay under this',
					},
					{
						displayName: 'When Another Run Is Sending',
						name: 'whenInProgress',
						type: 'options',
						options: [
							{
								name: 'Route to In Progress',
								value: 'review',
								description: 'Do not wait; the item leaves on In Progress, nothing is sent, and the other run finishes the step',
							},
							{ name: 'Wait for It', value: 'wait', description: 'Wait until the other run finishes, then skip the item (or send it, if that run failed)' },
						],
						default: 'review',
						description: 'What to do when another execution is sending this same step right now',
					},
					{
						displayName: 'When the Content Differs',
						name: 'onMismatch',
						type: 'options',
						options: [
							{ name: 'Send to Needs Review', value: 'review', description: 'Do not send; let a person look' },
							{ name: 'Treat as Already Sent', value: 'skip', description: 'Do not send; route to Skipped, marked as a mismatch' },
							{ name: 'Stop With an Error', value: 'error', description: 'Fail the item' },
						],
						default: 'review',
						description: 'What to do when a key that was sent before comes again with a different message. It is never sent.',
					},
				],
			},
		],
	};

	methods = { credentialTest };

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		return await executeGuardedSend.call(this);
	}
}
