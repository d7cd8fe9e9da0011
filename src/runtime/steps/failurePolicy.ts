/**
 * The runtime side of the failure policy: the policies a loop resolves to, time
 * limits on an effect, and the run's journaled deadline. The decisions themselves are pure
 * (src/policies/retry.ts); here is the clock, the randomness and the timers.
 */
import { errorCause } from "../../events/errorCause.ts";
import { DECISION_SOURCES, deadlineId } from "../../events/ids.ts";
import type { AttemptError, ErrorCause, NewEntry } from "../../events/types.ts";
import {
  attemptError,
  DEFAULT_MODEL_RETRY,
  DEFAULT_TOOL_RETRY,
  decideRetry,
  type RetryDecision,
  type RetryPolicy,
} from "../../policies/retry.ts";
import type { RunState } from "../../projections/runState.ts";
import type { AgentLoopConfig, Tool } from "../base/config.ts";
import { StepStop } from "../base/runStop.ts";

/** The loop's model policy: its `retry.model` over the defaults. */
export function modelPolicy(config: AgentLoopConfig): RetryPolicy {
  return { ...DEFAULT_MODEL_RETRY, ...config.retry?.model };
}

/** A tool's policy: its own `retry`, over the loop's `retry.tools`, over the defaults. */
export function toolPolicy(config: AgentLoopConfig, tool: Tool): RetryPolicy {
  return { ...DEFAULT_TOOL_RETRY, ...config.retry?.tools, ...tool.retry };
}

/**
 * The run's deadline (ms since the epoch) as journaled, and the decision to append when the
 * loop has `timeouts.runMs` and the run has none yet (at its start, or a run started before).
 */
export function runDeadline(
  config: AgentLoopConfig,
  state: RunState,
  now: number,
): { readonly deadlineAt: number | undefined; readonly append: NewEntry[] } {
  const recorded = state.decisions[deadlineId(config.id)]?.choice as { deadlineAt?: unknown } | undefined;
  if (typeof recorded?.deadlineAt === "number") return { deadlineAt: recorded.deadlineAt, append: [] };
  const runMs = config.timeouts?.runMs;
  if (runMs === undefined) return { deadlineAt: undefined, append: [] };
  const deadlineAt = now + runMs;
  const decision: NewEntry = {
    type: "decision.recorded",
    data: { decisionId: deadlineId(config.id), source: DECISION_SOURCES.deadline, choice: { deadlineAt, runMs } },
  };
  return { deadlineAt, append: [decision] };
}

/** What an effect that passed its time limit failed with. */
export function timeoutError(what: string, ms: number): AttemptError {
  return { name: "TimeoutError", message: `${what} did not answer within ${ms} ms`, retryable: true };
}

/**
 * What a tool's throw says about itself: as a model error's (`attemptError`), except that a plain
 * throw with no status and no `isRetryable` is retryable (whether to retry a tool is its policy's
 * choice: by default it has one attempt).
 */
export function toolAttemptError(error: unknown, now: number): AttemptError {
  const read = attemptError(error, now);
  if (read.status === undefined && errorCause(error).retryable === undefined) return { ...read, retryable: true };
  return read;
}

/** The cause `run.interrupted` keeps of a failed attempt (its error without the server's wait). */
export function causeOf(error: AttemptError): ErrorCause {
  const { retryAfterMs: _wait, ...cause } = error;
  return cause;
}

/**
 * Decides the next attempt of a failed one: `attempt` counts over the journal, `spent` the
 * attempts a resume after a `model-error` no longer counts.
 */
export function nextAttempt(
  policy: RetryPolicy,
  attempt: number,
  spent: number,
  error: AttemptError,
  now: number,
): RetryDecision {
  return decideRetry(policy, { attempt: attempt - spent, error, now, random: Math.random() });
}

/** The wait until `at`, from `now`, never more than until `deadlineAt` (the deadline is then checked). */
export function waitUntil(at: number, now: number, deadlineAt: number | undefined): number {
  const until = deadlineAt === undefined ? at : Math.min(at, deadlineAt);
  return Math.max(0, until - now);
}

/** Which of the limits stopped an effect. */
export type Stopped = "timeout" | "deadline" | undefined;

/** What {@link withLimits} gives: the effect's value, or what it failed with and which limit (if one) stopped it. */
export type Limited<T> = { readonly value: T } | { readonly error: unknown; readonly stopped: Stopped };

/**
 * Runs `effect` with `stop` (a step's, or an AbortSignal) plus a timer of `timeoutMs` and one
 * until `deadlineAt`: when one fires the effect's stop aborts and the call stops waiting for it
 * (an effect that ignores its signal is left behind, its answer dropped). `stopped` tells which
 * limit fired. The effect's AbortSignal (`stop.signal`) is made only if it reads it.
 */
export function withLimits<T>(
  given: StepStop | AbortSignal,
  timeoutMs: number | undefined,
  deadlineAt: number | undefined,
  effect: (stop: StepStop) => T | Promise<T>,
): Promise<Limited<T>> {
  const stop = given instanceof StepStop ? given : StepStop.following(given);
  let stopped: Stopped;
  let timers: NodeJS.Timeout[] | undefined;
  let combined = stop;
  let unlink: (() => void) | undefined;
  if (timeoutMs !== undefined || deadlineAt !== undefined) {
    // Only a limit needs a stop of its own: most effects have none. It aborts with whichever comes first.
    const limited = new StepStop();
    const limit = (why: Stopped) => () => {
      stopped ??= why;
      limited.abort(new DOMException(`the ${why} passed`, "TimeoutError"));
    };
    timers = [];
    if (timeoutMs !== undefined) timers.push(setTimeout(limit("timeout"), timeoutMs));
    if (deadlineAt !== undefined) timers.push(setTimeout(limit("deadline"), Math.max(0, deadlineAt - Date.now())));
    if (stop.aborted) limited.abort(stop.reason);
    else unlink = stop.onAbort(() => limited.abort(stop.reason));
    combined = limited;
  }
  // One promise, settled by the effect or by the abort, whichever comes first (not an async
  // function around a race: its frame and the promises between cost a step more than the rest of
  // this); the effect still starts a microtask later, its listener set.
  return new Promise<Limited<T>>((settle) => {
    const race = new Race<T>(settle, combined, timers, unlink);
    // Not a named closure (tsx names each one it makes, at a cost, as the bench runs it).
    race.onAbort = () => race.end({ error: combined.reason, stopped });
    if (combined.aborted) race.onAbort();
    else combined.watch(race.onAbort);
    // effect(combined), a microtask later; left behind after a limit, its late answer settles nothing.
    Promise.resolve(combined)
      .then(effect)
      .then(
        (value) => race.end({ value }),
        (error: unknown) => race.end({ error, stopped }),
      );
  });
}

/** One {@link withLimits} race: settled once, by the effect or by the abort; then its timers and listeners go. */
class Race<T> {
  private done = false;
  /** The stop's listener. */
  onAbort: () => void = noop;

  constructor(
    private readonly settle: (result: Limited<T>) => void,
    private readonly combined: StepStop,
    private readonly timers: NodeJS.Timeout[] | undefined,
    private readonly unlink: (() => void) | undefined,
  ) {}

  end(result: Limited<T>): void {
    if (this.done) return;
    this.done = true;
    if (this.timers !== undefined) for (const t of this.timers) clearTimeout(t);
    this.combined.unwatch(this.onAbort);
    this.unlink?.();
    this.settle(result);
  }
}

function noop(): void {}
