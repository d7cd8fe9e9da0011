import type { InspectionEvent, Observer } from "xstate";
import { isAgentLoopConfigError, isRunBusyError, RunCancelledError } from "../../core/errors.ts";
import { checkRunId, parseFrameId, toolStepId } from "../../events/ids.ts";
import { redactsJournal } from "../../events/redaction/redactedOriginals.ts";
import type { EventStore } from "../../events/store.ts";
import type { Message } from "../../events/types.ts";
import { type RunState, responseAt } from "../../projections/runState.ts";
import { completedOutput, projectToolCallLog } from "../../projections/toolCallLog.ts";
import type { AgentOutput, InterruptedAgentRun, RunWait, ToolCallLogMode } from "../../projections/types.ts";
import { describeApproval, waitsIn } from "../../projections/waits.ts";
import type { AgentLoopConfig } from "../base/config.ts";
import { AgentInterruptedError } from "../base/errors.ts";
import { holdGiven, holdRun, type RunOwnership } from "../base/ownership.ts";
import { hydrateForLog } from "../base/readers.ts";
import { type Fence, RunStop } from "../base/runStop.ts";
import { readRunState, snapshotConfigOf } from "../base/snapshots.ts";
import { resolveApprovals } from "../control/approvalAnswers.ts";
import { budgetShare } from "../steps/budgetShares.ts";
import { LIVE, type RunMode, replayMode } from "../steps/run.ts";
import { type RunOptions, RunSession } from "../steps/session.ts";
import { createRunActor } from "../steps/sharedMachine.ts";
import { ToolCalls } from "../steps/toolActors.ts";
import { type AgentStream, chainListeners, streamOf } from "../streaming/stream.ts";
import type { RunContext } from "../subruns/runContext.ts";
import { nextSessionTurn, SessionBusyError } from "./sessions.ts";
import { validateConfig } from "./validateConfig.ts";

/**
 * One `loop.run(...)`: the run id and journal, and to start, the input.
 *
 * @example
 * ```ts
 * await loop.run({ runId: "order-42", journal, input: "Where is my order?" }); // starts (or resumes) order-42
 * await loop.run({ runId: "order-42", journal, approvals: { [stepId]: true } }); // resumes it, approving a call
 * ```
 */
export interface RunRequest extends RunOptions {
  /** An xstate inspection observer (e.g. @statelyai/inspect's), to watch the run's statecharts. */
  readonly inspect?: Observer<InspectionEvent> | ((event: InspectionEvent) => void);
  /**
   * A run has one owner at a time: the call acquires it from the journal's store before reading
   * the run (`RunBusyError` if another live process or call has it, unless `waitMs` says to wait)
   * and fences every append with it, so no model or tool call starts once another owner has
   * taken the run over (`OwnershipLostError`); before each one the lease is checked by the local
   * clock, and renewed first when it may have run out (a paused process). Lease length, waiting,
   * owner name; see {@link RunOwnership}.
   */
  readonly ownership?: RunOwnership;
  /**
   * The run's context when it runs as a sub-agent: `agentTool` starts its child run with
   * `context.run.child(stepId, loop.config.id)` (see `ToolContext.run`). Absent, the run gets a
   * context of its own, at depth 0.
   */
  readonly runContext?: RunContext;
}

/**
 * One `loop.send(...)`: a user message to a session. What `run` takes, except the run id and the
 * input, which the session gives (`<sessionId>/<n>`, the history and the message). A `budget`
 * given here holds for the whole session: the usage of its earlier messages counts toward it.
 *
 * @example
 * await loop.send({ sessionId: "chat-7", journal, message: "And tomorrow?" });
 * await loop.send({ sessionId: "chat-7", journal, message: "And Friday?", budget: { inputTokens: 50_000 } });
 */
export interface SendRequest extends Omit<RunRequest, "runId" | "input"> {
  /** The session (a conversation): its messages' runs are `<sessionId>/<n>`. */
  readonly sessionId: string;
  /** The user's message: a text, or a message of your own (`{ role: "user", content }`). */
  readonly message: string | Message;
}

