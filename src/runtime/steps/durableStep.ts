/**
 * The durable step, written once for model and tool calls alike: serve the recorded frame, or
 * append `frame.started`, run the effect under its limits, and journal the failed attempt or hand
 * the result back to be recorded. Model calls and tool calls both go through it; what each records
 * and feeds back stays with its actor. The decision of what to do is pure (`planStep`,
 * src/policies/step.ts); this is the I/O that carries it out: the clock, the fenced append, the
 * effect, the timers.
 */
import { isOwnershipLostError } from "../../core/errors.ts";
import type { AttemptError, NewEntry } from "../../events/types.ts";
import type { RetryPolicy } from "../../policies/retry.ts";
import { planStep, type StepSpec } from "../../policies/step.ts";
import type { FrameState } from "../../projections/runState.ts";
import type { StepStop } from "../base/runStop.ts";
import { nextAttempt, timeoutError, waitUntil, withLimits } from "./failurePolicy.ts";
import type { RunSession } from "./session.ts";

/** What one effect needs to be a durable step. */
export interface StepEffect<T, R> {
  /** Serves the recorded outcome: no effect runs. */
  serve(frame: FrameState): R | Promise<R>;
  /**
   * Journals the step's `frame.started` and resolves once the effect may run (a tool call: in its
   * response's call order). Absent: appended at once (for a model call, written is enough).
   */
  start?(started: NewEntry): Promise<void>;
  /** Runs attempt `attempt` (1-based, over the journal) of the effect; `stop.signal` is its AbortSignal. */
  execute(stop: StepStop, attempt: number): T | Promise<T>;
  /** Journals a successful attempt's value (appended, or deferred to the next append) and gives the step's value. */
  record(value: T): R | Promise<R>;
  /** How a thrown error reads as an attempt's failure (`attemptError`, `toolAttemptError`). */
  classify(error: unknown, now: number): AttemptError;
  /** The retry policy (a function: a served step needs none). */
  policy(): RetryPolicy;
  /** The attempt's time limit, when it has one. */
  readonly timeoutMs: number | undefined;
  /** What the step is, for a timeout's message (`model call <frame id>`, `<tool> (step <id>)`). */
  readonly describe: string;
  /**
   * What stops the attempt (the run's signal, and the invoking actor). A function: linking them
   * costs, and a served step needs none.
   */
  stop(): StepStop;
}

/** How a durable step ended. */
export type StepResult<R> =
  /** The recorded outcome (`served`), or the new one just recorded. */
  | { readonly kind: "done"; readonly value: R; readonly served: boolean }
  /** The attempt failed and another is due after `delayMs` (its `attempt.failed` is journaled). */
  | { readonly kind: "retry"; readonly attempt: number; readonly delayMs: number }
  /**
   * The attempt failed and none follows. `record` is its `attempt.failed`, not yet journaled: the
   * caller journals it with what it makes of the failure. `thrown` is what the effect threw.
   */
  | {
      readonly kind: "gave-up";
      readonly attempt: number;
      readonly error: AttemptError;
      readonly record: NewEntry;
      readonly thrown: unknown;
      readonly timedOut: boolean;
    }
  /** Started before, outcome unknown, and the step must not run twice. */
  | { readonly kind: "outcome-unknown" }
  /** The run's deadline passed; `started` when this attempt's `frame.started` is journaled. */
  | { readonly kind: "past-deadline"; readonly started: boolean }
  /** Stopped by its signal (an abort, the run lost): the outcome is unknown and nothing more is journaled. */
  | { readonly kind: "aborted" };

/**
 * Takes one durable step: `planStep` decides; recorded frames are served, a diverging journal
 * raises `ReplayDivergenceError`, and otherwise the fenced `frame.started` proves this process
 * still owns the run, and its lease, checked by the local clock (renewed first when it may have
 * lapsed: `HeldLease.confirm`), that it still does when the effect starts.
 *
 * @example
 * const result = await durableStep(session, { frameId, effect: "model", inputDigest, onUnknownOutcome: "rerun" }, effect);
 * if (result.kind === "retry") return { ok: false, retry: { attempt: result.attempt, delayMs: result.delayMs } };
 */
