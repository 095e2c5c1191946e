/**
 * Crash recovery for email with the Sent folder check: a child process running Guarded Send
 * (email, with an IMAP credential) is SIGKILLed at four points, then the same items run again
 * (and once more). Real PostgreSQL, a real SMTP server that files every accepted email in the
 * sender's Sent folder over IMAP APPEND (as Gmail and Microsoft 365 do), a real Dovecot.
 *
 *   after claim        nothing was sent, no recovery point     → the rerun sends, once
 *   after "sending"    recovery point set, nothing sent         → the Sent folder has no such email:
 *                                                                 the rerun sends it, once
 *   destination acted  the SMTP server accepted (and filed) it,  → the Sent folder has it: recorded
 *                      the child was killed before the answer     as sent, Skipped (recovered); no
 *                                                                 second email
 *   after record       everything done                          → Skipped
 *
 * Every email is delivered exactly once and nothing goes to Needs Review. Without the IMAP
 * credential (guardedSend.crash.test.ts) the middle two go to Needs Review instead.
 */
import { smtpServer } from '../support/destinations';
import { postgresBackend, useEngineLedger, useServer } from '../support/engineBackends';
import { describeIfDovecot, imapServer } from '../support/imapServer';
import { startChild } from './fixtures/guarded-child-runner';
import { rerunAfterCrash, type SendSpec } from './fixtures/guarded-workflow';

type Point = 'claim' | 'mark' | 'acted' | 'record';

