import type { ICredentialDataDecryptedObject, IDataObject, IDisplayOptions, IExecuteFunctions, IHttpRequestMethods, IHttpRequestOptions, INodeProperties } from 'n8n-workflow';

import { sha256 } from '../../../lib/ledger/fingerprint';
import { LedgerInputError } from '../../../lib/ledger/errors';
import { httpChannel, parseStatusList, statusListsOverlap, type HttpCheckOptions, type HttpCheckRequest, type HttpMessage, type StatusList } from '../../../lib/n8n/channels/http';
import type { HttpCall, HttpReply, HttpTransport } from '../../../lib/n8n/channels/types';
import { parseFieldPath } from '../../../lib/n8n/keySource';
import { onAmbiguousProperty, type ChannelAdapter, type ChannelModule } from './adapter';
import { jsonParam, pairsParam, parseJson, textParam } from '../params';

const show = (extra: NonNullable<IDisplayOptions['show']> = {}) => ({ show: { channel: ['http'], ...extra } });

/** Generic credential types handled like n8n's HTTP Request node ("Generic Credential Type"). */
export const GENERIC_AUTH_TYPES = ['httpBasicAuth', 'httpBearerAuth', 'httpCustomAuth', 'httpHeaderAuth', 'httpQueryAuth', 'oAuth1Api', 'oAuth2Api'];

const pairs = (name: string, displayName: string, showWhen: NonNullable<IDisplayOptions['show']>): INodeProperties => ({
	displayName,
	name,
	type: 'fixedCollection',
	typeOptions: { multipleValues: true },
	placeholder: `Add ${displayName.replace(/s$/, '')}`,
	default: { parameters: [{ name: '', value: '' }] },
	displayOptions: show(showWhen),
	options: [
		{
			name: 'parameters',
			displayName: 'Parameter',
			values: [
				{ displayName: 'Name', name: 'name', type: 'string', default: '' },
				{ displayName: 'Value', name: 'value', type: 'string', default: '' },
			],
		},
	],
});

export const httpProperties: INodeProperties[] = [
	{
		displayName: 'Method',
		name: 'method',
		type: 'options',
		options: ['DELETE', 'PATCH', 'POST', 'PUT'].map((m) => ({ name: m, value: m })),
		default: 'POST',
		description: 'The HTTP method. Only methods that change something need a guard.',
		displayOptions: show(),
	},
	{
		displayName: 'URL',
		name: 'url',
		type: 'string',
		default: '',
		required: true,
		placeholder: 'e.g. https://api.example.com/v1/invoices',
		displayOptions: show(),
	},
	{
		displayName: 'Authentication',
		name: 'authentication',
		type: 'options',
		noDataExpression: true,
		options: [
			{ name: 'None', value: 'none' },
			{ name: 'Generic Credential Type', value: 'genericCredentialType', description: 'Basic, header, bearer, query, custom, OAuth1 or OAuth2' },
		],
		default: 'none',
		displayOptions: show(),
	},
	{
		displayName: 'Generic Auth Type',
		name: 'genericAuthType',
		// A plain choice, not n8n's "credentialsSelect": that one draws its own credential slot
		// under the parameter, next to the slot n8n draws for the same type from the node's
		// credential list (the types must be listed there, or the node may not read them), so the
		// panel showed "Connect to Header Auth" twice under two "Credential" headings.
		type: 'options',
		noDataExpression: true,
		options: [
			{ name: 'Basic Auth', value: 'httpBasicAuth' },
			{ name: 'Bearer Auth', value: 'httpBearerAuth' },
			{ name: 'Custom Auth', value: 'httpCustomAuth' },
			{ name: 'Header Auth', value: 'httpHeaderAuth' },
			{ name: 'OAuth1 API', value: 'oAuth1Api' },
			{ name: 'OAuth2 API', value: 'oAuth2Api' },
			{ name: 'Query Auth', value: 'httpQueryAuth' },
		],
		default: 'httpHeaderAuth',
		description: 'How the API checks who is calling. The credential itself is chosen above.',
		displayOptions: show({ authentication: ['genericCredentialType'] }),
	},
	{
		displayName: 'Send Query Parameters',
		name: 'sendQuery',
		type: 'boolean',
		default: false,
		description: 'Whether the request has query parameters',
		displayOptions: show(),
	},
	pairs('queryParameters', 'Query Parameters', { sendQuery: [true] }),
	{
		displayName: 'Send Headers',
		name: 'sendHeaders',
		type: 'boolean',
		default: false,
		description: 'Whether the request has headers',
		displayOptions: show(),
	},
	pairs('headerParameters', 'Header Parameters', { sendHeaders: [true] }),
	{
		displayName: 'Send Body',
		name: 'sendBody',
		type: 'boolean',
		default: true,
		description: 'Whether the request has a body',
		displayOptions: show(),
	},
	{
		displayName: 'Body Content Type',
		name: 'bodyContentType',
		type: 'options',
		options: [
			{ name: 'JSON', value: 'json' },
			{ name: 'Form URL-Encoded', value: 'form' },
			{ name: 'Raw', value: 'raw' },
		],
		default: 'json',
		displayOptions: show({ sendBody: [true] }),
	},
	{
		displayName: 'JSON Body',
		name: 'jsonBody',
		type: 'json',
		default: '{}',
		description: 'The request body as JSON',
		displayOptions: show({ sendBody: [true], bodyContentType: ['json'] }),
	},
	pairs('bodyParameters', 'Body Parameters', { sendBody: [true], bodyContentType: ['form'] }),
	{
		displayName: 'Content Type',
		name: 'rawContentType',
		type: 'string',
		default: 'text/plain',
		placeholder: 'e.g. text/xml',
		displayOptions: show({ sendBody: [true], bodyContentType: ['raw'] }),
	},
	{
		displayName: 'Body',
		name: 'rawBody',
		type: 'string',
		default: '',
		typeOptions: { rows: 4 },
		displayOptions: show({ sendBody: [true], bodyContentType: ['raw'] }),
	},
	{
		displayName: 'Destination Honours the Key',
		name: 'honoursKey',
		type: 'boolean',
		default: true,
		description: 'Whether the API performs a request only once per idempotency key (Stripe, Adyen, PayPal and many others do). Then a send that may already have happened is safely repeated with the same key.',
		displayOptions: show(),
	},
	onAmbiguousProperty({ channel: ['http'], honoursKey: [false] }),
];

