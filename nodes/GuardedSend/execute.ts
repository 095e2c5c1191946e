/**
 * Guarded Send: for each item, claim (namespace, key, step), mark the recovery point `sending`,
 * perform the side effect, record the result. One batched ledger call per phase and chunk:
 *
 *   claim ──► markPhase('sending') ──► send (at most N in flight, retry policy) ──► record
 *
 * Every write after the claim carries the claim's fencing token: if another run took the step
 * over meanwhile (or an operator released it), the write changes nothing and the item says so.
 * Time is the ledger's: the claim answers how long the lease has left, and sends stop in time
 * by this process's own monotonic clock, never by comparing its wall clock with the ledger's.
 * A "Hold Step For" longer than 30 s is claimed as a 30 s lease that this process renews while
 * the run lives, up to "Hold Step For" (lib/n8n/leaseKeeper.ts): a run that dies frees its steps
 * within ~30 s. No attempt starts later than (timeout + margin) before "Hold Step For" ends, nor
 * once the lease is no longer confirmed by a renewal (the keeper's renewals failed).
 *
 * A claim that takes over a lapsed lease tells which phase the dead run reached:
 *   - no phase (it died before sending could start), or a failed_retryable row: safe to send;
 *   - `sending` (it may have sent, then died before recording): the ambiguous case. A destination
 *     that honours the Idempotency-Key is asked again with the same key. Otherwise, where the
 *     channel can ask the destination (Slack history, the Sent folder over IMAP, a check request),
 *     it asks first: found is recorded as sent and Skipped, not found is sent; a check that cannot
 *     answer for now (rate limit, timeout, 5xx) leaves the step for the next delivery to check
 *     again (In Progress, recheck.ts); when the check cannot answer at all, or there is none, or
 *     "Checks Before Review" checks could not, the step goes to Needs Review, or is sent again
 *     where the user accepted a possible duplicate (then a found message still stops the second send).
 */
import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';

import { LedgerError, LedgerInputError, LedgerUnavailableError } from '../../lib/ledger/errors';
import { fingerprint } from '../../lib/ledger/fingerprint';
import { performance } from 'perf_hooks';

import type { ClaimOutcome, FencedRow, Ledger, LedgerRecord, RecordOutcome, RecordRequest, RowId } from '../../lib/ledger/types';
import { UNIT_STEP } from '../../lib/ledger/types';
import { assertStep } from '../../lib/ledger/validate';
import { forEachLimit } from '../../lib/n8n/channels/limit';
import { deliver, type RetryPolicy, type Verdict } from '../../lib/n8n/channels/retry';
import { deferBlocked } from '../../lib/n8n/countBuffer';
import { failedItem, toNodeError } from '../../lib/n8n/errors';
import { factsOf, itemWithFacts, type Outcome } from '../../lib/n8n/facts';
import { keepLeases, leasePlan } from '../../lib/n8n/leaseKeeper';
import { openLedger } from '../../lib/n8n/ledgerAccess';
import { authorityFor, unitKeyReader, type UnitKey } from '../../lib/n8n/lineage';
import { lostKeyError, missingRows } from '../../lib/n8n/lostKey';
import { leaveItemsOpen } from '../../lib/n8n/openUnits';
import { readDurationOption } from '../../lib/n8n/scope';
import { checkAll } from '../../lib/n8n/channels/checks';
import type { CheckVerdict, CheckWindow } from '../../lib/n8n/channels/types';
import type { ChannelAdapter, ChannelModule } from './channels/adapter';
import { emailModule } from './channels/email';
import { httpModule } from './channels/http';
import { slackModule } from './channels/slack';
import { HOLD_STEP, KEEP_RECORDS } from './options';
import { numberOption } from './params';
import { isToolCall, toolOutputs } from './toolAnswer';
import { checkLaterDetail, checkLaterResult, ledgerNow, pendingCheck, tooEarly, type PendingCheck } from './recheck';

export const CHANNELS: Record<string, ChannelModule> = { http: httpModule, slack: slackModule, email: emailModule };

const SENT = 0;
const SKIPPED = 1;
const REVIEW = 2;
/** Another run holds the step right now: nothing was sent here, and it is nobody's incident. */
const IN_PROGRESS = 3;

/** No attempt starts later than the timeout plus this before the lease ends. */
const DEADLINE_MARGIN_MS = 1_000;

/**
 * An uncertain answer (a timeout, a dropped connection) is checked at the destination no sooner
 * than this after it came, so that a destination still finishing the request can show it.
 */
const CHECK_AFTER_MS = 2_000;

/** The recovery point marked before the first byte goes out. */
export const PHASE_SENDING = 'sending';

export type { ReviewReason } from './reasons';