describeIfDovecot('the email crash tests with the Sent folder check')('Guarded Send email with the Sent folder check: SIGKILL at each point, then run again', () => {
	const fx = useEngineLedger(postgresBackend);
	const imap = useServer(() => imapServer());
	const smtp = useServer(() => smtpServer({ sentFolder: imap }));
	const table: string[] = [];

	afterAll(() => {
		console.log(`email crash tests with the Sent folder check (crash point → emails delivered per item, Needs Review):\n  ${table.join('\n  ')}`);
	});

	const specFor = (workflowId: string, leaseMs: number): SendSpec => ({
		channel: 'email',
		workflowId,
		ledger: fx.credentials.idempotencyPostgresApi,
		smtp: smtp.credential,
		imap: imap.credential,
		leaseMs,
		whenInProgress: 'wait',
		maxWaitSeconds: 15,
		options: { timeout: 1 },
	});

	/** Emails the SMTP server accepted, and copies in the Sent folder, per id. */
	const delivered = (ids: string[]) => ids.map((id) => smtp.mails.filter((m) => m.subject === `Your order ${id}`).length);
	const filed = async (ids: string[]) => {
		const sent = await imap.sentMessages();
		return ids.map((id) => sent.filter((m) => m.subject === `Your order ${id}`).length);
	};

	async function crashThenRerun(point: Point) {
		const ids = [1, 2, 3].map((n) => `email-${point}-${n}-${Date.now()}`);
		const workflowId = `crash-email-imap-${point}`;
		const first = specFor(workflowId, 4_000);
		const run = startChild({ spec: first, ids, executionId: `crash-email-imap-${point}-1`, pauseAfter: point === 'acted' ? undefined : point });
		if (point === 'acted') {
			// The SMTP server accepts (and files) each email, then holds its answer; once it has all
			// three, the sender is killed: it never learns the result.
			let acted = 0;
			const all = new Promise<void>((resolve) => {
				smtp.events.on('received', () => ++acted === ids.length && resolve());
			});
			smtp.setPlan(() => ({ kind: 'hang' }));
			await Promise.race([all, run.when('done').then(() => Promise.reject(new Error('the child finished before it was killed')))]);
		} else {
			await run.when('paused');
		}
		const how = await run.kill();
		smtp.setPlan(() => ({ kind: 'normal' }));
		smtp.events.removeAllListeners('received');
		expect(how).toBe('SIGKILL');
		const afterCrash = delivered(ids);

		// The first run's 1 s timeout fits its 4 s hold; the rerun holds the step for 60 s, and its
		// Sent-folder check over IMAP gets 10 s: on a loaded machine 1 s was once too short, and the
		// check's "not now" sent all three to In Progress.
		const rerun = (executionId: string) => rerunAfterCrash({ ...first, options: { ...first.options, timeout: 10 } }, ids, executionId);
		const second = await rerun(`crash-email-imap-${point}-2`);
		const afterRerun = delivered(ids);
		const third = await rerun(`crash-email-imap-${point}-3`);
		const rows = await Promise.all(ids.map(async (id) => (await fx.ledger.get(`workflow:${workflowId}`, id))[0]));
		const needsReview = second.review.length + third.review.length;
		table.push(`killed after ${point}: delivered ${delivered(ids).join('/')} (after the crash ${afterCrash.join('/')}), Needs Review ${needsReview}, rerun: ${second.sent.length} sent, ${second.recovered.length} recovered, ${second.skipped.length - second.recovered.length} skipped`);
		return { ids, afterCrash, second, afterRerun, third, rows, needsReview, filed: await filed(ids) };
	}

	const sorted = (list: string[]) => [...list].sort();

	test('killed right after the claim → the rerun sends each email once', async () => {
		const r = await crashThenRerun('claim');
		expect(r.afterCrash).toEqual([0, 0, 0]);
		expect(sorted(r.second.sent)).toEqual(sorted(r.ids));
		expect(r.afterRerun).toEqual([1, 1, 1]);
		expect(sorted(r.third.skipped)).toEqual(sorted(r.ids));
		expect(r.needsReview).toBe(0);
		expect(r.filed).toEqual([1, 1, 1]);
		expect(r.rows.map((row) => row.status)).toEqual(['completed', 'completed', 'completed']);
	}, 60_000);

	test('killed after the "sending" mark, before the email went out → not in the Sent folder, so the rerun sends it, once', async () => {
		const r = await crashThenRerun('mark');
		expect(r.afterCrash).toEqual([0, 0, 0]);
		expect(r.second.review).toEqual([]);
		expect(sorted(r.second.sent)).toEqual(sorted(r.ids));
		expect(sorted(r.second.resent)).toEqual(sorted(r.ids));
		expect(r.afterRerun).toEqual([1, 1, 1]);
		expect(sorted(r.third.skipped)).toEqual(sorted(r.ids));
		expect(r.needsReview).toBe(0);
		expect(r.filed).toEqual([1, 1, 1]);
		expect(r.rows.map((row) => row.status)).toEqual(['completed', 'completed', 'completed']);
		expect(r.rows.map((row) => (row.result as { check?: { outcome?: string } }).check?.outcome)).toEqual(['not_found', 'not_found', 'not_found']);
	}, 60_000);

	test('killed after the SMTP server accepted the emails, before the result was recorded → found in the Sent folder, recorded, no second email', async () => {
		const r = await crashThenRerun('acted');
		expect(r.afterCrash).toEqual([1, 1, 1]);
		expect(r.second.review).toEqual([]);
		expect(r.second.sent).toEqual([]);
		expect(sorted(r.second.recovered)).toEqual(sorted(r.ids));
		expect(r.afterRerun).toEqual([1, 1, 1]);
		expect(sorted(r.third.skipped)).toEqual(sorted(r.ids));
		expect(r.third.recovered).toEqual([]);
		expect(r.needsReview).toBe(0);
		expect(r.filed).toEqual([1, 1, 1]);
		expect(r.rows.map((row) => row.status)).toEqual(['completed', 'completed', 'completed']);
		// The stored external ID is the Message-ID the SMTP server received.
		for (const [i, id] of r.ids.entries()) {
			const mail = smtp.mails.find((m) => m.subject === `Your order ${id}`);
			expect(r.rows[i].externalId).toBe(mail?.messageId);
		}
	}, 60_000);

	test('killed right after the record → the rerun skips, replaying the result', async () => {
		const r = await crashThenRerun('record');
		expect(r.afterCrash).toEqual([1, 1, 1]);
		expect(sorted(r.second.skipped)).toEqual(sorted(r.ids));
		expect(r.second.recovered).toEqual([]);
		expect(r.afterRerun).toEqual([1, 1, 1]);
		expect(r.needsReview).toBe(0);
		expect(r.filed).toEqual([1, 1, 1]);
	}, 60_000);
});
