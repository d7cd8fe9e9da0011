import { assign, fromPromise, sendParent, setup } from "xstate";
import type { ToolCall } from "../events/types.ts";

/** What each `toolCallMachine` child is started with: one call of one model response. */
export interface ToolCallInput {
  readonly runId: string;
  readonly turn: number;
  readonly index: number;
  readonly stepId: string;
  readonly call: ToolCall;
  /**
   * The end (exclusive) of the batch of calls dispatched with this one: its tool runs once every
   * call before it has journaled its start. Absent: the call's own index + 1.
   */
  readonly batchEnd?: number;
}

/** `checkCall`: served from the journal, refused (journaled as call.settled), or cleared to run. */
export type CheckOutput =
  | { readonly kind: "settled"; readonly status: "ok" | "error" }
  | { readonly kind: "needs-approval" }
  | { readonly kind: "run" };

/** `askApproval`: the decision, journaled by the actor (a decline also settles the call). */
export type ApprovalOutput =
  | { readonly kind: "approved" }
  | { readonly kind: "declined" }
  | { readonly kind: "pending" };

/**
 * `runTool`: the call settled (its frame completed, or failed and fed back as an error), or an
 * attempt failed and its retry policy tries again after `delayMs` (journaled as `attempt.failed`).
 */
export type RunToolOutput =
  | { readonly status: "ok" | "error" }
  | { readonly status: "retry"; readonly attempt: number; readonly delayMs: number }
  /** The tool (a sub-agent) waits for an approval: the call is pending, its frame left started. */
  | { readonly status: "pending" }
  /** The tool waits for a time or an event (its `<stepId>:wait` is journaled): its frame left started. */
  | { readonly status: "waiting" };

export interface ToolCallContext extends ToolCallInput {
  status: "ok" | "error" | undefined;
  /** The wait before the next attempt, while `backingOff`. */
  delayMs: number;
}

/** Events a call sends its parent loop. */
export type ToolCallParentEvent =
  | { readonly type: "CALL.SETTLED"; readonly index: number; readonly status: "ok" | "error" }
  | { readonly type: "CALL.PENDING"; readonly index: number; readonly stepId: string }
  | { readonly type: "CALL.WAITING"; readonly index: number; readonly stepId: string }
  | { readonly type: "CALL.FAILED"; readonly index: number; readonly error: unknown };

/**
 * One tool call of a model response: validating → awaiting approval → running (⇄ backingOff
 * between failed attempts) → settled, or waiting (for a time or an event: docs/waits.md). The loop spawns it for a call that can wait (an approval, a
 * retry); a call that cannot takes only validating → running → settled, run by the loop's
 * `plainCalls` actor, which reports it with the same events.
 * Every effect (journal reads and appends, the approval callback, the tool) is an invoked
 * actor the runtime provides; the machine only decides. The actors named here are
 * placeholders that the runtime replaces with `machine.provide({ actors })`.
 */
export const toolCallMachine = setup({
  types: {
    context: {} as ToolCallContext,
    input: {} as ToolCallInput,
  },
  actors: {
    checkCall: fromPromise<CheckOutput, ToolCallInput>(async () => ({ kind: "run" })),
    askApproval: fromPromise<ApprovalOutput, ToolCallInput>(async () => ({ kind: "pending" })),
    runTool: fromPromise<RunToolOutput, ToolCallInput>(async () => ({ status: "ok" })),
  },
  delays: {
    // Computed by the runtime from the journaled retryAt and its clock.
    backoff: ({ context }) => context.delayMs,
  },
  actions: {
    reportSettled: sendParent(
      ({ context }): ToolCallParentEvent => ({
        type: "CALL.SETTLED",
        index: context.index,
        status: context.status ?? "error",
      }),
    ),
    reportPending: sendParent(
      ({ context }): ToolCallParentEvent => ({ type: "CALL.PENDING", index: context.index, stepId: context.stepId }),
    ),
    reportWaiting: sendParent(
      ({ context }): ToolCallParentEvent => ({ type: "CALL.WAITING", index: context.index, stepId: context.stepId }),
    ),
    reportFailed: sendParent(
      ({ context, event }): ToolCallParentEvent => ({
        type: "CALL.FAILED",
        index: context.index,
        error: (event as { error?: unknown }).error,
      }),
    ),
  },
}).createMachine({
  id: "toolCall",
  context: ({ input }) => ({ ...input, status: undefined, delayMs: 0 }),
  initial: "validating",
  states: {
    validating: {
      invoke: {
        id: "checkCall",
        src: "checkCall",
        input: ({ context }) => context,
        onDone: [
          {
            guard: ({ event }) => event.output.kind === "settled",
            target: "settled",
            actions: assign({
              status: ({ event }) => (event.output.kind === "settled" ? event.output.status : undefined),
            }),
          },
          { guard: ({ event }) => event.output.kind === "needs-approval", target: "awaitingApproval" },
          { target: "running" },
        ],
        onError: { target: "failed" },
      },
    },
    awaitingApproval: {
      invoke: {
        id: "askApproval",
        src: "askApproval",
        input: ({ context }) => context,
        onDone: [
          { guard: ({ event }) => event.output.kind === "approved", target: "running" },
          {
            guard: ({ event }) => event.output.kind === "declined",
            target: "settled",
            actions: assign({ status: "error" }),
          },
          { target: "pending" },
        ],
        onError: { target: "failed" },
      },
    },
    running: {
      invoke: {
        id: "runTool",
        src: "runTool",
        input: ({ context }) => context,
        onDone: [
          {
            guard: ({ event }) => event.output.status === "retry",
            target: "backingOff",
            actions: assign({ delayMs: ({ event }) => (event.output.status === "retry" ? event.output.delayMs : 0) }),
          },
          { guard: ({ event }) => event.output.status === "pending", target: "pending" },
          { guard: ({ event }) => event.output.status === "waiting", target: "waiting" },
          {
            target: "settled",
            actions: assign({ status: ({ event }) => (event.output.status === "ok" ? "ok" : "error") }),
          },
        ],
        onError: { target: "failed" },
      },
    },
    // A failed attempt waits here before the next one (stopping the call stops the wait).
    backingOff: { after: { backoff: { target: "running" } } },
    settled: { type: "final", entry: "reportSettled" },
    pending: { type: "final", entry: "reportPending" },
    // The tool waits for a time or an event (journaled as `<stepId>:wait`); a resume runs the call again.
    waiting: { type: "final", entry: "reportWaiting" },
    // Not final: the loop stops on CALL.FAILED and stops this call with it; a final state would
    // also send the loop a done event after it has stopped.
    failed: { entry: "reportFailed" },
  },
});