/** HTTP settings under the node's Options, shown for the HTTP channel only. */
export const httpOptions: INodeProperties[] = [
	{
		displayName: 'ID Field in Response',
		name: 'responseIdField',
		type: 'string',
		default: 'id',
		placeholder: 'e.g. data.invoiceId',
		description: 'Field of the JSON response that holds the ID of what was created. It is stored as the external ID. Empty stores none.',
		displayOptions: { show: { '/channel': ['http'] } },
	},
	{
		displayName: 'Idempotency Header',
		name: 'idempotencyHeader',
		type: 'string',
		default: 'Idempotency-Key',
		placeholder: 'e.g. Idempotency-Key',
		description: 'Header that tells the API "this is the same request" on a retry. Its value stays the same on every retry of one send and differs between sends. Leave it empty to send no such header.',
		displayOptions: { show: { '/channel': ['http'] } },
	},
];

/**
 * "Check Before Resending" under the node's Options, for an API that does not honour the key: a
 * GET or HEAD request that asks the API whether an earlier attempt created the thing.
 */
export const httpCheckOption: INodeProperties = {
	displayName: 'Check Before Resending',
	name: 'checkRequest',
	type: 'fixedCollection',
	placeholder: 'Add Check Request',
	default: {},
	description:
		'After a run died while sending, a GET or HEAD request asks the API whether the thing was created: found, it is recorded as sent; not found, it is sent; no answer, or a 408, 425, 429 or 5xx, and the next delivery asks again; any other answer sends the item to Needs Review. It never sends the message.',
	displayOptions: { show: { '/channel': ['http'], '/honoursKey': [false] } },
	options: [
		{
			name: 'request',
			displayName: 'Check Request',
			values: [
				{
					displayName: 'Found When Status Is',
					name: 'foundStatuses',
					type: 'string',
					default: '2xx',
					placeholder: 'e.g. 2xx',
					description: 'Statuses that mean the API has it, separated by commas: 200, 2xx or 200-204',
				},
				{
					displayName: 'Headers',
					name: 'headers',
					type: 'fixedCollection',
					typeOptions: { multipleValues: true },
					placeholder: 'Add Header',
					default: {},
					options: [
						{
							name: 'parameters',
							displayName: 'Header',
							values: [
								{ displayName: 'Name', name: 'name', type: 'string', default: '' },
								{ displayName: 'Value', name: 'value', type: 'string', default: '' },
							],
						},
					],
				},
				{
					displayName: 'ID Field',
					name: 'idField',
					type: 'string',
					default: 'id',
					placeholder: 'e.g. data.contactId',
					description:
						'Field of the JSON answer that holds the ID; it is stored as the external ID. An answer without it counts as "cannot tell". Empty: any "found" status counts as found.',
				},
				{
					displayName: 'Method',
					name: 'method',
					type: 'options',
					noDataExpression: true,
					options: [
						{ name: 'GET', value: 'GET' },
						{ name: 'HEAD', value: 'HEAD' },
					],
					default: 'GET',
					description: 'Only methods that read are offered: a check must never perform the action',
				},
				{
					displayName: 'Not Found When Status Is',
					name: 'notFoundStatuses',
					type: 'string',
					default: '404, 410',
					placeholder: 'e.g. 404, 410',
					description: 'Statuses that mean the API does not have it. Any other status, or no answer, sends the item to Needs Review.',
				},
				{
					displayName: 'URL',
					name: 'url',
					type: 'string',
					default: '',
					required: true,
					placeholder: 'e.g. https://api.example.com/v1/orders/{{ $json.orderId }}/invoice',
					description: 'Where the API shows what the send creates, found by the item\'s data. The request carries the same Idempotency Header as the send.',
				},
			],
		},
	],
};