/** What `loop.send` resolves to: the run's value, and the run id the message got. */
export type SessionReply<M extends ToolCallLogMode | undefined = ToolCallLogMode | undefined> = AgentOutput<M> & {
  readonly runId: string;
};

/**
 * A durable agent loop, made by `agentLoop$`. `M` is its configured `toolCallLog` mode, which
 * types the log it returns (see `ToolCallLog`).
 */
export interface AgentLoop<M extends ToolCallLogMode | undefined = ToolCallLogMode | undefined> {
  /** The loop's id (`config.id`): the first part of its step ids (`<id>#turn:0:model`). */
  readonly id: string;
  /** The configuration it was made with. */
  readonly config: AgentLoopConfig<M>;
  /**
   * Starts the run `runId` (with `input`), or resumes it from its journal. Resolves to the loop's
   * value; rejects with `AgentInterruptedError` when the run stops before its answer.
   */
  run(request: RunRequest): Promise<AgentOutput<M>>;
  /**
   * `run`, watched as it happens: the run's events (`RunEvent`s) as an async iterable, and its
   * value in `output`. The journal it writes is the one `run` writes. See {@link AgentStream}.
   */
  stream(request: RunRequest): AgentStream<M>;
  /**
   * Sends a user message to a session: runs `<sessionId>/<n>` (n: the message's index) on the
   * session's history (`sessionHistory`, a projection of its runs) and the message. Refuses with
   * `SessionBusyError`, journaling nothing, while the session's last message has not ended (its
   * run runs, stalled, or stopped and waits to be resumed) or another send to it is under way. A
   * last message whose run was cancelled or failed has ended: the next one goes on from the
   * history as it stands. The run is a run like any other: resumable with `run`, cancellable,
   * streamable (`sendStream`).
   */
  send(request: SendRequest): Promise<SessionReply<M>>;
  /** `send`, watched as it happens (see `stream`); the run id is in the events (`runId`). */
  sendStream(request: SendRequest): AgentStream<M>;
}

const DEFAULT_MAX_ITERATIONS = 50;

/**
 * Makes a durable agent loop. Every model and tool call is a journaled step, so `run` with the
 * same `runId` resumes a stopped or crashed run where it stopped, never running a completed
 * step again. Throws `AgentLoopConfigError` for an invalid configuration. The `$` in the name
 * marks a durable definition: what it makes does nothing until a run is started, and every step
 * of that run is journaled (a plain `agentLoop(...)` would read like a call that runs the loop).
 *
 * @example
 * const loop = agentLoop$({ id: "support", model, tools: { lookup }, toolCallLog: "lean" });
 * const journal = openSqliteJournal("./loom.db");
 * const { content, toolCallLog } = await loop.run({ runId: "r-1", input: "Where is my order?", journal });
 */
export function agentLoop$<M extends ToolCallLogMode | undefined = undefined>(
  config: AgentLoopConfig<M>,
): AgentLoop<M> {
  validateConfig(config);
  // The mode pin (the log's shape, journaled once per run) makes the returned log's shape the
  // configured one, or throws.
  const run = (request: RunRequest) => runLoop(config, request) as Promise<AgentOutput<M>>;
  const stream = (request: RunRequest) =>
    streamOf<M>((onEvent) => run({ ...request, onEvent: chainListeners(request.onEvent, onEvent) }));
  // Sessions this loop is sending a message to, by store: a second send to one is refused at once.
  // (Another loop object or process racing for the same run id meets the run's lease instead.)
  const sending = new WeakMap<EventStore, Set<string>>();
  const send = (request: SendRequest) => sendMessage(request, run, sending) as Promise<SessionReply<M>>;
  const sendStream = (request: SendRequest) =>
    streamOf<M>((onEvent) => send({ ...request, onEvent: chainListeners(request.onEvent, onEvent) }));
  return { id: config.id, config, run, stream, send, sendStream };
}

