import { assign, enqueueActions, fromCallback, fromPromise, sendTo, setup } from "xstate";
import { toolStepId } from "../events/ids.ts";
import type { ModelResponse, ToolCall } from "../events/types.ts";
import type {
  AgentLoopEvent,
  Backoff,
  CallModelOutput,
  Ending,
  Interruption,
  ModelCallsEvent,
  PlainCallsEvent,
  PrepareOutput,
} from "./agentLoop.protocol.ts";
import { type ToolCallInput, toolCallMachine } from "./toolCall.machine.ts";

// The chart's protocol, importable from here too.
export type {
  AgentLoopEvent,
  Backoff,
  CallModelOutput,
  Ending,
  Interruption,
  ModelCallEvent,
  ModelCallsEvent,
  PlainCallsEvent,
  PrepareOutput,
  StopEvent,
} from "./agentLoop.protocol.ts";

/** What `agentLoopMachine` is started with (`createActor(machine, { input })`). */
export interface AgentLoopInput {
  readonly runId: string;
  readonly loopId: string;
  readonly maxIterations: number;
  /** How many calls of one response run at a time (default 128). */
  readonly callBatch?: number;
}

/**
 * The calls of one response are dispatched in batches of this many: the next batch once every
 * call of the current one ended. xstate copies a machine's children on every spawn and stop, so
 * a child per call for a whole response of n calls would cost O(n²); a batch keeps it O(n).
 */
export const CALL_BATCH = 128;

/** `agentLoopMachine`'s context: where the loop is (turn, open and pending calls). */
export interface AgentLoopContext {
  readonly runId: string;
  readonly loopId: string;
  readonly maxIterations: number;
  /** The turn being worked on: the index of its model call. */
  turn: number;
  response: ModelResponse | undefined;
  /** The calls of the response dispatched as a `toolCall` chart (see `CallModelOutput`). */
  charted: readonly number[] | undefined;
  readonly callBatch: number;
  /** Calls of the current batch still running. */
  open: number;
  /** The current batch: calls [batchStart, dispatched) of the response. */
  batchStart: number;
  dispatched: number;
  /** Step ids of calls waiting for an approval. */
  pending: string[];
  /** Step ids of calls waiting for a time or an event (docs/waits.md). */
  waiting: string[];
  interrupt: Interruption | undefined;
  /** The wait before the model is called again, while `running.backingOff`. */
  backoff: Backoff | undefined;
  error: unknown;
  /** A cancel the run was told of (`CANCEL`): it ends `cancelled` once what it is doing lets it. */
  cancel: { readonly reason: string; readonly error?: unknown } | undefined;
  /** The ownership the run lost (`LOST`): it ends `lost`, appending nothing. */
  lost: unknown;
}

const hasCalls = (r: ModelResponse | undefined) => (r?.toolCalls.length ?? 0) > 0;

/** Whether `index` is in `sorted` (ascending): a response of thousands of charted calls must not cost n². */
const listed = (sorted: readonly number[] | undefined, index: number): boolean => {
  if (sorted === undefined) return false;
  let low = 0;
  let high = sorted.length - 1;
  while (low <= high) {
    const middle = (low + high) >>> 1;
    const value = sorted[middle] as number;
    if (value === index) return true;
    if (value < index) low = middle + 1;
    else high = middle - 1;
  }
  return false;
};
const callCount = (context: AgentLoopContext) => context.response?.toolCalls.length ?? 0;

/** The batch after the calls dispatched so far: up to `callBatch` more of the response's `count`. */
const nextBatchOf = (context: AgentLoopContext, count: number) => {
  const dispatched = Math.min(count, context.dispatched + context.callBatch);
  return { batchStart: context.dispatched, dispatched, open: dispatched - context.dispatched };
};

/**
 * The fence refused an append or a renewal found the run taken over: whatever the run was doing
 * stops (with the state it runs in, its actors), and nothing more is journaled.
 */
const LOST_ENDS = { target: "#agentLoop.lost", actions: "noteLost" } as const;

