/**
 * Guarded Send's email channel through n8n-core's real engine, when a run died after marking a
 * step `sending` and the next run takes it over: with the optional IMAP credential, the sender's
 * Sent folder (a real Dovecot) says whether the email went out. Found: recorded as sent and
 * Skipped (`recovered`); not found: sent; cannot tell: Needs Review with the evidence. Without the
 * credential: Needs Review, as before. The SMTP stand-in files what it accepts in that Sent folder,
 * as Gmail and Microsoft 365 do.
 */
import type { ICredentialDataDecryptedObject, INodeParameters } from 'n8n-workflow';

import { messageIdFor } from '../../lib/n8n/channels/smtp';
import { postgresBackend, useEngineLedger } from '../support/engineBackends';
import { smtpServer, type SmtpTestServer } from '../support/destinations';
import { chain, node, runWorkflow, type EngineRunResult } from '../support/engine';
import { describeIfDovecot, imapServer, type ImapTestServer } from '../support/imapServer';
import { tcpServer } from '../support/tcpServer';
import { nodeTypes } from '../integration/fixtures/guarded-workflow';

const DAY = 86_400_000;
const FROM = 'Shop <orders@shop.example.com>';
const orders = (...ids: string[]) => JSON.stringify(ids.map((id) => ({ id, email: `${id}@customers.example.com` })));
const byKey = { keyFrom: 'expression', keyExpression: '={{ $json.id }}' };
const facts = (r: EngineRunResult, output: number) => (r.outputs('Send')[output] ?? []).map((i) => i.json.idempotency as Record<string, unknown>);