interface Config {
	channelName: string;
	step: (itemIndex: number) => string;
	leaseMs: number;
	ttlMs: number;
	whenInProgress: 'review' | 'wait';
	maxWaitMs: number;
	onMismatch: 'review' | 'skip' | 'error';
	completeUnit: boolean;
	concurrency: number;
	batchSize: number;
	timeoutMs: number;
	policy: RetryPolicy;
	/** Checks that may fail for a passing reason before the step goes to a person. */
	checksBeforeReview: number;
}

interface Prepared {
	index: number;
	row: RowId;
	/** The unit of work's claim by an upstream gate, when known (its fence goes with the unit's record). */
	unit: UnitKey;
	message: unknown;
	fingerprint: string;
}

interface Routed {
	output: number;
	facts: IDataObject;
	error?: NodeOperationError;
}

function readConfig(ctx: IExecuteFunctions): Config {
	const channelName = ctx.getNodeParameter('channel', 0) as string;
	if (!CHANNELS[channelName]) throw new LedgerInputError(`Unknown channel "${channelName}"`, 'Choose HTTP Request, Slack or Email.');
	const options = ctx.getNodeParameter('options', 0, {}) as IDataObject;
	const stepText = String(options.step ?? '').trim();
	const step = assertStep(stepText || ctx.getNode().name);
	const whenInProgress = (options.whenInProgress ?? 'review') as Config['whenInProgress'];
	const leaseMs = readDurationOption(ctx, HOLD_STEP);
	const timeoutMs = numberOption(options.timeout, 'Timeout', 1, 600, 30) * 1000;
	// No attempt starts later than (timeout + margin) before the lease ends, so the lease must
	// leave room to start at least one.
	const minimumLeaseMs = timeoutMs + DEADLINE_MARGIN_MS + 1_000;
	if (leaseMs < minimumLeaseMs) {
		throw new LedgerInputError(
			`"${HOLD_STEP.displayName}" (${leaseMs / 1000} s) is too short for a ${timeoutMs / 1000} s timeout`,
			`A send must be able to finish while this run holds the step, or another run could take the step over while it is still sending. Make "${HOLD_STEP.displayName}" longer than ${minimumLeaseMs / 1000} s (minutes are usual), or lower the timeout.`,
		);
	}
	return {
		channelName,
		step: () => step,
		leaseMs,
		ttlMs: readDurationOption(ctx, KEEP_RECORDS),
		whenInProgress,
		maxWaitMs: whenInProgress === 'wait' ? numberOption(options.maxWait, 'Max Wait', 1, 3600, 60) * 1000 : 0,
		// An agent rewords as a matter of course: as its tool, a repeat in other words is already sent.
		onMismatch: (options.onMismatch ?? (isToolCall(ctx) ? 'skip' : 'review')) as Config['onMismatch'],
		completeUnit: options.completeUnit === true,
		concurrency: Math.floor(numberOption(options.concurrency, 'Sends at Once', 1, 100, 5)),
		batchSize: Math.floor(numberOption(options.batchSize, 'Batch Size', 1, 5000, 100)),
		timeoutMs,
		checksBeforeReview: Math.floor(numberOption(options.checksBeforeReview, 'Checks Before Review', 1, 100, 5)),
		policy: {
			maxAttempts: Math.floor(numberOption(options.maxAttempts, 'Max Attempts', 1, 20, 5)),
			baseDelayMs: numberOption(options.initialBackoff, 'Initial Backoff', 1, 60_000, 500),
			maxDelayMs: numberOption(options.maxBackoff, 'Longest Wait', 0.01, 3600, 30) * 1000,
			maxTotalWaitMs: numberOption(options.maxTotalWait, 'Total Wait per Item', 0, 3600, 60) * 1000,
		},
	};
}

const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);

/** The ledger facts added to every output item. */
function facts(outcome: Outcome | 'sent' | 'skipped' | 'needs_review', row: RowId, record: LedgerRecord | null, extra: IDataObject = {}): IDataObject {
	const base = factsOf(outcome as Outcome, row.namespace, row.key, row.step, record);
	delete base.result;
	return { ...base, ...extra };
}

/** What a check found, as kept on the item and in the row's result. */
interface CheckEvidence extends IDataObject {
	outcome: CheckVerdict['outcome'];
	detail: string;
	checkedAt: string;
}

/**
 * Where an earlier attempt may have sent: between the step's first claim and this takeover, both
 * by the ledger's clock (a takeover keeps the first-seen time).
 */
const checkWindow = (claim: LedgerRecord): CheckWindow => ({ sinceMs: claim.firstSeenAt.getTime(), untilMs: claim.updatedAt.getTime() });

