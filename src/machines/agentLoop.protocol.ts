/**
 * What the agent loop's chart and the actors that do its work tell each other: what each actor
 * reports (`prepare`'s output, the model call's events), what the chart tells its long-lived
 * actors (`MODEL.CALL`, `CALLS.RUN`), how a run ends (`Ending`, journaled by the `end` actor) and
 * the events that stop it from outside. The chart (agentLoop.machine.ts) decides on these; the
 * runtime's actors (src/runtime/steps) make and read them.
 */
import type { ErrorCause, InterruptReason, ModelResponse } from "../events/types.ts";
import type { ToolCallInput, ToolCallParentEvent } from "./toolCall.machine.ts";

/**
 * `prepare`: the journal folded, the config checked against it, the mode pinned, the run started
 * (or the conversation of a recorded run restored). The chart then walks the run from turn 0: a
 * resumed run's recorded steps are served from the journal by the same actors that run new ones.
 */
export type PrepareOutput =
  | { readonly kind: "completed" }
  /**
   * `turn`: the turn the chart starts from, when not 0 (a compact resume: the turns before it are
   * not walked again; the runtime restored the conversation up to it).
   */
  | { readonly kind: "ready"; readonly turn?: number }
  /** The journal already ends the run with `run.cancelled`: the run ends so again, appending nothing. */
  | { readonly kind: "cancelled"; readonly reason: string }
  /** The journal already ends the run with `run.failed`: the run reports `error` again, appending nothing. */
  | { readonly kind: "failed"; readonly error: unknown };

export type CallModelOutput =
  | {
      readonly ok: true;
      readonly response: ModelResponse;
      /** The response was served from the journal with every one of its calls settled there too. */
      readonly settled?: boolean;
      /**
       * The calls (indices, ascending) that can wait (for an approval, or between attempts): each
       * runs as a `toolCall` child chart. Every other call is run by the `plainCalls` actor. None when absent.
       */
      readonly charted?: readonly number[];
    }
  | {
      readonly ok: false;
      readonly reason: InterruptReason;
      readonly detail: unknown;
      readonly cause?: ErrorCause;
      readonly retry?: undefined;
    }
  /** The attempt failed and the failure policy tries again after `delayMs` (journaled as `attempt.failed`). */
  | { readonly ok: false; readonly retry: Backoff };

/** A wait before the next attempt of a failed call: the delay the runtime computed from the journaled `retryAt`. */
export interface Backoff {
  /** The attempt that failed (1-based). */
  readonly attempt: number;
  readonly delayMs: number;
}

/** Why the run is stopping, as `run.interrupted` will record it. */
export interface Interruption {
  readonly reason: InterruptReason;
  readonly detail: unknown;
  /** The model's error, for a `model-error`. */
  readonly cause?: ErrorCause;
}

/**
 * How a run ends, as the chart's one `end` actor journals it: `run.completed`, `run.interrupted`
 * (with its reason, whatever the reason is), `run.cancelled` or `run.failed` (the actor decides
 * whether a failure is the run's for good: see the runtime's `failedEntry`). A run whose ownership
 * was lost has no ending entry: it no longer owns the run.
 *
 * @example
 * const ending: Ending = { kind: "interrupted", turn: 3, reason: "approval-pending", detail: { stepIds }, pending: stepIds, waiting: [] };
 */
export type Ending =
  | { readonly kind: "completed"; readonly turn: number; readonly content: string }
  | (Interruption & {
      readonly kind: "interrupted";
      readonly turn: number;
      /** Calls waiting for an approval (an `approval-pending` interruption). */
      readonly pending: readonly string[];
      /** Calls waiting for a time or an event (a `waiting` interruption; docs/waits.md). */
      readonly waiting: readonly string[];
    })
  | { readonly kind: "cancelled"; readonly reason: string }
  | { readonly kind: "failed"; readonly error: unknown };

/** What the `modelCalls` actor reports of the model call it was told to make. */
export type ModelCallEvent =
  | { readonly type: "MODEL.DONE"; readonly output: CallModelOutput }
  /** The call threw (its durable step could not journal, the journal diverged): the run fails. */
  | { readonly type: "MODEL.FAILED"; readonly error: unknown };

/**
 * How the run is told that it must end from outside: `ABORT` (the caller's signal: the run
 * interrupts, `aborted`), `CANCEL` (control: a cancel request, read at hold time, by a renewal, or
 * refused by the fence; the run ends `cancelled`), `LOST` (the fence: another owner has the run;
 * it ends `lost` at once, appending nothing).
 *
 * @example
 * actor.send({ type: "CANCEL", reason: "operator stop" } satisfies StopEvent); // the run ends cancelled
 */
export type StopEvent =
  | { readonly type: "ABORT"; readonly reason?: unknown }
  | { readonly type: "CANCEL"; readonly reason: string; readonly error?: unknown }
  | { readonly type: "LOST"; readonly error: unknown };

export type AgentLoopEvent = ToolCallParentEvent | ModelCallEvent | StopEvent;

/**
 * What the loop tells its `modelCalls` actor: call the model for this turn (it reports back with
 * `MODEL.DONE` or `MODEL.FAILED`). Stopped (the loop leaves `running`), the call in flight is stopped too.
 */
export type ModelCallsEvent = { readonly type: "MODEL.CALL"; readonly turn: number };

/**
 * What the loop tells its `plainCalls` actor: run these calls (each reports back as a toolCall
 * chart does, with `CALL.SETTLED`, `CALL.PENDING` or `CALL.FAILED`), or stop those still running.
 */
export type PlainCallsEvent =
  | { readonly type: "CALLS.RUN"; readonly calls: readonly ToolCallInput[] }
  | { readonly type: "CALLS.STOP" };