/** The check request's settings, read once; null when none is set up. */
function readCheckSettings(ctx: IExecuteFunctions): { options: HttpCheckOptions; method: HttpCheckRequest['method'] } | null {
	const raw = ctx.getNodeParameter('options.checkRequest', 0, {}, { rawExpressions: true }) as IDataObject;
	const request = raw?.request as IDataObject | undefined;
	if (!request || typeof request !== 'object') return null;
	const method = String(ctx.getNodeParameter('options.checkRequest.request.method', 0, 'GET'));
	if (method !== 'GET' && method !== 'HEAD') {
		throw new LedgerInputError(`A check request may only use GET or HEAD, not "${method}"`, 'A check must not perform the action. Choose GET (or HEAD) for Check Before Resending.');
	}
	const statuses = (name: string, label: string, fallback: string): StatusList => {
		const text = String(ctx.getNodeParameter(`options.checkRequest.request.${name}`, 0, fallback) ?? '');
		const list = parseStatusList(text);
		if (!list) throw new LedgerInputError(`"${label}" (${text}) is not a list of HTTP statuses`, 'Use statuses separated by commas, such as 404, 410, a class such as 2xx, or a range such as 200-204.');
		return list;
	};
	const found = statuses('foundStatuses', 'Found When Status Is', '2xx');
	const notFound = statuses('notFoundStatuses', 'Not Found When Status Is', '404, 410');
	if (found.ranges.length === 0) throw new LedgerInputError('"Found When Status Is" is empty', 'Give the statuses that mean the API has it, such as 2xx.');
	if (statusListsOverlap(found, notFound)) {
		throw new LedgerInputError(`"Found When Status Is" (${found.text}) and "Not Found When Status Is" (${notFound.text}) share a status`, 'A status can mean only one of the two.');
	}
	const idField = String(ctx.getNodeParameter('options.checkRequest.request.idField', 0, 'id') ?? '').trim();
	return { method, options: { found, notFound, idPath: idField ? parseFieldPath(idField, 'ID field of the check request') : null } };
}

/** The JSON of a Custom Auth credential ({ headers, qs, body }); a configuration error if it is not an object. */
function customAuth(data: ICredentialDataDecryptedObject): IDataObject {
	const parsed = parseJson(String(data.json ?? '{}'));
	if (!parsed.ok || !parsed.value || typeof parsed.value !== 'object' || Array.isArray(parsed.value)) {
		throw new LedgerInputError(
			`The Custom Auth credential is not a JSON object${parsed.ok ? '' : `: ${parsed.problem}`}`,
			'Open the credential and fix its JSON, e.g. {"headers": {"X-Api-Key": "..."}}. Nothing was sent.',
		);
	}
	return parsed.value as IDataObject;
}

