/**
 * Several OS processes run Guarded Send for the same 200 keys at the same instant, each in its
 * own order, each with its own connection pool. The destination must receive exactly 200
 * messages: every key once.
 */
import { slackServer, smtpServer, stripeLikeServer } from '../support/destinations';
import { postgresBackend, useEngineLedger, useServer } from '../support/engineBackends';
import { startChild } from './fixtures/guarded-child-runner';
import { deliveredIds, type ChannelName, type Summary } from './fixtures/guarded-workflow';

const PROCESSES = 5;
const KEYS = 200;

function shuffled<T>(list: T[], seed: number): T[] {
	const out = [...list];
	let x = seed * 2654435761 + 1;
	for (let i = out.length - 1; i > 0; i--) {
		x = (x * 1103515245 + 12345) % 2147483648;
		const j = x % (i + 1);
		[out[i], out[j]] = [out[j], out[i]];
	}
	return out;
}

describe(`Guarded Send: ${PROCESSES} processes race for the same ${KEYS} keys`, () => {
	const fx = useEngineLedger(postgresBackend);
	const api = useServer(() => stripeLikeServer());
	const slack = useServer(() => slackServer());
	const smtp = useServer(() => smtpServer());

	const idsDelivered = (channel: ChannelName, prefix: string) => deliveredIds({ api, slack, smtp }, channel, prefix);

	for (const channel of ['http', 'slack', 'email'] as const) {
		test(`${channel}: exactly ${KEYS} messages, each key once`, async () => {
			const prefix = `${channel}-race-${Date.now()}-`;
			const ids = Array.from({ length: KEYS }, (_, i) => `${prefix}${i}`);
			const spec = {
				channel,
				workflowId: `race-${channel}`,
				ledger: fx.credentials.idempotencyPostgresApi,
				url: channel === 'http' ? api.url : channel === 'slack' ? slack.apiUrl : undefined,
				smtp: channel === 'email' ? smtp.credential : undefined,
				leaseMs: 60_000,
				whenInProgress: 'wait' as const,
				maxWaitSeconds: 90,
				// Small batches make the processes interleave claims on the same keys.
				options: { batchSize: 25, concurrency: 5 },
			};
			const children = Array.from({ length: PROCESSES }, (_, p) =>
				startChild({ spec, ids: shuffled(ids, p + 1), executionId: `race-${channel}-${p}`, handshake: true }),
			);
			await Promise.all(children.map((c) => c.when('ready')));
			const startAt = Date.now() + 300;
			for (const c of children) c.start(startAt);
			const results: Summary[] = await Promise.all(children.map((c) => c.done));

			const delivered = idsDelivered(channel, prefix);
			const perKey = new Map<string, number>();
			for (const id of delivered) perKey.set(id, (perKey.get(id) ?? 0) + 1);
			const sentBy = results.map((r) => r.sent.length);
			console.log(
				`${channel}: ${PROCESSES} processes, sent per process ${sentBy.join('/')}, skipped ${results.map((r) => r.skipped.length).join('/')}, ` +
					`needs review ${results.map((r) => r.review.length).join('/')}; destination received ${delivered.length}`,
			);
			expect(results.map((r) => r.error)).toEqual(results.map(() => null));
			expect(delivered).toHaveLength(KEYS);
			expect(perKey.size).toBe(KEYS);
			expect([...perKey.values()].every((n) => n === 1)).toBe(true);
			// Every key was sent by exactly one process; every other process skipped it.
			const allSent = results.flatMap((r) => r.sent);
			expect(allSent).toHaveLength(KEYS);
			expect(new Set(allSent).size).toBe(KEYS);
			for (const r of results) {
				expect(r.review).toEqual([]);
				expect(r.sent.length + r.skipped.length).toBe(KEYS);
			}
			// The race was real: more than one process sent something.
			expect(sentBy.filter((n) => n > 0).length).toBeGreaterThan(1);
		}, 180_000);
	}
});