async function sendMessage(
  request: SendRequest,
  run: (request: RunRequest) => Promise<AgentOutput>,
  sending: WeakMap<EventStore, Set<string>>,
): Promise<SessionReply> {
  const { sessionId, message, ...rest } = request;
  checkRunId(sessionId, "loop.send");
  const store = request.journal.store;
  let busy = sending.get(store);
  if (busy === undefined) sending.set(store, (busy = new Set()));
  if (busy.has(sessionId)) {
    throw new SessionBusyError(sessionId, sessionId, "another message is being sent to it", {
      fix: "Wait for that send to end, then send the message again.",
    });
  }
  busy.add(sessionId);
  try {
    const turn = await nextSessionTurn(request.journal, sessionId, message);
    try {
      // A budget given with the message is the session's: the run counts the earlier messages' usage.
      const session = rest.budget === undefined ? {} : { session: sessionId };
      const out = await run({ ...rest, ...session, runId: turn.runId, input: turn.input });
      return { ...out, runId: turn.runId };
    } catch (e) {
      // Another process sent a message at the same time and took the same run id first.
      if (isRunBusyError(e) || (isAgentLoopConfigError(e) && e.code === "inputMismatch")) {
        throw new SessionBusyError(sessionId, turn.runId, "another message was sent to it at the same time", {
          cause: e,
        });
      }
      throw e;
    }
  } finally {
    busy.delete(sessionId);
  }
}

/**
 * Walks a copy of a recording through the chart, every step served from the journal and neither
 * the prompt digests nor the loop's definition compared (the stand-in loop of `loom inspect`
 * cannot reproduce them). `pace` is awaited before each model step.
 *
 * @internal
 */
export function replayRecording(
  config: AgentLoopConfig,
  request: RunRequest & { readonly pace?: () => Promise<unknown> },
): Promise<AgentOutput> {
  validateConfig(config);
  return runLoop(config, request, replayMode(request.pace));
}

async function runLoop(config: AgentLoopConfig, given: RunRequest, mode: RunMode = LIVE): Promise<AgentOutput> {
  checkRunId(given.runId, "loop.run"); // before anything reads or writes the journal
  const request = await resolveApprovals(given, config.tools); // a sub-agent's call answered by its step id
  const stop = new RunStop(request.runId, request.signal);
  let session: RunSession | undefined; // made once the run is held
  const givenLease = request.ownership?.lease;
  const held =
    givenLease !== undefined
      ? holdGiven(request.journal.store, givenLease, request.ownership?.leaseMs) // a worker's: nothing to wait for
      : await holdRun(
          request.journal.store,
          request.runId,
          config.id,
          request.ownership,
          request.signal,
          (e) => {
            session?.openedAppender?.lost(e); // tells the fence's onLost, once the appender exists
            stop.lose(e);
          },
          (e) => stop.cancel(e.reason), // a renewal found a cancel request (cancelRun)
        ).catch((e: unknown) => {
          stop.dispose();
          throw e;
        });
  session = new RunSession(
    config,
    { ...request, signal: stop.signal },
    { stop, lease: held.lease, mode, context: request.runContext },
  );
  try {
    if (held.cancelRequested !== undefined) stop.cancel(held.cancelRequested); // asked before the run was held
    return await runHeld(config, request, session, stop.fence(held.fence), stop);
  } finally {
    stop.dispose();
    await held.letGo();
  }
}

