/**
 * A flaky destination: 30% of requests get 503, 10% get 429 with Retry-After (seconds, or an
 * HTTP date). Within the attempt budget every message is delivered exactly once; the few that
 * ran out of attempts are recorded failed_retryable and go out on a later run, still once.
 */
import { flakyPlan, seededRandom, slackServer, smtpServer, stripeLikeServer, type Plan } from '../support/destinations';
import { postgresBackend, useEngineLedger, useServer } from '../support/engineBackends';
import { runWorkflow } from '../support/engine';
import { credentialsFor, deliveredIds, itemsFor, nodeTypes, SEND_NODE, sendWorkflow, summarize, type ChannelName, type SendSpec } from './fixtures/guarded-workflow';

const KEYS = 200;
const MAX_RUNS = 6;

/** SMTP has no 503/429: 30% "451 try again later", 10% "421 service not available". */
function flakySmtpPlan(seed: number): Plan {
	const random = seededRandom(seed);
	return () => {
		const r = random();
		if (r < 0.3) return { kind: 'status', status: 451 };
		if (r < 0.4) return { kind: 'status', status: 421 };
		return { kind: 'normal' };
	};
}

describe('Guarded Send against a flaky destination', () => {
	const fx = useEngineLedger(postgresBackend);
	const api = useServer(() => stripeLikeServer());
	const slack = useServer(() => slackServer());
	const smtp = useServer(() => smtpServer());
	const report: string[] = [];

	afterAll(() => {
		console.log(`flaky destinations:\n  ${report.join('\n  ')}`);
	});

	const delivered = (channel: ChannelName, prefix: string) => deliveredIds({ api, slack, smtp }, channel, prefix);

	for (const channel of ['http', 'slack', 'email'] as const) {
		test(`${channel}: ${KEYS} messages, each delivered exactly once; leftovers succeed on a later run`, async () => {
			const server = channel === 'http' ? api : channel === 'slack' ? slack : smtp;
			const plan = channel === 'email' ? flakySmtpPlan(7) : flakyPlan({ seed: channel === 'http' ? 11 : 13, unavailable: 0.3, limited: 0.1, retryAfterSeconds: 1 });
			server.setPlan(plan);
			const prefix = `${channel}-flaky-${Date.now()}-`;
			const ids = Array.from({ length: KEYS }, (_, i) => `${prefix}${i}`);
			const workflowId = `flaky-${channel}`;
			const spec: SendSpec = {
				channel,
				workflowId,
				ledger: fx.credentials.idempotencyPostgresApi,
				url: channel === 'http' ? api.url : channel === 'slack' ? slack.apiUrl : undefined,
				smtp: channel === 'email' ? smtp.credential : undefined,
				leaseMs: 120_000,
				options: { maxAttempts: 3, initialBackoff: 50, maxBackoff: 2, maxTotalWait: 5, concurrency: 5 },
			};
			const runs: Array<{ sent: number; retryLater: number; skipped: number; other: number }> = [];
			for (let n = 0; n < MAX_RUNS; n++) {
				const before = server.requests;
				const result = summarize(
					await runWorkflow(sendWorkflow(spec), { credentials: credentialsFor(spec), nodeTypes, executionId: `flaky-${channel}-${n}`, startNode: SEND_NODE, startItems: itemsFor(ids) }),
				);
				expect(result.error).toBeNull();
				const retryLater = result.review.filter((r) => (r.reason === 'gave_up' || r.reason === 'out_of_time') && r.status === 'failed_retryable').length;
				runs.push({ sent: result.sent.length, retryLater, skipped: result.skipped.length, other: result.review.length - retryLater });
				report.push(
					`${channel} run ${n + 1}: ${server.requests - before} requests, sent ${result.sent.length}, failed_retryable ${retryLater}, skipped ${result.skipped.length}`,
				);
				if (retryLater === 0) break;
			}
			const counts = (plan as { counts?: { unavailable: number; limited: number } }).counts;
			if (counts) report.push(`${channel}: the destination answered 503 ${counts.unavailable} times and 429 ${counts.limited} times`);
			server.setPlan(() => ({ kind: 'normal' }));

			// Exactly once: 200 distinct deliveries, none twice.
			const got = delivered(channel, prefix);
			expect(got).toHaveLength(KEYS);
			expect(new Set(got).size).toBe(KEYS);
			// Nothing went to Needs Review for any other reason; every run accounted for every item.
			expect(runs.every((r) => r.other === 0)).toBe(true);
			expect(runs.every((r) => r.sent + r.retryLater + r.skipped === KEYS)).toBe(true);
			expect(runs.reduce((n, r) => n + r.sent, 0)).toBe(KEYS);
			// The flakiness was real: some items needed a later run, and a later run delivered them.
			expect(runs[0].retryLater).toBeGreaterThan(0);
			expect(runs.length).toBeGreaterThan(1);
			expect(runs[runs.length - 1].retryLater).toBe(0);
			const { rows } = await fx.pool.query(`SELECT status, count(*)::int AS n FROM "${fx.table}" WHERE namespace = $1 GROUP BY status`, [`workflow:${workflowId}`]);
			expect(rows).toEqual([{ status: 'completed', n: KEYS }]);
		}, 180_000);
	}
});