function applyAuth(type: string, data: ICredentialDataDecryptedObject, options: IHttpRequestOptions): void {
	const headers = (options.headers ??= {}) as IDataObject;
	switch (type) {
		case 'httpBasicAuth':
			options.auth = { username: String(data.user ?? ''), password: String(data.password ?? '') };
			return;
		case 'httpBearerAuth':
			headers.Authorization = `Bearer ${String(data.token ?? '')}`;
			return;
		case 'httpHeaderAuth':
			headers[String(data.name ?? '')] = String(data.value ?? '');
			return;
		case 'httpQueryAuth':
			options.qs = { ...(options.qs ?? {}), [String(data.name ?? '')]: String(data.value ?? '') };
			return;
		case 'httpCustomAuth': {
			const custom = customAuth(data);
			if (custom.headers) Object.assign(headers, custom.headers);
			if (custom.qs) options.qs = { ...(options.qs ?? {}), ...(custom.qs as IDataObject) };
			if (custom.body && options.body && typeof options.body === 'object' && !(options.body instanceof URLSearchParams)) {
				options.body = { ...(options.body as IDataObject), ...(custom.body as IDataObject) };
			}
			return;
		}
	}
}

/** Requests through n8n's own helpers (proxy settings, OAuth token refresh), never throwing on a status. */
export function n8nTransport(ctx: IExecuteFunctions, authType: string | null, credential: ICredentialDataDecryptedObject | null): HttpTransport {
	const viaHelper = authType !== null && credential === null;
	return async (call: HttpCall): Promise<HttpReply> => {
		const options: IHttpRequestOptions = {
			method: call.method as IHttpRequestMethods,
			url: call.url,
			headers: { ...call.headers },
			qs: call.qs && Object.keys(call.qs).length > 0 ? { ...call.qs } : undefined,
			body: call.body as IHttpRequestOptions['body'],
			timeout: call.timeoutMs,
			returnFullResponse: true,
			ignoreHttpStatusErrors: true,
			json: typeof call.body === 'object' && call.body !== null && !(call.body instanceof URLSearchParams),
		};
		if (authType && credential) applyAuth(authType, credential, options);
		const res = (viaHelper
			? await ctx.helpers.httpRequestWithAuthentication.call(ctx, authType, options)
			: await ctx.helpers.httpRequest(options)) as { statusCode: number; headers: Record<string, unknown>; body: unknown };
		return { status: res.statusCode, headers: res.headers ?? {}, body: res.body };
	};
}

/**
 * The value of the Idempotency-Key header for one send. It is the same for every attempt and every
 * run that takes the step over after a crash (the row's first-seen time is kept across takeovers),
 * so the destination can drop a repeat; a step an operator released as "not sent", one whose
 * retention ran out, or one whose row the ledger lost (Redis eviction, a restart without
 * persistence) starts a new row with a new first-seen time, and so gets a new key: a deliberate
 * replay reaches the destination as a new request, and so does a send the ledger forgot.
 */
export const idempotencyKeyFor = (namespace: string, key: string, step: string, firstSeenAt: Date) =>
	sha256(`${namespace}\u0000${key}\u0000${step}\u0000${firstSeenAt.getTime()}`);