describeIfDovecot('Guarded Send email with the Sent folder check')('engine: Guarded Send email, the Sent folder check after a crash mid-send', () => {
	const fx = useEngineLedger(postgresBackend);
	let imap: ImapTestServer;
	let smtp: SmtpTestServer;
	let wf: string;
	let n = 0;

	beforeAll(async () => {
		imap = await imapServer();
		smtp = await smtpServer({ sentFolder: imap });
	});
	afterAll(async () => {
		await smtp?.close();
		await imap?.close();
	});
	beforeEach(() => {
		wf = `wf-mailcheck-${++n}-${Date.now()}`;
	});

	const ns = () => `workflow:${wf}`;
	const emailSend = (extra: INodeParameters = {}): INodeParameters => ({
		channel: 'email',
		...byKey,
		fromEmail: FROM,
		toEmail: '={{ $json.email }}',
		subject: '=Your order {{ $json.id }}',
		emailFormat: 'text',
		emailText: '=Thank you for order {{ $json.id }}',
		...extra,
	});
	const credentials = (imapCredential: ICredentialDataDecryptedObject | null = imap.credential): Record<string, ICredentialDataDecryptedObject> => ({
		...fx.credentials,
		smtp: smtp.credential,
		...(imapCredential ? { imap: imapCredential } : {}),
	});
	const run = (items: string, creds = credentials(), parameters = emailSend()) =>
		runWorkflow(
			{ id: wf, nodes: [node('Orders', 'test.items', { items }), node('Send', 'n8n-nodes-idempotency.guardedSend', parameters)], connections: chain('Orders', 'Send') },
			{ credentials: creds, nodeTypes },
		);
	const mailsFor = (id: string) => smtp.mails.filter((m) => m.subject === `Your order ${id}`);

	/**
	 * A run that claimed these keys, marked them `sending` and died; its lease has run out. With
	 * `delivered`, it got as far as handing each email to the SMTP server (which filed it in Sent).
	 */
	async function diedWhileSending(ids: string[], delivered: boolean) {
		const claimed = await fx.ledger.claim(
			ids.map((key) => ({ namespace: ns(), key, step: 'Send', fingerprint: null })),
			{ mode: 'lease', holder: 'execution:dead', leaseMs: 300, ttlMs: DAY },
		);
		const rows = claimed.map((c) => (c.kind === 'claimed' ? c.record : null)!);
		await fx.ledger.markPhase(rows.map((row) => ({ namespace: ns(), key: row.key, step: 'Send', fence: row.fence! })), 'sending');
		const messageIds = rows.map((row) => messageIdFor(ns(), row.key, 'Send', row.firstSeenAt, FROM));
		if (delivered) {
			for (const [i, id] of ids.entries()) {
				await imap.append(
					[`From: ${FROM}`, `To: ${id}@customers.example.com`, `Subject: Your order ${id}`, `Message-ID: ${messageIds[i]}`, '', `Thank you for order ${id}`, ''].join('\r\n'),
				);
			}
		}
		await new Promise((r) => setTimeout(r, 500));
		return messageIds;
	}

	test('delivered before the crash: found in the Sent folder, recorded as sent, Skipped with recovered; nothing is sent again', async () => {
		const [messageId] = await diedWhileSending(['m-1'], true);
		const r = await run(orders('m-1'));
		expect(r.error).toBeUndefined();
		expect(facts(r, 0)).toEqual([]);
		expect(facts(r, 2)).toEqual([]);
		const [skipped] = facts(r, 1);
		expect(skipped).toMatchObject({ outcome: 'skipped', reason: 'already_sent', recovered: true, externalId: messageId, messageId });
		expect(skipped.check).toMatchObject({ outcome: 'found', detail: expect.stringMatching(/^The Sent folder "Sent" of mailer has this email \(Message-ID /) });
		expect(mailsFor('m-1')).toHaveLength(0);
		const [row] = await fx.ledger.get(ns(), 'm-1');
		expect(row).toMatchObject({ status: 'completed', externalId: messageId });
		expect(row.result).toMatchObject({ recovered: true, check: { outcome: 'found' }, response: { folder: 'Sent', messageId } });
		// And from then on an ordinary Skipped.
		const again = await run(orders('m-1'));
		expect(facts(again, 1)).toEqual([expect.objectContaining({ reason: 'already_sent', externalId: messageId })]);
		expect(mailsFor('m-1')).toHaveLength(0);
	});

	test('not delivered before the crash: not in the Sent folder, so it is sent, once, with the same Message-ID', async () => {
		const [messageId] = await diedWhileSending(['m-2'], false);
		const r = await run(orders('m-2'));
		expect(r.error).toBeUndefined();
		const [sent] = facts(r, 0);
		expect(sent).toMatchObject({ outcome: 'sent', resent: true, messageId, externalId: messageId, check: { outcome: 'not_found' } });
		expect(mailsFor('m-2').map((m) => m.messageId)).toEqual([messageId]);
		expect((await imap.sentMessages()).filter((m) => m.messageId === messageId)).toHaveLength(1);
		expect((await fx.ledger.get(ns(), 'm-2'))[0]).toMatchObject({ status: 'completed', result: { check: { outcome: 'not_found' } } });
	});

	test('without an IMAP credential: Needs Review (ambiguous), no check, nothing sent, as before', async () => {
		await diedWhileSending(['m-3'], true);
		const r = await run(orders('m-3'), credentials(null));
		const [review] = facts(r, 2);
		expect(review).toMatchObject({ outcome: 'needs_review', reason: 'ambiguous' });
		expect(review.check).toBeUndefined();
		expect(mailsFor('m-3')).toHaveLength(0);
		expect((await fx.ledger.get(ns(), 'm-3'))[0].status).toBe('needs_review');
	});

	test('a fresh claim never asks the Sent folder; every email carries the claim\'s Message-ID, and a step released as "not sent" gets a new one', async () => {
		const first = await run(orders('m-4'));
		const [sent] = facts(first, 0);
		expect(sent.check).toBeUndefined();
		const [row] = await fx.ledger.get(ns(), 'm-4');
		const firstId = messageIdFor(ns(), 'm-4', 'Send', row.firstSeenAt, FROM);
		expect(sent).toMatchObject({ outcome: 'sent', resent: false, messageId: firstId });
		expect(firstId).toMatch(/@shop\.example\.com>$/);
		const released = await fx.ledger.release({ namespace: ns(), key: 'm-4', step: 'Send', releasedBy: 'on-call', resolution: 'not_sent', ttlMs: DAY });
		expect(released.map((s) => s.action)).toEqual(['released']);
		const replay = await run(orders('m-4'));
		const [resent] = facts(replay, 0);
		expect(resent.messageId).not.toBe(firstId);
		expect(mailsFor('m-4').map((m) => m.messageId)).toEqual([firstId, resent.messageId]);
	});

	test('a mail server that never answers: In Progress to be checked again, within one timeout for the whole run; at "Checks Before Review" checks, Needs Review with the evidence', async () => {
		const silent = await tcpServer(() => undefined);
		try {
			await diedWhileSending(['m-5', 'm-6', 'm-7'], true);
			const started = Date.now();
			const r = await run(orders('m-5', 'm-6', 'm-7'), credentials({ ...imap.credential, port: silent.port }), emailSend({ options: { timeout: 1, concurrency: 1, checksBeforeReview: 2 } }));
			const took = Date.now() - started;
			expect(facts(r, 2)).toEqual([]);
			const waiting = facts(r, 3);
			expect(waiting.map((f) => [f.reason, f.checks])).toEqual([
				['check_later', 1],
				['check_later', 1],
				['check_later', 1],
			]);
			for (const f of waiting) expect(f.check).toMatchObject({ outcome: 'later', detail: expect.stringMatching(/did not answer the IMAP check within 1 s/) });
			expect(took).toBeLessThan(4_000);
			expect(await fx.ledger.get(ns(), 'm-5')).toEqual([expect.objectContaining({ status: 'failed_retryable', phase: 'sending', result: expect.objectContaining({ reason: 'check_later', checks: 1 }) })]);

			const again = await run(orders('m-5', 'm-6', 'm-7'), credentials({ ...imap.credential, port: silent.port }), emailSend({ options: { timeout: 1, concurrency: 1, checksBeforeReview: 2 } }));
			const review = facts(again, 2);
			expect(review.map((f) => f.reason)).toEqual(['ambiguous', 'ambiguous', 'ambiguous']);
			for (const f of review) {
				expect(f.check).toMatchObject({ outcome: 'later', detail: expect.stringMatching(/did not answer the IMAP check within 1 s/) });
				expect(f.detail).toMatch(/the destination could not tell whether the message arrived \(2 checks could not answer; the last: The mail server 127\.0\.0\.1:\d+ did not answer the IMAP check within 1 s/);
			}
			expect(mailsFor('m-5').length + mailsFor('m-6').length + mailsFor('m-7').length).toBe(0);
			const [row] = await fx.ledger.get(ns(), 'm-5');
			expect(row).toMatchObject({ status: 'needs_review', phase: 'sending', result: { reason: 'ambiguous', check: { outcome: 'later' } } });
		} finally {
			await silent.close();
		}
	});

	test('"Sent Folder" under Email Options names a folder that does not exist: Needs Review, saying which folders there are', async () => {
		await diedWhileSending(['m-8'], true);
		const r = await run(orders('m-8'), credentials(), emailSend({ emailOptions: { sentFolder: 'Gesendete Objekte' } }));
		const [review] = facts(r, 2);
		expect(review).toMatchObject({ reason: 'ambiguous', check: { outcome: 'unknown', detail: expect.stringMatching(/^The mailbox of mailer has no folder "Gesendete Objekte" \(it has: (?=.*INBOX)(?=.*Sent)/) } });
		expect(mailsFor('m-8')).toHaveLength(0);
	});

	// Last: after a refused login Dovecot delays the next logins from the same address for a few seconds.
	test('a wrong IMAP password: Needs Review, and the item says to check the IMAP credential', async () => {
		await diedWhileSending(['m-9'], true);
		const r = await run(orders('m-9'), credentials({ ...imap.credential, password: 'wrong' }));
		const [review] = facts(r, 2);
		expect(review).toMatchObject({
			reason: 'ambiguous',
			check: { outcome: 'unknown', detail: expect.stringMatching(/refused the IMAP login of "mailer" .*: check the user and password of the IMAP credential/) },
		});
		expect(mailsFor('m-9')).toHaveLength(0);
	});
});