export async function durableStep<T, R>(
  session: RunSession,
  step: StepSpec,
  effect: StepEffect<T, R>,
): Promise<StepResult<R>> {
  const deadlineAt = session.deadlineAt;
  const plan = planStep(session.state, step, Date.now(), deadlineAt);
  switch (plan.kind) {
    case "diverged":
      throw session.divergence(step.frameId, plan.what);
    case "recorded": {
      const served = effect.serve(plan.frame);
      return { kind: "done", value: served instanceof Promise ? await served : served, served: true };
    }
    case "outcome-unknown":
      return plan;
    case "past-deadline":
      return { kind: "past-deadline", started: false };
    case "waiting":
      // Resumed during a back-off (or woken early): wait what remains of it, as journaled.
      return { kind: "retry", attempt: plan.attempt, delayMs: waitUntil(plan.retryAt, Date.now(), deadlineAt) };
  }
  const stop = effect.stop();
  if (stop.aborted) return { kind: "aborted" };
  const { attempt, spent } = plan;
  const { frameId, effect: kind, inputDigest } = step;
  // A model call changes nothing outside the run: it may start once its frame.started is written,
  // while the store flushes it; a tool waits until its start is durable (the write-ahead rule).
  const started: NewEntry = { type: "frame.started", data: { frameId, effect: kind, inputDigest } };
  await (effect.start !== undefined
    ? effect.start(started)
    : kind === "model"
      ? session.appender.appendWritten(started)
      : session.appender.append(started));
  // The append proved the run ours when it ran; a process paused since may have lost it: by the
  // local clock, the lease must still hold, or a fenced renewal prove it does, before the effect.
  const confirming = session.lease?.confirm(frameId);
  if (confirming !== undefined) await confirmed(session, confirming, stop);
  const result = await withLimits(stop, effect.timeoutMs, deadlineAt, (s) => effect.execute(s, attempt));
  session.releaseStepStop(stop); // still running only if stopped, and then it has aborted
  if ("error" in result) {
    if (stop.aborted) return { kind: "aborted" };
    if (result.stopped === "deadline") return { kind: "past-deadline", started: true };
    const failedAt = Date.now();
    const timedOut = result.stopped === "timeout";
    const error = timedOut
      ? timeoutError(effect.describe, effect.timeoutMs as number)
      : effect.classify(result.error, failedAt); // never throws, whatever the effect threw
    const decision = nextAttempt(effect.policy(), attempt, spent, error, failedAt);
    const retryAt = decision.retry ? decision.retryAt : null;
    const record: NewEntry = { type: "attempt.failed", data: { frameId, attempt, error, retryAt } };
    if (!decision.retry) return { kind: "gave-up", attempt, error, record, thrown: result.error, timedOut };
    await session.appender.append(record);
    return { kind: "retry", attempt, delayMs: waitUntil(decision.retryAt, Date.now(), deadlineAt) };
  }
  if (stop.aborted) return { kind: "aborted" };
  const recorded = effect.record(result.value); // a model's response is recorded at once: no promise to wait
  return { kind: "done", value: recorded instanceof Promise ? await recorded : recorded, served: false };
}

/**
 * Waits for the lease's renewal before an effect. Refused (the run was taken over, or the lease
 * could not be confirmed), the run gives up as when an append is refused: nothing more is appended
 * and the error is the run's.
 */
async function confirmed(session: RunSession, confirming: Promise<void>, stop: StepStop): Promise<void> {
  try {
    await confirming;
  } catch (e) {
    session.releaseStepStop(stop);
    if (isOwnershipLostError(e)) session.appender.lost(e);
    throw e;
  }
}