/**
 * The agent loop: model → tool calls (one child actor each, run concurrently) → results back →
 * repeat. It decides; the runtime's actors (`prepare`, `modelCalls`, `toolCall`'s actors,
 * `plainCalls`, `end`) do the journaled work. Resuming a run is running this chart again from
 * the start: every step the journal recorded is served by the durable step instead of run, so live
 * and resumed runs take the same path. xstate's persisted snapshots are never used.
 *
 * It owns every ending: the final states `completed`, `interrupted`, `cancelled`, `failed` and
 * `lost`, each but `lost` journaled by the one `end` actor (see {@link Ending}), reached by the
 * chart's own decisions or by a {@link StopEvent} from outside; the runtime maps the final state to
 * what `loop.run` returns or throws.
 */
export const agentLoopMachine = setup({
  types: {
    context: {} as AgentLoopContext,
    input: {} as AgentLoopInput,
    events: {} as AgentLoopEvent,
  },
  actors: {
    prepare: fromPromise<PrepareOutput, { runId: string }>(async () => ({ kind: "ready" })),
    // Makes the model call of each turn, for the whole run: one actor, not one a turn (see callingModel).
    modelCalls: fromCallback<ModelCallsEvent, { runId: string }>(({ receive, sendBack }) => {
      receive(() => {
        queueMicrotask(() => sendBack({ type: "MODEL.DONE", output: { ok: true, response: { toolCalls: [] } } }));
      });
    }),
    toolCall: toolCallMachine,
    // Runs the calls that cannot wait, for the whole run: one actor, not one a call (see dispatchCalls).
    plainCalls: fromCallback<PlainCallsEvent, { runId: string }>(({ receive, sendBack }) => {
      receive((event) => {
        if (event.type !== "CALLS.RUN") return;
        for (const { index } of event.calls)
          queueMicrotask(() => sendBack({ type: "CALL.SETTLED", index, status: "ok" }));
      });
    }),
    // Appends the run's ending entry: the one actor that does (whichever way the run ends).
    end: fromPromise<void, Ending>(async () => {}),
  },
  delays: {
    // Computed by the runtime from the journaled retryAt and its clock: the chart only waits it.
    backoff: ({ context }) => context.backoff?.delayMs ?? 0,
  },
  guards: {
    // The failure policy decided (pure, in src/policies/retry.ts) to try the model again.
    willRetry: ({ event }) => {
      const output = (event as { output?: CallModelOutput }).output;
      return output !== undefined && !output.ok && output.retry !== undefined;
    },
    // The model call served a recorded response whose every call the journal settled.
    turnSettled: ({ event }) => {
      const output = (event as { output?: CallModelOutput }).output;
      return output?.ok === true && output.settled === true && hasCalls(output.response);
    },
    withinLimit: ({ context }) => context.turn < context.maxIterations,
    // The call that settles is the response's last one open, and none waits (an approval, a time, an event): the turn ended.
    lastSettled: ({ context }) =>
      context.open === 1 &&
      context.pending.length === 0 &&
      context.waiting.length === 0 &&
      context.dispatched >= callCount(context),
    // As lastSettled, and the next turn is within maxIterations (withinLimit once nextTurn has counted it).
    lastSettledNextWithinLimit: ({ context }) =>
      context.open === 1 &&
      context.pending.length === 0 &&
      context.waiting.length === 0 &&
      context.dispatched >= callCount(context) &&
      context.turn + 1 < context.maxIterations,
    // The current batch ended and the response has calls not dispatched yet.
    batchEnded: ({ context }) => context.open === 0 && context.dispatched < callCount(context),
    // A cancel came while the run could not stop at once (preparing, journaling an ending).
    cancelNoted: ({ context }) => context.cancel !== undefined,
  },
  actions: {
    // A toolCall child chart for each call of the current batch that can wait; the others to the
    // plainCalls actor, in one event (an actor a call cost more than the instant call itself).
    dispatchCalls: enqueueActions(({ context, enqueue }) => {
      const calls = context.response?.toolCalls ?? [];
      let plain: ToolCallInput[] | undefined;
      for (let index = context.batchStart; index < context.dispatched; index++) {
        const stepId = toolStepId(context.loopId, context.turn, index);
        const call = calls[index] as ToolCall;
        const input = { runId: context.runId, turn: context.turn, index, stepId, call, batchEnd: context.dispatched };
        if (listed(context.charted, index)) enqueue.spawnChild("toolCall", { id: `call:${index}`, input });
        else (plain ??= []).push(input);
      }
      if (plain !== undefined) enqueue.sendTo("plainCalls", { type: "CALLS.RUN", calls: plain });
    }),
    // Leaving a batch stops its toolCall charts; leaving it early (an abort, a failed call), its
    // plain calls still open too: their signals abort and they append nothing more.
    stopCalls: enqueueActions(({ context, event, enqueue }) => {
      // The turn's last call settling leaves through here without being counted down: it is not open.
      const open = context.open - (event.type === "CALL.SETTLED" ? 1 : 0);
      let plain = false;
      for (let index = context.batchStart; index < context.dispatched; index++) {
        if (listed(context.charted, index)) enqueue.stopChild(`call:${index}`);
        else plain = true;
      }
      if (plain && open > 0) enqueue.sendTo("plainCalls", { type: "CALLS.STOP" });
    }),
    // The calls after those dispatched so far, up to a batch (the first batch comes with the response).
    nextBatch: assign(({ context }) => nextBatchOf(context, callCount(context))),
    // The run fails with this error: an actor's error event, MODEL.FAILED or CALL.FAILED.
    recordError: assign({ error: ({ event }) => (event as { error?: unknown }).error }),
    noteLost: assign({ lost: ({ event }) => (event.type === "LOST" ? event.error : undefined) }),
    // prepare's done event: a compact resume starts at the turn it restored, not at 0.
    startTurn: assign(({ context, event }) => {
      const output = (event as { output?: PrepareOutput }).output;
      return { turn: output?.kind === "ready" && output.turn !== undefined ? output.turn : context.turn };
    }),
    // The first cancel wins (its reason is the one journaled).
    noteCancel: assign({
      cancel: ({ context, event }) =>
        context.cancel ?? (event.type === "CANCEL" ? { reason: event.reason, error: event.error } : undefined),
    }),
    nextTurn: assign(({ context }) => ({
      turn: context.turn + 1,
      response: undefined,
      charted: undefined,
      open: 0,
      batchStart: 0,
      dispatched: 0,
      pending: [],
      waiting: [],
    })),
  },
}).createMachine({
  id: "agentLoop",
  context: ({ input }) => ({
    runId: input.runId,
    loopId: input.loopId,
    maxIterations: input.maxIterations,
    callBatch: input.callBatch ?? CALL_BATCH,
    turn: 0,
    response: undefined,
    charted: undefined,
    open: 0,
    batchStart: 0,
    dispatched: 0,
    pending: [],
    waiting: [],
    interrupt: undefined,
    backoff: undefined,
    error: undefined,
    cancel: undefined,
    lost: undefined,
  }),
  initial: "starting",
  states: {
    starting: {
      // Noted: prepare decides whether there is a run to cancel (a completed one stays completed).
      on: { CANCEL: { actions: "noteCancel" }, LOST: LOST_ENDS },
      invoke: {
        id: "prepare",
        src: "prepare",
        input: ({ context }) => ({ runId: context.runId }),
        onDone: [
          { guard: ({ event }) => event.output.kind === "completed", target: "completed" },
          {
            guard: ({ event }) => event.output.kind === "cancelled",
            target: "cancelled",
            actions: assign({
              cancel: ({ event }) => (event.output.kind === "cancelled" ? { reason: event.output.reason } : undefined),
            }),
          },
          {
            guard: ({ event }) => event.output.kind === "failed",
            target: "failed",
            actions: assign({
              error: ({ event }) => (event.output.kind === "failed" ? event.output.error : undefined),
            }),
          },
          { guard: "cancelNoted", target: "cancelling", actions: "startTurn" },
          { target: "running", actions: "startTurn" },
        ],
        onError: [
          { guard: "cancelNoted", target: "cancelling" },
          { target: "failing", actions: "recordError" },
        ],
      },
    },
    running: {
      initial: "deciding",
      // The model calls, and the calls that cannot wait, run in these two actors for as long as the run goes on.
      invoke: [
        {
          id: "modelCalls",
          src: "modelCalls",
          input: ({ context }) => ({ runId: context.runId }),
          onError: { target: "failing", actions: "recordError" },
        },
        {
          id: "plainCalls",
          src: "plainCalls",
          input: ({ context }) => ({ runId: context.runId }),
          onError: { target: "failing", actions: "recordError" },
        },
      ],
      on: {
        ABORT: {
          target: "interrupting",
          actions: assign({ interrupt: ({ event }) => ({ reason: "aborted" as const, detail: event.reason ?? null }) }),
        },
        // Leaving running stops the model call and the tool calls in flight; the run ends cancelled.
        CANCEL: { target: "cancelling", actions: "noteCancel" },
        LOST: LOST_ENDS,
      },
      states: {
        deciding: {
          always: [
            { guard: "withinLimit", target: "callingModel" },
            {
              target: "#agentLoop.interrupting",
              actions: assign({
                interrupt: ({ context }) => ({
                  reason: "max-iterations" as const,
                  detail: { maxIterations: context.maxIterations },
                }),
              }),
            },
          ],
        },
        // The model is called by the modelCalls actor, told the turn, which reports MODEL.DONE or
        // MODEL.FAILED (an actor a turn cost the loop more than the rest of its chart). Only those
        // two leave this state within running: no call is left in flight here (ABORT leaves running,
        // which stops the actor and its call).
        callingModel: {
          entry: sendTo("modelCalls", ({ context }) => ({ type: "MODEL.CALL", turn: context.turn })),
          on: {
            "MODEL.DONE": [
              {
                guard: "willRetry",
                target: "backingOff",
                actions: assign({
                  backoff: ({ event }) => (event.output.ok ? undefined : event.output.retry),
                }),
              },
              {
                guard: ({ event }) => !event.output.ok,
                target: "#agentLoop.interrupting",
                actions: assign({
                  interrupt: ({ event }): Interruption | undefined => {
                    if (event.output.ok || event.output.retry !== undefined) return undefined;
                    const { reason, detail, cause } = event.output;
                    return cause === undefined ? { reason, detail } : { reason, detail, cause };
                  },
                }),
              },
              {
                // A recorded turn whose calls all ended (a resume): on to the next turn, nothing to dispatch.
                guard: "turnSettled",
                target: "deciding",
                actions: "nextTurn",
              },
              {
                guard: ({ event }) => event.output.ok && hasCalls(event.output.response),
                target: "dispatching",
                // The response and its first batch in one assign: a snapshot fewer a turn than two
                // (bench/chart.ts measures the two-assign form beside it).
                actions: assign(({ context, event }) => {
                  if (!event.output.ok) return {};
                  const { response, charted } = event.output;
                  return { response, charted, ...nextBatchOf(context, response.toolCalls.length) };
                }),
              },
              {
                target: "#agentLoop.finishing",
                actions: assign({ response: ({ event }) => (event.output.ok ? event.output.response : undefined) }),
              },
            ],
            "MODEL.FAILED": { target: "#agentLoop.failing", actions: "recordError" },
          },
        },
        // A failed model attempt waits here before the next one (an abort interrupts the wait).
        backingOff: {
          after: { backoff: { target: "callingModel", actions: assign({ backoff: undefined }) } },
        },
        dispatching: {
          entry: "dispatchCalls",
          exit: "stopCalls",
          on: {
            // A call reports (a toolCall chart, or the plainCalls actor for one of its calls).
            // The turn's last call settling goes straight on to the next model call, unless that ends the
            // run: through deciding it costs a microstep and a snapshot more a turn (bench/chart.ts measures
            // that form beside this one).
            "CALL.SETTLED": [
              { guard: "lastSettledNextWithinLimit", target: "callingModel", actions: "nextTurn" },
              { guard: "lastSettled", target: "deciding", actions: "nextTurn" },
              { actions: assign(({ context }) => ({ open: context.open - 1 })) },
            ],
            "CALL.PENDING": {
              actions: assign({
                open: ({ context }) => context.open - 1,
                pending: ({ context, event }) => [...context.pending, event.stepId],
              }),
            },
            // A call waits for a time or an event: the run interrupts once no call is open (after approvals).
            "CALL.WAITING": {
              actions: assign({
                open: ({ context }) => context.open - 1,
                waiting: ({ context, event }) => [...context.waiting, event.stepId],
              }),
            },
            "CALL.FAILED": { target: "#agentLoop.failing", actions: "recordError" },
          },
          always: [
            {
              guard: "batchEnded",
              target: "dispatching",
              reenter: true,
              actions: "nextBatch", // after its exit stopped the batch, before its entry dispatches the next
            },
            {
              // No call open and some wait: the run stops (it holds nothing while they wait). Approvals
              // first: a person must answer before the turn can go on; the run's waits come back on resume.
              guard: ({ context }) => context.open === 0 && (context.pending.length > 0 || context.waiting.length > 0),
              target: "#agentLoop.interrupting",
              actions: assign({
                interrupt: ({ context }) =>
                  context.pending.length > 0
                    ? { reason: "approval-pending" as const, detail: { stepIds: context.pending } }
                    : { reason: "waiting" as const, detail: { stepIds: context.waiting } },
              }),
            },
          ],
        },
      },
    },
    // The run's ending is journaled by the one `end` actor, in the state named for it. A cancel that
    // comes meanwhile is noted: it wins over an interruption, not over an answer already journaled.
    finishing: {
      on: { CANCEL: { actions: "noteCancel" }, LOST: LOST_ENDS },
      invoke: {
        id: "end",
        src: "end",
        input: ({ context }): Ending => ({
          kind: "completed",
          turn: context.turn,
          content: context.response?.content ?? "",
        }),
        onDone: { target: "completed" },
        onError: [
          { guard: "cancelNoted", target: "cancelling" },
          { target: "failing", actions: "recordError" },
        ],
      },
    },
    interrupting: {
      on: { CANCEL: { actions: "noteCancel" }, LOST: LOST_ENDS },
      invoke: {
        id: "end",
        src: "end",
        input: ({ context }): Ending => ({
          kind: "interrupted",
          turn: context.turn,
          reason: context.interrupt?.reason ?? "aborted",
          detail: context.interrupt?.detail ?? null,
          ...(context.interrupt?.cause === undefined ? {} : { cause: context.interrupt.cause }),
          pending: context.pending,
          waiting: context.waiting,
        }),
        onDone: [{ guard: "cancelNoted", target: "cancelling" }, { target: "interrupted" }],
        onError: [
          { guard: "cancelNoted", target: "cancelling" },
          { target: "failing", actions: "recordError" },
        ],
      },
    },
    cancelling: {
      on: { LOST: LOST_ENDS },
      invoke: {
        id: "end",
        src: "end",
        input: ({ context }): Ending => ({ kind: "cancelled", reason: context.cancel?.reason ?? "" }),
        onDone: { target: "cancelled" },
        onError: { target: "failing", actions: "recordError" },
      },
    },
    // The first error is the run's: one from journaling the failure itself does not replace it.
    failing: {
      on: { LOST: LOST_ENDS },
      invoke: {
        id: "end",
        src: "end",
        input: ({ context }): Ending => ({ kind: "failed", error: context.error }),
        onDone: { target: "failed" },
        onError: { target: "failed" },
      },
    },
    completed: { type: "final" },
    interrupted: { type: "final" },
    cancelled: { type: "final" },
    failed: { type: "final" },
    // Another owner has the run: nothing was journaled for this ending.
    lost: { type: "final" },
  },
});