export const httpModule: ChannelModule = {
	properties: httpProperties,
	async open(ctx, settings) {
		const authentication = ctx.getNodeParameter('authentication', 0) as string;
		let authType: string | null = null;
		let credential: ICredentialDataDecryptedObject | null = null;
		if (authentication === 'genericCredentialType') {
			authType = ctx.getNodeParameter('genericAuthType', 0) as string;
			if (!GENERIC_AUTH_TYPES.includes(authType)) {
				throw new LedgerInputError(`The credential type "${authType}" is not supported here`, `Use one of: ${GENERIC_AUTH_TYPES.join(', ')}.`);
			}
			// OAuth goes through n8n's helper (token refresh); the others are applied here, as the HTTP Request node does.
			if (!authType.startsWith('oAuth')) credential = (await ctx.getCredentials(authType)) as ICredentialDataDecryptedObject;
			// Checked here, once, before anything is claimed: inside a send it would read as "may have been sent".
			if (authType === 'httpCustomAuth' && credential) customAuth(credential);
		} else if (authentication !== 'none') {
			throw new LedgerInputError(`Unknown authentication "${authentication}"`);
		}
		const header = String(ctx.getNodeParameter('options.idempotencyHeader', 0, 'Idempotency-Key') ?? '').trim();
		if (header && !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(header)) {
			throw new LedgerInputError(`"${header}" is not a valid header name`, 'Use letters, digits and dashes, e.g. Idempotency-Key.');
		}
		const honoursKey = ctx.getNodeParameter('honoursKey', 0, true) === true;
		const idField = String(ctx.getNodeParameter('options.responseIdField', 0, 'id') ?? '').trim();
		// The check is for an API that does not honour the key: one that does is asked again with the same key.
		const check = honoursKey ? null : readCheckSettings(ctx);
		const channel = httpChannel({
			transport: n8nTransport(ctx, authType, credential),
			idempotencyHeader: header || null,
			honoursKey,
			timeoutMs: settings.timeoutMs,
			idPath: idField ? parseFieldPath(idField, 'ID field in response') : null,
			check: check?.options ?? null,
		});
		const method = ctx.getNodeParameter('method', 0) as string;
		const url = textParam(ctx, 'url', 'The URL', true);
		const sendQuery = ctx.getNodeParameter('sendQuery', 0, false) === true;
		const sendHeaders = ctx.getNodeParameter('sendHeaders', 0, false) === true;
		const sendBody = ctx.getNodeParameter('sendBody', 0, false) === true;
		const query = sendQuery ? pairsParam(ctx, 'queryParameters', 'query parameter') : null;
		const headers = sendHeaders ? pairsParam(ctx, 'headerParameters', 'header') : null;
		const contentType = sendBody ? (ctx.getNodeParameter('bodyContentType', 0) as string) : null;
		const jsonBody = contentType === 'json' ? jsonParam(ctx, 'jsonBody', 'The JSON body') : null;
		const formBody = contentType === 'form' ? pairsParam(ctx, 'bodyParameters', 'body parameter') : null;
		const rawBody = contentType === 'raw' ? textParam(ctx, 'rawBody', 'The body', false) : null;
		const rawType = contentType === 'raw' ? String(ctx.getNodeParameter('rawContentType', 0, 'text/plain')) : null;
		const checkUrl = check ? textParam(ctx, 'options.checkRequest.request.url', 'The check URL', true) : null;
		const checkHeaders = check ? pairsParam(ctx, 'options.checkRequest.request.headers', 'check header') : null;
		const adapter: ChannelAdapter<HttpMessage> = {
			channel,
			acceptUncertain: !honoursKey && ctx.getNodeParameter('onAmbiguous', 0, 'review') === 'send',
			build(i, item, row) {
				const target = url(i, item);
				if (!/^https?:\/\/[^\s/]+/i.test(target)) {
					throw new LedgerInputError(`The URL "${target.slice(0, 200)}" is not an http(s) address`, 'Use a full address such as https://api.example.com/v1/orders.');
				}
				// The key is set for the claim the message is sent under (forClaim).
				const message: HttpMessage = { method, url: target, headers: headers ? headers(i, item) : {}, idempotencyKey: '' };
				if (query) message.qs = query(i, item);
				if (jsonBody) {
					const body = jsonBody(i, item);
					if (body !== undefined) message.body = body;
				} else if (formBody) {
					message.body = new URLSearchParams(formBody(i, item)).toString();
					message.headers['Content-Type'] = 'application/x-www-form-urlencoded';
				} else if (rawBody) {
					message.body = rawBody(i, item);
					message.headers['Content-Type'] = rawType || 'text/plain';
				}
				if (check && checkUrl && checkHeaders) {
					const checkTarget = checkUrl(i, item).trim();
					if (!/^https?:\/\/[^\s/]+/i.test(checkTarget)) {
						throw new LedgerInputError(`The check URL "${checkTarget.slice(0, 200)}" is not an http(s) address`, 'Use a full address such as https://api.example.com/v1/orders/{{ $json.orderId }}.');
					}
					message.check = { method: check.method, url: checkTarget, headers: checkHeaders(i, item) };
				}
				return message;
			},
			forClaim: (message, claim) => ({ ...message, idempotencyKey: idempotencyKeyFor(claim.namespace, claim.key, claim.step, claim.firstSeenAt) }),
			// The check request is how to look, not what is sent: a change to it is not a different message.
			payload: ({ idempotencyKey: _key, check: _check, ...content }) => ({ kind: 'http', message: content }),
			describe: (m) => (header ? { idempotencyHeader: header, idempotencyKey: m.idempotencyKey } : {}),
		};
		return adapter as ChannelAdapter;
	},
};