/** When and by whom a stored result was sent. */
function provenance(record: LedgerRecord): IDataObject {
	const stored = (record.result ?? {}) as IDataObject;
	return {
		sentAt: typeof stored.sentAt === 'string' ? stored.sentAt : iso(record.updatedAt),
		sentByExecution: (stored.executionId as string | undefined) ?? null,
		sentByWorkflow: (stored.workflowId as string | undefined) ?? null,
		response: (stored.response as IDataObject | undefined) ?? null,
	};
}

export async function executeGuardedSend(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	const items = this.getInputData();
	const node = this.getNode();
	const continueOnFail = this.continueOnFail();
	const knownExecution = this.getExecutionId();
	const executionId = knownExecution ?? 'unknown';
	const holder = `execution:${executionId}`;
	// n8n's Retry On Fail runs this node again inside the same execution. A step this execution
	// still holds was then claimed by the failed try, which died before recording: take it over
	// and let the phase it reached decide (same key again for HTTP, Needs Review for Slack/email).
	const reclaimOwnLease = knownExecution !== undefined && knownExecution !== '';
	const workflowId = this.getWorkflow().id ?? null;
	// As an AI Agent's tool, every item is answered in words, errors included (toolAnswer.ts).
	const toolCall = isToolCall(this);

	let config: Config;
	let adapter: ChannelAdapter;
	let keys: ReturnType<typeof unitKeyReader>;
	try {
		config = readConfig(this);
		keys = unitKeyReader(this);
		if (toolCall && keys.kind === 'lineage') {
			throw new LedgerInputError(
				'As an AI Agent\'s tool, Guarded Send needs a key of its own for each message',
				'Set "Key From" to "Expression" and build the key from what the model fills in, such as {{ $fromAI("recipient") }}-{{ $fromAI("purpose") }}: the same recipient and purpose then count as one message, however the model words it.',
			);
		}
		adapter = await CHANNELS[config.channelName].open(this, { timeoutMs: config.timeoutMs, concurrency: config.concurrency });
	} catch (error) {
		throw toNodeError(node, error);
	}

	const routed: Array<Routed | undefined> = new Array(items.length);
	/** Each item's unit of work, once its key is read: a Dedupe Gate lets the unsent ones through again. */
	const units: Array<UnitKey | undefined> = new Array(items.length);
	const ctx = this;
	const route = (index: number, output: number, f: IDataObject) => {
		routed[index] = { output, facts: f };
	};
	const fail = (index: number, error: unknown) => {
		const nodeError = toNodeError(node, error, index);
		if (!continueOnFail && !toolCall) throw nodeError;
		routed[index] = { output: REVIEW, facts: { outcome: 'needs_review', reason: 'error' }, error: nodeError };
	};

	let retryLater = 0;
	try {
		// 1. Build every message first: bad input fails its item before anything is claimed.
		const prepared: Prepared[] = [];
		for (let i = 0; i < items.length; i++) {
			try {
				const unit = keys.read(i, items[i]);
				units[i] = unit;
				const row: RowId = { namespace: unit.namespace, key: unit.key, step: config.step(i) };
				const message = adapter.build(i, items[i], row);
				prepared.push({ index: i, row, unit, message, fingerprint: fingerprint(adapter.payload(message)) });
			} catch (error) {
				fail(i, error);
			}
		}
		if (prepared.length === 0) return collect();

		let ledger: Ledger;
		try {
			ledger = await openLedger(this);
		} catch (error) {
			if (!continueOnFail && !toolCall) throw toNodeError(node, error);
			for (const p of prepared) fail(p.index, error);
			return collect();
		}

		// 2. Chunks: claim, mark, send, record. Items held by a live lease elsewhere may wait.
		try {
			const waitUntil = Date.now() + config.maxWaitMs;
			let waiting: Prepared[] = [];
			for (let start = 0; start < prepared.length; start += config.batchSize) {
				waiting.push(...(await runChunk(ledger, prepared.slice(start, start + config.batchSize), config.maxWaitMs > 0)));
			}
			for (let pause = 250; waiting.length > 0; pause = Math.min(pause * 2, 2_000)) {
				if (Date.now() + pause > waitUntil) break;
				await new Promise((r) => setTimeout(r, pause));
				const still: Prepared[] = [];
				for (let start = 0; start < waiting.length; start += config.batchSize) {
					still.push(...(await runChunk(ledger, waiting.slice(start, start + config.batchSize), Date.now() + 2 * pause <= waitUntil)));
				}
				waiting = still;
			}
			for (const p of waiting) routeInProgress(p, null, true);
		} catch (error) {
			// The ledger failed mid-run (fail closed: nothing more is sent), or an item failed hard.
			if (!continueOnFail && !toolCall) throw toNodeError(node, error);
			for (const p of prepared) if (!routed[p.index]) fail(p.index, error);
		}
	} finally {
		await adapter.close?.().catch(() => undefined);
	}
	if (retryLater > 0) {
		this.addExecutionHints({
			message: `${retryLater} item${retryLater === 1 ? ' was' : 's were'} not delivered within the attempt budget. They are recorded as "failed, retry later" and the next run will try again.`,
			type: 'warning',
			location: 'outputPane',
		});
	}
	return collect();

	/**
	 * Another run is sending this step right now: a normal repeat, not an incident, and not done
	 * yet either (so not Skipped, which flows wire to Mark Step Done).
	 */
	function routeInProgress(p: Prepared, record: LedgerRecord | null, waited: boolean) {
		route(p.index, IN_PROGRESS, facts('in_progress', p.row, record, {
			reason: 'in_progress',
			detail: waited
				? `Another run still held this step after waiting ${Math.round(config.maxWaitMs / 1000)} s; nothing was sent`
				: 'Another run holds this step right now; nothing was sent',
		}));
	}

	/** Runs one chunk; returns the items another run holds that should be tried again after a pause. */
	async function runChunk(ledger: Ledger, chunk: Prepared[], mayWait: boolean): Promise<Prepared[]> {
		// The lease runs from the moment the ledger answers; counting from before the request is safe.
		const claimedAt = performance.now();
		// A short lease, renewed while this run lives, up to "Hold Step For" (as Dedupe Gate's).
		const plan = leasePlan(config.leaseMs);
		const outcomes: ClaimOutcome[] = await ledger.claim(
			chunk.map((p) => ({ ...p.row, fingerprint: p.fingerprint })),
			{ mode: 'lease', holder, leaseMs: plan.claimMs, ttlMs: config.ttlMs, reclaimOwnLease },
		);
		deferBlocked(ctx, ledger, chunk.map((p) => p.row), outcomes);
		/** Each claimed row with its fence, as the keeper holds it (by item index). */
		const fenced = new Map<number, FencedRow>();
		chunk.forEach((p, r) => {
			const outcome = outcomes[r];
			if (outcome.kind === 'claimed' && outcome.record.fence !== null) fenced.set(p.index, { ...p.row, fence: outcome.record.fence });
		});
		const kept = keepLeases(ctx, ledger, [...fenced.values()], plan, claimedAt);
		const toSend: Array<{ p: Prepared; record: LedgerRecord; resend: boolean; check?: CheckEvidence }> = [];
		const toCheck: Array<{ p: Prepared; record: LedgerRecord }> = [];
		const records: Array<{
			request: RecordRequest;
			p: Prepared;
			verdict?: Verdict;
			resend?: boolean;
			check?: CheckEvidence;
			kind: 'sent' | 'review' | 'unit' | 'recovered' | 'later';
		}> = [];
		/**
		 * A step an earlier attempt may have sent, on a channel that cannot deduplicate, with no check or
		 * a check that could not answer: recorded as needs_review for a person, with the check's evidence.
		 */
		const reviewAmbiguous = (p: Prepared, claim: LedgerRecord, check: CheckEvidence | null) => {
			const detail =
				check === null
					? 'A previous attempt started sending and died before it recorded the result; the message may have been delivered'
					: `A previous attempt started sending and died before it recorded the result, and the destination could not tell whether the message arrived (${check.detail})`;
			records.push({
				kind: 'review',
				p,
				request: {
					...p.row,
					status: 'needs_review',
					fence: claim.fence,
					result: { reason: 'ambiguous', detail, executionId, at: new Date().toISOString(), ...(check ? { check } : {}) },
				},
			});
			route(p.index, REVIEW, facts('needs_review', p.row, claim, { reason: 'ambiguous', detail, ...(check ? { check } : {}) }));
		};
		const lostUnits = new Set<number>();
		const waitAgain: Prepared[] = [];
		const batchDuplicates: Array<{ p: Prepared; first: Prepared }> = [];
		// Items that must fail hard are failed after this chunk's sends are recorded.
		const deferred: Array<{ p: Prepared; error: LedgerError }> = [];

		chunk.forEach((p, r) => {
			const outcome = outcomes[r];
			switch (outcome.kind) {
				case 'claimed': {
					// A failed_retryable row in phase `sending` is one whose check asked to be repeated (recheck.ts).
					const lapsedMidSend = (outcome.previousStatus === 'in_progress' || outcome.previousStatus === 'failed_retryable') && outcome.previousPhase === PHASE_SENDING;
					if (lapsedMidSend && !adapter.channel.idempotent && (adapter.channel.check || !adapter.acceptUncertain)) {
						if (adapter.channel.check) toCheck.push({ p, record: outcome.record });
						else reviewAmbiguous(p, outcome.record, null);
					} else {
						toSend.push({ p, record: outcome.record, resend: lapsedMidSend });
					}
					break;
				}
				case 'duplicate': {
					const record = outcome.record;
					if (record.status === 'needs_review') {
						route(p.index, REVIEW, facts('needs_review', p.row, record, {
							reason: 'marked_for_review',
							detail: 'An earlier run put this step on Needs Review; release it with the Idempotency Ledger node to send again',
							previousResult: (record.result ?? null) as IDataObject | null,
						}));
					} else {
						route(p.index, SKIPPED, facts('skipped', p.row, record, { reason: 'already_sent', ...provenance(record) }));
						if (config.completeUnit) records.push({ kind: 'unit', p, request: unitRequest(p, record.externalId, record.result) });
					}
					break;
				}
				case 'in_progress':
					if (config.whenInProgress === 'wait' && mayWait) waitAgain.push(p);
					else routeInProgress(p, outcome.record, config.whenInProgress === 'wait');
					break;
				case 'mismatch': {
					const error = routeMismatch(p, outcome.record);
					if (error) deferred.push({ p, error });
					break;
				}
				case 'batch_duplicate':
					batchDuplicates.push({ p, first: chunk[outcome.firstIndex] });
					break;
			}
		});

		// Ask the destination about each step an earlier attempt may have sent (a check never sends):
		// found is recorded as sent, not found is sent now; "not now" waits for a later run's check
		// (recheck.ts), "cannot tell" goes to Needs Review.
		const laterFor = (p: Prepared, record: LedgerRecord, pending: PendingCheck, why: string, check: CheckEvidence | null) => {
			const detail = checkLaterDetail(pending, config.checksBeforeReview, why);
			const result = checkLaterResult(pending, detail, { executionId, at: new Date().toISOString(), ...(check ? { check } : {}) });
			records.push({ kind: 'later', p, request: { ...p.row, status: 'failed_retryable', keepSending: true, fingerprint: p.fingerprint, fence: record.fence, result } });
			route(p.index, IN_PROGRESS, facts('in_progress', p.row, record, {
				reason: 'check_later',
				detail,
				checks: pending.checks,
				checkAgainAt: result.checkAgainAt,
				...(check ? { check } : {}),
			}));
		};
		const asking: Array<{ p: Prepared; record: LedgerRecord; message: unknown; pending: PendingCheck | null }> = [];
		for (const { p, record } of toCheck) {
			const pending = pendingCheck(record);
			// The destination asked to wait (Retry-After) and that time has not come: not asked again yet.
			if (pending && tooEarly(record, pending)) laterFor(p, record, pending, 'it asked to wait', ((record.result as IDataObject).check as CheckEvidence | undefined) ?? null);
			else asking.push({ p, record, message: adapter.forClaim ? adapter.forClaim(p.message, record) : p.message, pending });
		}
		// Checks run while this run holds the steps: up to "Hold Step For" where the keeper renews them.
		const held = plan.renew ? plan.maxMs : Math.min(...asking.map((a) => a.record.leaseRemainingMs ?? config.leaseMs));
		const checkDeadline = claimedAt + held - (config.timeoutMs + DEADLINE_MARGIN_MS);
		const verdicts: CheckVerdict[] = await checkAll(
			adapter.channel,
			asking.map((a) => ({ message: a.message, window: checkWindow(a.record), resume: a.pending?.resume })),
			{ concurrency: config.concurrency, budget: { now: () => performance.now(), deadline: checkDeadline, maxWaitMs: config.policy.maxTotalWaitMs } },
		);
		asking.forEach(({ p, record, message, pending }, n) => {
			const verdict = verdicts[n];
			const check: CheckEvidence = { outcome: verdict.outcome, detail: verdict.detail, checkedAt: new Date().toISOString() };
			if (verdict.outcome === 'later') {
				const checks = (pending?.checks ?? 0) + (verdict.progressed ? 0 : 1);
				if (checks < config.checksBeforeReview) {
					const retryAt = verdict.retryAfterMs === null ? null : ledgerNow(record, claimedAt, performance.now()) + verdict.retryAfterMs;
					laterFor(p, record, { checks, checkAgainAtMs: retryAt, ...(verdict.resume !== undefined ? { resume: verdict.resume } : {}) }, verdict.detail, check);
					return;
				}
				check.detail = `${checks} checks could not answer; the last: ${verdict.detail}`;
			}
			if (verdict.outcome === 'not_found' || (verdict.outcome !== 'found' && adapter.acceptUncertain)) {
				// Not there; or no answer, and the user accepted a possible duplicate over a review.
				toSend.push({ p, record, resend: true, check });
			} else if (verdict.outcome !== 'found') {
				reviewAmbiguous(p, record, check);
			} else {
				const result = { ...resultOf({ status: 'completed', externalId: verdict.externalId, response: verdict.response, attempts: 0, waitedMs: 0 }), recovered: true, check };
				records.push({
					kind: 'recovered',
					p: { ...p, message },
					check,
					request: { ...p.row, status: 'completed', externalId: verdict.externalId, result, fingerprint: p.fingerprint, fence: record.fence },
				});
				if (config.completeUnit) records.push({ kind: 'unit', p, request: unitRequest(p, verdict.externalId, result) });
			}
		});

		// 3. The recovery point, for every row about to be sent, in one call.
		if (toSend.length > 0) {
			const marked = await ledger.markPhase(
				toSend.map((s) => ({ ...s.p.row, fence: s.record.fence as number })),
				PHASE_SENDING,
			);
			const gone = marked.every(Boolean) ? [] : await missingRows(ledger, toSend.map((s) => s.p.row));
			const sendable = toSend.filter((s, n) => {
				if (marked[n]) return true;
				deferred.push({ p: s.p, error: lostLease(s.p, 'before sending could start, so nothing was sent', gone[n]) });
				return false;
			});

			// 4. Send, at most `concurrency` at once, each under the retry policy and the lease.
			// A kept lease runs to "Hold Step For" from the claim (the keeper extends it); an attempt
			// starts only while it can end before that, and while a renewal still confirms the lease:
			// renewals that fail stop new attempts before the lease could lapse and another run take
			// the step (one in flight then is caught by the fenced record, and by the `sending` mark).
			const margin = config.timeoutMs + DEADLINE_MARGIN_MS;
			await forEachLimit(sendable, config.concurrency, async (s) => {
				const deadline = claimedAt + (plan.renew ? plan.maxMs : (s.record.leaseRemainingMs ?? config.leaseMs)) - margin;
				const row = fenced.get(s.p.index);
				const message = adapter.forClaim ? adapter.forClaim(s.p.message, s.record) : s.p.message;
				const verdict = await deliver(adapter.channel, message, {
					policy: config.policy,
					acceptUncertain: adapter.acceptUncertain,
					deadline,
					heldUntil: row ? () => kept.heldUntil(row) - DEADLINE_MARGIN_MS : undefined,
					// An uncertain answer is checked with the same check a takeover uses, for a send
					// made since the step was first claimed.
					checkSinceMs: s.record.firstSeenAt.getTime(),
					checkAfterMs: CHECK_AFTER_MS,
					now: () => performance.now(),
				});
				// What the destination said about an uncertain answer in this run, else before the send.
				const check = verdict.check ? ({ ...verdict.check } as CheckEvidence) : s.check;
				const request = verdict.status === 'failed_retryable' && verdict.reason === 'check_later'
					? checkLaterRequest(s.p, verdict, s.record, ledgerNow(s.record, claimedAt, performance.now()), check)
					: verdictRequest(s.p, verdict, s.record, check);
				records.push({ kind: 'sent', p: { ...s.p, message }, verdict, resend: s.resend, check, request });
				if (verdict.status === 'completed' && config.completeUnit) {
					records.push({ kind: 'unit', p: s.p, request: unitRequest(s.p, verdict.externalId, resultOf(verdict)) });
				}
			});
		}

		// 5. Record everything this chunk decided, in one call.
		let written: RecordOutcome[] = [];
		if (records.length > 0) {
			const attempt = await ledger.record(records.map((x) => x.request), { ttlMs: config.ttlMs, holder }).then(
				(rows) => ({ rows, error: null }),
				(error: unknown) => ({ rows: null, error }),
			);
			if (!attempt.rows) {
				const sent = records.filter((x) => x.kind === 'sent' && x.verdict?.status === 'completed').length;
				throw unrecorded(attempt.error, sent);
			}
			written = attempt.rows;
		}
		records.forEach((x, n) => {
			if (x.kind === 'unit' && written[n]?.kind === 'lost_lease') lostUnits.add(x.p.index);
		});
		records.forEach((x, n) => {
			const outcome = written[n];
			if ((x.kind === 'review' || x.kind === 'recovered' || x.kind === 'later') && outcome?.kind === 'lost_lease') {
				deferred.push({ p: x.p, error: lostLease(x.p, 'while this run was deciding, so nothing was sent or recorded', outcome.missing) });
				return;
			}
			if (x.kind === 'recovered') {
				const record = outcome?.kind === 'written' ? outcome.record : null;
				route(x.p.index, SKIPPED, facts('skipped', x.p.row, record, {
					reason: 'already_sent',
					recovered: true,
					detail: 'A previous attempt died before it recorded the result; the destination confirms the message went out, so it was recorded as sent and not sent again',
					externalId: x.request.externalId ?? null,
					check: x.check ?? null,
					...(adapter.describe?.(x.p.message) ?? {}),
					...(lostUnits.has(x.p.index) ? { unitRecorded: false } : {}),
				}));
				return;
			}
			if (x.kind !== 'sent' || !x.verdict) return;
			if (outcome?.kind === 'lost_lease') {
				const what = x.verdict.status === 'completed' ? 'after the message was sent; it was sent, but the result was not recorded' : 'while it was being sent; nothing was recorded';
				deferred.push({ p: x.p, error: lostLease(x.p, what, outcome.missing) });
				return;
			}
			routeVerdict(x.p, x.verdict, outcome?.kind === 'written' ? outcome.record : null, x.resend === true, lostUnits.has(x.p.index), x.check);
		});
		for (const { p, first } of batchDuplicates) {
			const error = routeBatchDuplicate(p, first);
			if (error) deferred.push({ p, error });
		}
		for (const { p, error } of deferred) fail(p.index, error);
		return waitAgain;
	}

	/** The step's claim was taken over (or released by an operator), or its row is gone (`missing`), before this run could finish. */
	function lostLease(p: Prepared, when: string, missing?: boolean): LedgerError {
		if (missing) return lostKeyError(ctx, `the step "${p.row.step}" of the key "${p.row.key}"`, when);
		return new LedgerError(
			`Another run took over the step "${p.row.step}" of the key "${p.row.key}" ${when}`,
			'This happens when "Hold Step For" runs out (make it longer under Options, or lower "Batch Size"), when n8n could not reach the ledger for about 30 seconds to keep holding the step, or when someone released the key. Check the Idempotency Ledger node (Get the key) to see what the other run recorded.',
		);
	}

	function unrecorded(error: unknown, sent: number): LedgerError {
		const cause = error instanceof LedgerError ? error : null;
		const message = `${cause?.message ?? (error as Error)?.message ?? String(error)}. ${sent} message${sent === 1 ? ' was' : 's were'} sent in this batch but could not be recorded`;
		const hint =
			'Nothing will be sent twice on its own: the next run treats those steps as "may have been sent" (HTTP destinations are asked again with the same key; Slack and email are looked for at the destination where a check is set up, and otherwise go to Needs Review).';
		return error instanceof LedgerUnavailableError ? new LedgerUnavailableError(message, `${error.hint ?? ''} ${hint}`.trim(), error.code) : new LedgerError(message, hint);
	}

	function resultOf(verdict: Verdict & { status: 'completed' }): IDataObject {
		return {
			channel: config.channelName,
			sentAt: new Date().toISOString(),
			executionId,
			workflowId,
			attempts: verdict.attempts,
			response: verdict.response as IDataObject,
		};
	}

	/**
	 * An uncertain answer inside this run whose check could not answer for now: recorded like a
	 * takeover's check that could not answer (recheck.ts), as the first of "Checks Before Review".
	 */
	function checkLaterRequest(p: Prepared, verdict: Verdict & { status: 'failed_retryable' }, claim: LedgerRecord, ledgerTime: number, check?: CheckEvidence): RecordRequest {
		const pending = { checks: 1, checkAgainAtMs: verdict.retryAfterMs ? ledgerTime + verdict.retryAfterMs : null };
		const result = checkLaterResult(pending, verdict.detail, { executionId, at: new Date().toISOString(), attempts: verdict.attempts, ...(check ? { check } : {}) });
		return { ...p.row, status: 'failed_retryable', keepSending: true, fingerprint: p.fingerprint, fence: claim.fence, result };
	}

	function verdictRequest(p: Prepared, verdict: Verdict, claim: LedgerRecord, check?: CheckEvidence): RecordRequest {
		if (verdict.status === 'completed') {
			const result = check ? { ...resultOf(verdict), check } : resultOf(verdict);
			return { ...p.row, status: 'completed', externalId: verdict.externalId, result, fingerprint: p.fingerprint, fence: claim.fence };
		}
		return {
			...p.row,
			status: verdict.status,
			fingerprint: p.fingerprint,
			fence: claim.fence,
			result: {
				reason: verdict.reason,
				detail: verdict.detail,
				response: verdict.response,
				attempts: verdict.attempts,
				executionId,
				at: new Date().toISOString(),
				...(check ? { check } : {}),
			},
		};
	}

	/**
	 * The unit of work's row, with the authority of the claim the item carries (the gate's), when
	 * known: refused once another run took that claim over. The step's own record carries only the
	 * step's fence: what this run sent under its own claim of the step is recorded even if the unit
	 * moved on meanwhile, or the knowledge that it went out would be lost.
	 */
	function unitRequest(p: Prepared, externalId: string | null, result: unknown): RecordRequest {
		return { namespace: p.row.namespace, key: p.row.key, step: UNIT_STEP, status: 'completed', externalId, result, ...authorityFor(p.unit, UNIT_STEP) };
	}

	function routeVerdict(p: Prepared, verdict: Verdict, record: LedgerRecord | null, resend: boolean, unitLost: boolean, check?: CheckEvidence) {
		const described = { ...(adapter.describe?.(p.message) ?? {}), ...(check ? { check } : {}) };
		const warn = unitLost
			? { unitRecorded: false, warning: 'Another run took over the unit of work, so it was not marked completed here; that run records it' }
			: {};
		if (verdict.status === 'completed') {
			const confirmed =
				verdict.check?.outcome === 'found'
					? { detail: 'The answer to the send left it unknown whether it arrived (a timeout, a dropped connection or a server error); the destination confirms the message arrived, so it was recorded as sent and not sent again' }
					: {};
			route(p.index, SENT, facts('sent', p.row, record, {
				status: 'completed',
				externalId: verdict.externalId,
				attempts: verdict.attempts,
				response: verdict.response as IDataObject,
				resent: resend,
				...confirmed,
				...described,
				...warn,
			}));
			return;
		}
		if (verdict.status === 'failed_retryable' && verdict.reason === 'check_later') {
			const at = (record?.result as IDataObject | null)?.checkAgainAt ?? null;
			route(p.index, IN_PROGRESS, facts('in_progress', p.row, record, {
				reason: 'check_later',
				detail: `${verdict.detail}. Nothing more was sent; it is checked again on the next delivery${at ? ` after ${String(at)}` : ''}`,
				checks: 1,
				checkAgainAt: at,
				...described,
				...warn,
			}));
			return;
		}
		if (verdict.status === 'failed_retryable') retryLater++;
		route(p.index, REVIEW, facts('needs_review', p.row, record, {
			status: verdict.status,
			// The same word as the row's result.reason (see reasons.ts).
			reason: verdict.reason,
			detail: verdict.detail,
			attempts: verdict.attempts,
			response: (verdict.response ?? null) as IDataObject,
			...described,
			...warn,
		}));
	}

	/** Routes an item whose content differs from what the key carried before; returns the error to raise, if any. */
	function routeMismatch(p: Prepared, record: LedgerRecord | null, earlier = 'before'): LedgerInputError | null {
		const detail = `The key "${p.row.key}" was used ${earlier} with different content; this content was not sent`;
		if (config.onMismatch === 'error') {
			return new LedgerInputError(detail, 'The same key must always describe the same message. Check the key, or set "When the Content Differs" to route these items.');
		}
		if (config.onMismatch === 'skip' && record?.status === 'completed') {
			// What this item asked to send is kept with it, as evidence of the other wording.
			const attempted = adapter.describe?.(p.message) ?? null;
			route(p.index, SKIPPED, facts('skipped', p.row, record, { reason: 'mismatch', detail, ...provenance(record), attempted }));
		} else {
			route(p.index, REVIEW, facts('needs_review', p.row, record, { reason: 'mismatch', detail }));
		}
		return null;
	}

	/** A second item with the same key in one input: never sent again; it follows the first item. */
	function routeBatchDuplicate(p: Prepared, first: Prepared): LedgerInputError | null {
		if (p.fingerprint !== first.fingerprint) return routeMismatch(p, null, 'by an earlier item of this input');
		const done = routed[first.index];
		const output = done?.output === SENT || done?.output === SKIPPED ? SKIPPED : done?.output === IN_PROGRESS ? IN_PROGRESS : REVIEW;
		const outcome = output === SKIPPED ? 'skipped' : output === IN_PROGRESS ? 'in_progress' : 'needs_review';
		route(p.index, output, {
			...(done?.facts ?? facts('needs_review', p.row, null)),
			outcome,
			reason: output === SKIPPED ? 'same_key_earlier_in_input' : ((done?.facts.reason as string) ?? 'in_progress'),
			firstItem: first.index,
		});
		return null;
	}

	function collect(): INodeExecutionData[][] {
		// Not Sent and not Skipped: the send is not done, so the unit is not either (lib/n8n/openUnits.ts).
		const unsent = items.flatMap((item, index) => (routed[index]?.output === SENT || routed[index]?.output === SKIPPED ? [] : [{ index, item, unit: units[index] }]));
		leaveItemsOpen(ctx, unsent, keys.kind === 'lineage');
		if (toolCall) return toolOutputs(routed, 4);
		const outputs: INodeExecutionData[][] = [[], [], [], []];
		for (let i = 0; i < items.length; i++) {
			const r = routed[i];
			if (!r) continue;
			const item = items[i];
			if (r.error) {
				outputs[r.output].push(failedItem(node, item, i, r.error));
				continue;
			}
			outputs[r.output].push(itemWithFacts(item, i, r.facts));
		}
		return outputs;
	}
}
