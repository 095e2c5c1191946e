/**
 * The email channel's check, "was it delivered?": the sender's Sent folder searched over IMAP for
 * the Message-ID, against a real Dovecot (test/support/imapServer.ts). Found, not found, every
 * way it cannot tell (login refused, no Sent folder, TLS against the port), and every way it
 * cannot tell now (a server that never answers, nothing listening: asked again on the next run),
 * each with a detail a person can act on, within the timeout.
 */
import { IMAP_CHECK_MARGIN_MS, sentFolderCheck, type ImapSettings } from '../../lib/n8n/channels/imap';
import { describeIfDovecot, imapServer, type ImapTestServer } from '../support/imapServer';
import { tcpServer } from '../support/tcpServer';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

let counter = 0;
const newId = () => `<${Date.now().toString(16)}${(++counter).toString(16).padStart(4, '0')}@shop.example.com>`;
const mail = (messageId: string, subject = 'Your order') =>
	[`From: Shop <orders@shop.example.com>`, 'To: ann@example.com', `Subject: ${subject}`, `Message-ID: ${messageId}`, `Date: ${new Date().toUTCString()}`, '', 'Thank you.', ''].join('\r\n');

describeIfDovecot('the IMAP Sent folder check')('email: the Sent folder check over IMAP (real Dovecot)', () => {
	let imap: ImapTestServer;
	const open: Array<{ close(): Promise<void> }> = [];

	beforeAll(async () => {
		imap = await imapServer();
		await imap.addUser('nosent', 'pw-nosent');
		await imap.addUser('outlook', 'pw-outlook', ['Sent Items', 'Drafts']);
		await imap.addUser('custom', 'pw-custom', ['Outgoing', 'Archive']);
	});
	afterAll(async () => {
		await Promise.all(open.map((c) => c.close()));
		await imap?.close();
	});

	const settings = (extra: Partial<ImapSettings> = {}): ImapSettings => ({
		host: imap.host,
		port: imap.port,
		secure: false,
		user: imap.user,
		password: imap.password,
		timeoutMs: 5_000,
		...extra,
	});
	const checker = (extra: Partial<ImapSettings> = {}) => {
		const c = sentFolderCheck(settings(extra));
		open.push(c);
		return c;
	};
	/** The window of a step first claimed a minute ago and taken over now. */
	const recent = () => ({ sinceMs: Date.now() - 60_000, untilMs: Date.now() });

	test('found: the Message-ID is in the Sent folder (found by its \\Sent flag); the external ID is the Message-ID, the UID is in the response', async () => {
		const id = newId();
		const uid = await imap.append(mail(id));
		const check = checker();
		const verdict = await check.check(id, recent());
		expect(verdict).toMatchObject({ outcome: 'found', externalId: id, response: { messageId: id, folder: 'Sent', uid, mailbox: 'mailer' } });
		expect(verdict.detail).toMatch(new RegExp(`Sent folder "Sent" of mailer has this email \\(Message-ID ${id.replace(/[.]/g, '\\.')}, IMAP UID ${uid}`));
	});

	test('not found: no message with that Message-ID (one that merely contains it does not count)', async () => {
		const id = newId();
		// A Message-ID that contains this one: IMAP's HEADER search matches substrings; the check compares exactly.
		await imap.append(mail(`<re.${id.slice(1)}`));
		const check = checker();
		const verdict = await check.check(id, recent());
		expect(verdict.outcome).toBe('not_found');
		expect(verdict.detail).toMatch(/^The Sent folder "Sent" of mailer has no email with the Message-ID <.+> filed since \d{4}-\d\d-\d\d$/);
		// One connection answers many checks.
		const other = newId();
		await imap.append(mail(other));
		expect((await check.check(other, recent())).outcome).toBe('found');
	});

	test('the window: a message filed long before the step was first claimed does not count; within the margin (a day, for clocks) it does', async () => {
		const now = Date.now();
		const window = { sinceMs: now - 10 * 60_000, untilMs: now };
		const tooEarly = newId();
		const early = newId();
		await imap.append(mail(tooEarly), { date: new Date(window.sinceMs - IMAP_CHECK_MARGIN_MS - 2 * DAY) });
		await imap.append(mail(early), { date: new Date(window.sinceMs - 2 * HOUR) });
		const check = checker();
		const missed = await check.check(tooEarly, window);
		expect(missed.outcome).toBe('not_found');
		expect(missed.detail).toMatch(new RegExp(`filed since ${new Date(window.sinceMs - IMAP_CHECK_MARGIN_MS).toISOString().slice(0, 10)}$`));
		expect((await check.check(early, window)).outcome).toBe('found');
		// The same message is found by a window that covers it.
		expect((await check.check(tooEarly, { sinceMs: window.sinceMs - 3 * DAY, untilMs: now })).outcome).toBe('found');
	});

	test('a mailbox without a Sent folder: cannot tell, names the folders it has and the option to set', async () => {
		const verdict = await checker({ user: 'nosent', password: 'pw-nosent' }).check(newId(), recent());
		expect(verdict).toEqual({
			outcome: 'unknown',
			detail: expect.stringMatching(/^The mailbox of nosent has no Sent folder \(it has: INBOX\): set "Sent Folder" under Email Options/),
		});
	});

	test('no \\Sent flag: a folder with a common name (Sent Items) is used', async () => {
		const id = newId();
		await imap.append(mail(id), { user: 'outlook', folder: 'Sent Items' });
		const verdict = await checker({ user: 'outlook', password: 'pw-outlook' }).check(id, recent());
		expect(verdict).toMatchObject({ outcome: 'found', response: { folder: 'Sent Items' } });
	});

	test('"Sent Folder" set: that folder is searched; a folder that does not exist cannot tell and says so', async () => {
		const id = newId();
		await imap.append(mail(id), { user: 'custom', folder: 'Outgoing' });
		const custom = { user: 'custom', password: 'pw-custom' };
		expect(await checker({ ...custom, sentFolder: 'Outgoing' }).check(id, recent())).toMatchObject({ outcome: 'found', response: { folder: 'Outgoing' } });
		expect((await checker({ ...custom }).check(id, recent())).detail).toMatch(/has no Sent folder \(it has: (?=.*INBOX)(?=.*Outgoing)(?=.*Archive)/);
		const missing = await checker({ ...custom, sentFolder: 'Sent Mail' }).check(id, recent());
		expect(missing).toEqual({ outcome: 'unknown', detail: expect.stringMatching(/^The mailbox of custom has no folder "Sent Mail" \(it has: .*\): correct "Sent Folder" under Email Options$/) });
	});

	test('a server that accepts the connection and never answers: not now (asked again on the next run), within the timeout, once per run', async () => {
		const silent = await tcpServer(() => undefined);
		open.push(silent);
		const check = checker({ port: silent.port, timeoutMs: 1_000 });
		const started = Date.now();
		const verdict = await check.check(newId(), recent());
		const took = Date.now() - started;
		expect(verdict).toEqual({ outcome: 'later', retryAfterMs: null, detail: expect.stringMatching(/^The mail server 127\.0\.0\.1:\d+ did not answer the IMAP check within 1 s: check the host and port.*; it is asked again on the next run$/) });
		expect(took).toBeGreaterThanOrEqual(900);
		expect(took).toBeLessThan(2_000);
		const again = Date.now();
		expect((await check.check(newId(), recent())).outcome).toBe('later');
		expect(Date.now() - again).toBeLessThan(50);
	});

	test('nothing listening: not now (a server restarting looks the same), connection refused', async () => {
		const gone = await tcpServer(() => undefined);
		const port = gone.port;
		await gone.close();
		const verdict = await checker({ port }).check(newId(), recent());
		expect(verdict).toEqual({ outcome: 'later', retryAfterMs: null, detail: expect.stringMatching(/^Nothing accepts IMAP connections at 127\.0\.0\.1:\d+ \(connection refused\): check the host and port.*; it is asked again on the next run$/) });
	});

	test('SSL/TLS on against a plain IMAP port: cannot tell, and says to check SSL/TLS against the port', async () => {
		const verdict = await checker({ secure: true, timeoutMs: 3_000 }).check(newId(), recent());
		expect(verdict.outcome).toBe('unknown');
		expect(verdict.detail).toMatch(/^The mail server 127\.0\.0\.1:\d+ does not answer with SSL\/TLS on this port \(ERR_SSL_WRONG_VERSION_NUMBER\): in the IMAP credential, turn SSL\/TLS off for port 143/);
	});

	test('the check reads only: the mailbox is unchanged (no \\Seen set, nothing moved)', async () => {
		const id = newId();
		await imap.append(mail(id));
		const client = await imap.client();
		try {
			await client.mailboxOpen('Sent');
			const uids = (await client.search({ header: { 'message-id': id } }, { uid: true })) as number[];
			await client.messageFlagsRemove(uids, ['\\Seen'], { uid: true });
			expect((await checker().check(id, recent())).outcome).toBe('found');
			const [after] = await client.fetchAll(uids, { uid: true, flags: true }, { uid: true });
			expect([...(after.flags ?? [])]).not.toContain('\\Seen');
		} finally {
			await client.logout();
		}
	});

	// Last: after a refused login Dovecot delays the next logins from the same address for a few seconds.
	test('a wrong password: cannot tell, and says to check the IMAP credential', async () => {
		const check = checker({ password: 'wrong' });
		const started = Date.now();
		const verdict = await check.check(newId(), recent());
		expect(verdict.outcome).toBe('unknown');
		expect(verdict.detail).toMatch(/^The mail server 127\.0\.0\.1:\d+ refused the IMAP login of "mailer" \("Authentication failed\."\): check the user and password of the IMAP credential/);
		expect(Date.now() - started).toBeLessThan(5_000);
		// The next check of the same run does not try again.
		const again = Date.now();
		expect(await check.check(newId(), recent())).toEqual(verdict);
		expect(Date.now() - again).toBeLessThan(50);
	});
});