async function runHeld(
  config: AgentLoopConfig,
  request: RunRequest,
  session: RunSession,
  fence: Fence,
  stop: RunStop,
): Promise<AgentOutput> {
  // The chart and its actors are built once; the run is bound to its actor system (sharedMachine.ts).
  const actor = createRunActor(
    { session, fence, calls: new ToolCalls(session) },
    {
      input: { runId: request.runId, loopId: config.id, maxIterations: config.maxIterations ?? DEFAULT_MAX_ITERATIONS },
      ...(request.inspect ? { inspect: request.inspect } : {}),
    },
  );
  const done = new Promise<void>((resolve, reject) => {
    actor.subscribe({ complete: resolve, error: reject });
  });
  // Its events, answers and inspector become its sub-agents' (agentTool), through the run's context.
  const detach = session.run.attach(session.events, request.approvals, request.inspect, actor);
  session.run.useBudget({ left: () => session.budget.remaining(), share: (stepId) => budgetShare(session, stepId) });
  let unlisten: (() => void) | undefined;
  try {
    unlisten = stop.start(actor);
    await done;
  } finally {
    detach();
    unlisten?.();
    session.dispose();
    // Results deferred to a next append that never came (the run failed, lost or ended unjournaled):
    // journaled, or a resume would see their effects' outcome as unknown. A failure here leaves the run's outcome as it is.
    await session.openedAppender?.flush().catch(() => {});
    await session.prepared?.snapshots?.settled(); // written beside the run: done before the journal may be closed
    const end = actor.getSnapshot();
    session.telemetry?.end(
      end.value === "completed" || end.value === "interrupted" || end.value === "cancelled"
        ? { status: end.value === "completed" ? "completed" : "interrupted" }
        : { status: "failed", error: end.value === "lost" ? end.context.lost : end.context.error },
    );
  }
  // The chart's final state is the run's outcome.
  const snapshot = actor.getSnapshot();
  switch (snapshot.value) {
    case "completed": {
      // A run completed earlier may have been compacted since: the full shape reads its archived outputs back.
      const logMode = session.facts.logMode;
      const state = await hydrateForLog(request.journal, await everyFrame(session), logMode);
      const output = completedOutput(state, logMode) as AgentOutput;
      // Under redaction the log is the journal's (redacted); the answer the model gave in this call is the caller's.
      const answered = state === session.state || session.appender.appends === 0 ? undefined : session.state._output;
      return answered === undefined ? output : { ...output, content: answered.content };
    }
    case "interrupted":
      throw new AgentInterruptedError(interruptedRun(session, await everyFrame(session), snapshot.context.pending));
    case "cancelled":
      throw new RunCancelledError(request.runId, snapshot.context.cancel?.reason ?? "");
    case "lost":
      throw snapshot.context.lost;
    default:
      throw snapshot.context.error;
  }
}

/**
 * The run's state with every frame, for the tool-call log: the session's own, or the whole journal
 * folded, once, at the run's end: after a compact resume (which holds only the last turns' frames),
 * and under redaction, where the session's state holds what the model was fed and the log is what
 * the journal holds (redacted), the same log a rebuild gives.
 */
async function everyFrame(session: RunSession): Promise<RunState> {
  const state = session.state;
  if (state.compacted === undefined && !redactsJournal(session.options.journal)) return state;
  const onSnapshotWarning = snapshotConfigOf(session.config.snapshots)?.onWarning;
  const options = onSnapshotWarning === undefined ? undefined : { onSnapshotWarning };
  return (await readRunState(session.options.journal, session.options.runId, options)).state;
}

function interruptedRun(session: RunSession, state: RunState, pending: readonly string[]): InterruptedAgentRun {
  const turn = state.turns - 1;
  const calls = responseAt(state, turn)?.toolCalls ?? [];
  const cause = state.interruption?.cause; // as journaled: what a reader after a restart sees too
  const waiting = new Set(pending); // a lookup per call: thousands of calls must not cost n × pending
  return {
    runId: session.options.runId,
    reason: state.interruption?.reason ?? "aborted",
    toolCallLog: projectToolCallLog(state, session.facts.logMode),
    iterations: state.turns,
    pendingApprovals: calls.flatMap((call, index) => {
      const stepId = toolStepId(session.loopId, turn, index);
      if (!waiting.has(stepId)) return [];
      return session.run.waitingBelow(stepId) ?? [{ stepId, toolName: call.name, input: call.input }]; // a sub-agent's
    }),
    ...(cause === undefined ? {} : { cause }),
    waits: [...approvalWaits(session, state, pending), ...waitsIn(state, session.options.runId)],
  };
}

/** The run's pending approvals as waits (one kind of wait: docs/waits.md). */
function approvalWaits(session: RunSession, state: RunState, pending: readonly string[]): RunWait[] {
  if (pending.length === 0) return [];
  const expiries = (state.interruption?.detail as { expiresAt?: Record<string, string> } | null)?.expiresAt ?? {};
  const runId = session.options.runId;
  return pending.map((stepId) => {
    const parsed = parseFrameId(stepId);
    const name = parsed?.kind === "tool" ? (responseAt(state, parsed.turn)?.toolCalls[parsed.index]?.name ?? "") : "";
    return describeApproval(
      runId,
      stepId,
      name,
      state.interruption?.reason === "approval-pending" ? expiries[stepId] : undefined,
    );
  });
}
