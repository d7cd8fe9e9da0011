import { fromCallback, fromPromise } from "xstate";
import { digestOf, digestOfRecorded } from "../../core/digest.ts";
import { AgentLoopConfigError, ReplayDivergenceError, RunFailedError, SnapshotError } from "../../core/errors.ts";
import { jsonRoundTrip } from "../../core/jsonForm.ts";
import { contextDecisionId, modelFrameId, modePinId, toolStepId } from "../../events/ids.ts";
import { readModePin } from "../../events/modePin.ts";
import type { Journal } from "../../events/spi.ts";
import type {
  AttemptError,
  ContinuesData,
  Message,
  ModelResponse,
  NewEntry,
  RunStartedData,
  ToolCall,
} from "../../events/types.ts";
import type {
  CallModelOutput,
  Ending,
  ModelCallEvent,
  ModelCallsEvent,
  PrepareOutput,
} from "../../machines/agentLoop.protocol.ts";
import { resolveModePin } from "../../machines/modePin.machine.ts";
import { applyContext } from "../../policies/context.ts";
import { definitionPin } from "../../policies/definition.ts";
import { attemptError, type RetryPolicy } from "../../policies/retry.ts";
import { type FrameState, type RunState, responseAt } from "../../projections/runState.ts";
import { Appender } from "../base/appender.ts";
import type { AgentLoopConfig } from "../base/config.ts";
import {
  assistantMessage,
  contextPromptDigest,
  conversationStart,
  fedFromState,
  toolResultMessage,
} from "../base/conversation.ts";
import { continuesOf, resolvedInput } from "../base/history.ts";
import { hydrateArchived } from "../base/readers.ts";
import { CallStop, type StepStop } from "../base/runStop.ts";
import { readRunState, SnapshotSchedule, snapshotConfigOf } from "../base/snapshots.ts";
import { recordedToolCallIds, recordedTraceContext, traceContextDecision } from "../base/telemetry.ts";
import { isSubAgentTool } from "../subruns/subAgentTools.ts";
import { askModel } from "./askModel.ts";
import { contextChoice } from "./contextChoice.ts";
import { durableStep, type StepEffect } from "./durableStep.ts";
import { causeOf, modelPolicy, runDeadline } from "./failurePolicy.ts";
import { cancelEnds, failedEntry, interruptionEntry } from "./hooks.ts";
import type { RunMode } from "./run.ts";
import { type BoundRun, boundRun } from "./runBinding.ts";
import type { OlderConversation, RunSession } from "./session.ts";
import { loopTools, prepareToolSources, type RunTools } from "./toolSources.ts";

/**
 * `preparing`: reads and folds the journal, pins the mode, makes the run's facts (its {@link Run},
 * once), and starts or resumes the conversation.
 */
async function prepare({ session, fence }: BoundRun): Promise<PrepareOutput> {
  const { config, options, mode } = session;
  const runId = options.runId;
  // The latest snapshot and the entries after it, when the store keeps snapshots; else every entry.
  const snapshotConfig = snapshotConfigOf(config.snapshots);
  const onSnapshotWarning = snapshotConfig?.onWarning;
  // Compact: a compact snapshot's state is enough to resume (the chart starts at its last turns).
  // A budgeted run reads every frame: its usage so far is summed from every turn's response.
  const read = await readRunState(session.history, runId, {
    compact: !session.budget.active,
    ...(onSnapshotWarning ? { onSnapshotWarning } : {}),
  });
  const state = read.state;
  session.open(new Appender(options.journal.store, runId, state, fence));
  let snapshots: SnapshotSchedule | undefined;
  if (snapshotConfig !== undefined && mode.keepsRecords) {
    const schedule = new SnapshotSchedule(options.journal, runId, snapshotConfig, read.snapshotSeq);
    snapshots = schedule;
    session.appender.onDurable = (version) => schedule.durable(version);
  }
  // The journal's one pin reader (readJournal has refused a damaged pin already, naming its seq).
  const pinDecision = state.decisions[modePinId(config.id)];
  const recorded = pinDecision ? readModePin(runId, pinDecision) : undefined;
  const pin = resolveModePin({
    loopId: config.id,
    runId,
    recorded,
    configured: config.toolCallLog,
    runCompleted: state.status === "completed",
  });
  if (pin.error) throw pin.error;
  const logMode = pin.mode;
  const pinEntry: NewEntry[] = pin.appendPin && pin.pin ? [{ type: "decision.recorded", data: pin.pin }] : [];
  // Telemetry sees the run's events from here on; its trace context is journaled with the first attempt.
  const traceEntry = state.status === "completed" || !mode.keepsRecords ? [] : startTelemetry(session, state);
  /** The run's facts, made once the tools and the deadline are known. */
  const begin = (tools: RunTools, deadlineAt: number | undefined, startTurn: number) =>
    session.begin(Object.freeze({ mode, logMode, deadlineAt, ...tools, startTurn, snapshots }));
  if (state.status === "new") {
    if (options.input === undefined) {
      throw new AgentLoopConfigError(
        `run ${runId} has no journal yet, so it needs an input: call loop.run({ runId: "${runId}", input, journal })`,
        "missingInput",
      );
    }
    const sources = await prepareToolSources(session, state); // asked live, before anything is appended
    const sessionUsage = await session.budget.prepare(state, config.id); // a session's earlier messages, summed once
    const deadline = runDeadline(config, state, Date.now());
    // Written with the first model call's frame.started (no effect runs from these): one commit fewer.
    // A crash before it leaves no journal, and the run is new again.
    // A session's next message names the history its input starts with, and journals the rest.
    const continues = continuesOf(options.input);
    session.appender.defer(
      { type: "run.started", data: runStartedData(config, options.input, continues) },
      ...pinEntry,
      ...sources.entries,
      ...traceEntry,
      ...deadline.append,
      ...session.budget.startEntries(config.id),
      ...sessionUsage,
    );
    begin(sources, deadline.deadlineAt, 0);
    session.conversation.start(
      config,
      continues === undefined ? (session.state.input ?? "") : (jsonForm(options.input) as readonly Message[]),
    );
    session.ready();
    return { kind: "ready" };
  }
  if (state.loopId !== config.id) {
    throw new ReplayDivergenceError(
      runId,
      modelFrameId(state.loopId ?? "?", 0),
      `run ${runId} was recorded by loop "${state.loopId}" but this loop is "${config.id}": its frame ids would not match; run it with the loop that recorded it.`,
    );
  }
  if (options.input !== undefined && !(await sameInput(options.journal, state, options.input))) {
    throw new AgentLoopConfigError(
      `run ${runId} was started with another input; resume it without input (the recorded one is used) or start a new run.`,
      "inputMismatch",
    );
  }
  // An ended run runs nothing (no tool source is asked, no deadline set): the chart ends it so
  // again, and nothing is appended.
  if (state.status === "completed" || state.status === "cancelled" || state.status === "failed") {
    begin(loopTools(config), undefined, 0);
    if (state.status === "completed") return { kind: "completed" };
    if (state.status === "cancelled") return { kind: "cancelled", reason: state.cancelled?.reason ?? "" };
    return { kind: "failed", error: new RunFailedError(runId, state.error ?? { name: "Error", message: "" }) };
  }
  await mode.checkResumable(runId, config, state, options.journal);
  const sources = await prepareToolSources(session, state); // journaled lists; a source's first one asked live
  await session.budget.prepare(state, config.id); // a session's earlier messages, as the run's start recorded them
  // A late pin (a run recorded with no log shape, resumed with one, journals it now); a deadline
  // configured after the run started runs from now.
  const deadline = runDeadline(config, state, Date.now());
  // Written with the next append (a frame.started, or the run's end), as a new run's run.started is:
  // nothing acts on these before it. A run a worker picks up after submitRun commits once fewer.
  const late = [...pinEntry, ...sources.entries, ...traceEntry, ...deadline.append];
  if (late.length > 0) session.appender.defer(...late);
  // The chart then walks the recorded turns, each step served from the journal: archived outputs first.
  await hydrateArchived(session.history, state);
  const from = compactStart(mode, state);
  begin(sources, deadline.deadlineAt, from ?? 0);
  // The history a session's message names is read as the session's next message read it: as the journal keeps it.
  if (from === undefined) session.conversation.start(config, await resolvedInput(options.journal, state));
  else await resumeCompact(session, state, from, read.snapshotSeq);
  session.ready();
  return from === undefined ? { kind: "ready" } : { kind: "ready", turn: from };
}

/**
 * The turn a compact state is resumed from: its last recorded model turn (walked again: its
 * calls may not have ended), or undefined to walk from turn 0 (a full state, a replay).
 */
function compactStart(mode: RunMode, state: RunState): number | undefined {
  const below = state.compacted?.belowTurn;
  if (below === undefined || below === 0 || !mode.resumesShort) return undefined;
  return state.turns - 1;
}

/**
 * Restores the conversation's tail for a resume at turn `from`: the turn before's response and
 * its results (served from the journal, checked as a walk checks them), chained from that model
 * call's recorded prompt digest. The messages before are read from the journal when the model
 * is first asked: a resume that ends in served steps never reads them.
 */
async function resumeCompact(session: RunSession, state: RunState, from: number, snapshotSeq: number): Promise<void> {
  const { config } = session;
  const runId = session.options.runId;
  const before = from - 1;
  const frame = state.frames[modelFrameId(config.id, before)];
  const response = responseAt(state, before);
  if (frame === undefined || response === undefined) {
    throw new SnapshotError(
      "snapshotUnreadable",
      runId,
      snapshotSeq,
      `the compact state does not hold the model frame of turn ${before} it resumes after; write a new snapshot (writeRunSnapshot) or remove it`,
    );
  }
  session.conversation.resumeAt(frame.inputDigest, response, () => olderMessages(session, before));
  await servedTurn(session, before, response);
}

/** The conversation before turn `turn`'s response: its start, then every turn's messages, from the whole journal. */
async function olderMessages(session: RunSession, turn: number): Promise<OlderConversation> {
  const { config, options } = session;
  const runId = options.runId;
  const onWarning = snapshotConfigOf(config.snapshots)?.onWarning;
  const full = (await readRunState(session.history, runId, onWarning ? { onSnapshotWarning: onWarning } : undefined))
    .state;
  await hydrateArchived(session.history, full);
  const messages = conversationStart(config, await resolvedInput(options.journal, full));
  const turnStarts: number[] = [];
  for (let t = 0; t < turn; t++) {
    const response = responseAt(full, t) as ModelResponse;
    turnStarts.push(messages.length);
    messages.push(assistantMessage(response));
    for (let index = 0; index < response.toolCalls.length; index++) {
      const stepId = toolStepId(config.id, t, index);
      const fed = await fedFromState(full, stepId, (id, envelope) => session.resolveOutput(id, envelope));
      messages.push(toolResultMessage(response.toolCalls[index] as ToolCall, fed));
    }
  }
  return { messages, turnStarts };
}

/** The model call of `turn`, as a durable step; `actor` stops it (the loop left `running`). */
async function callModel(run: BoundRun, turn: number, actor: CallStop): Promise<CallModelOutput> {
  const session = run.session;
  const config = session.config;
  const runId = session.options.runId;
  const pace = session.mode.pace;
  if (pace !== undefined) await pace(); // a replay's; not a tick every turn of every run
  const conversation = session.conversation;
  if (turn > 0) conversation.pushToolResults(turn - 1, responseAt(session.state, turn - 1) as ModelResponse);
  const frameId = modelFrameId(config.id, turn);
  if (session.budget.active && session.state.frames[frameId]?.status !== "completed") {
    const breach = await budgetCheck(session, turn);
    if (breach !== undefined) return { ok: false, reason: "budget", detail: breach };
  }
  const chained = conversation.nextPromptDigest();
  // A context policy decides on, and cuts, the whole conversation: after a compact resume, the turns
  // before its tail are read from the journal now (once); without one, when the model is asked.
  const recordedContext = session.state.decisions[contextDecisionId(config.id, turn)];
  const contexted = config.context !== undefined || recordedContext;
  if (contexted && session.state.frames[frameId]?.status !== "completed") await conversation.whole();
  // Without a policy, only a journaled decision makes a context (no call to decide one, not awaited).
  const context = contexted ? await contextChoice(session, turn, frameId) : undefined;
  if (context?.asked !== undefined) session.budget.askedForContext(turn, context.asked); // a summary's calls count too
  const digest = context === undefined ? chained : contextPromptDigest(chained, context);
  // The prompt is made only for a call that runs (a served one needs its digest alone).
  conversation.prompt =
    context === undefined || session.state.frames[frameId]?.status === "completed"
      ? undefined
      : applyContext(conversation.messages, conversation.turnStarts, config.id, context);
  const step = new ModelStep(session, frameId, turn, actor);
  const result = await durableStep<ModelResponse, ModelResponse>(
    session,
    {
      frameId,
      effect: "model",
      inputDigest: digest,
      onUnknownOutcome: "rerun",
      checkInput: session.mode.judgesPrompts,
    },
    step,
  );
  const streamed = step.streamed; // the attempt whose deltas watchers were sent
  // The deltas of an attempt that did not answer are void: watchers drop them. A failed attempt's
  // reset is journaled with its attempt.failed (the event fold gives it); one stopped is told live.
  if (streamed !== undefined && (result.kind === "aborted" || result.kind === "past-deadline")) {
    session.events.emitLive({ type: "reset", runId, stepId: frameId, attempt: streamed });
  }
  switch (result.kind) {
    case "done":
      session.modelAnswered(digest, result.value);
      if (result.served && (await servedTurn(session, turn, result.value))) {
        return { ok: true, response: result.value, settled: true };
      }
      return { ok: true, response: result.value, charted: run.calls.chartedCalls(turn, result.value) };
    case "retry":
      return { ok: false, retry: { attempt: result.attempt, delayMs: result.delayMs } };
    case "past-deadline":
      return pastDeadline(session.facts.deadlineAt);
    case "gave-up": {
      await session.appender.append(result.record);
      const cause = causeOf(result.error);
      // `detail` keeps the fields Loom 0.1.0 wrote (readers of it keep working); `cause` is the typed record.
      const detail = { frameId, name: cause.name, message: cause.message };
      return { ok: false, reason: "model-error", detail, cause };
    }
    default: // aborted (a model call's unknown outcome is always asked again)
      return { ok: false, reason: "aborted", detail: null };
  }
}

/** The budget's check before the model call of `turn` (one not recorded yet); a sub-agent's usage read anew after its turn. */
function budgetCheck(session: RunSession, turn: number) {
  const previous = turn > 0 ? responseAt(session.state, turn - 1) : undefined;
  const tool = (name: string) => session.tools[name];
  if (previous?.toolCalls.some((c) => Object.hasOwn(session.tools, c.name) && isSubAgentTool(tool(c.name) as object)))
    session.budget.subAgentsRan();
  return session.budget.check(turn);
}

/**
 * The loop chart's one actor for the model calls of the whole run: told a turn, it calls the
 * model and reports as an invoked actor's done or error event would. Stopped (the loop left
 * `running`), the call in flight is stopped: its stop aborts and it reports nothing.
 */
const modelCalls = fromCallback<ModelCallsEvent, { runId: string }>(({ receive, sendBack, system }) => {
  const run = boundRun(system);
  let current: CallStop | undefined;
  const report = (stop: CallStop, event: ModelCallEvent) => {
    if (current !== stop) return;
    current = undefined;
    sendBack(event);
  };
  receive((event) => {
    const stop = new CallStop();
    current = stop;
    callModel(run, event.turn, stop).then(
      (output) => report(stop, { type: "MODEL.DONE", output }),
      (error: unknown) => report(stop, { type: "MODEL.FAILED", error }),
    );
  });
  return () => {
    current?.stop();
    current = undefined;
  };
});

/**
 * A resumed turn whose every call the journal settled is served whole: each call checked and
 * fed as its toolCall actor would, without a child actor per call (what kept a 2,000-turn
 * resume within 1.5× of the hand walk it replaced). A replay for the inspector spawns them, to
 * show them. False when some call has not ended: the turn is dispatched.
 */
async function servedTurn(session: RunSession, turn: number, response: ModelResponse): Promise<boolean> {
  if (!session.mode.resumesShort || response.toolCalls.length === 0) return false;
  for (let index = 0; index < response.toolCalls.length; index++) {
    const breath = session.breathe();
    if (breath !== undefined) await breath;
    const fed = await session.serveCall(
      toolStepId(session.config.id, turn, index),
      response.toolCalls[index] as ToolCall,
    );
    if (!fed) return false;
  }
  return true;
}

/**
 * The one actor that journals how the run ends, whichever way the chart ends it. Once it runs,
 * work still in flight appends nothing more (`close`), except a completion: nothing is in flight.
 */
const end = fromPromise<void, Ending>(({ input, system }) => endRun(boundRun(system).session, input));

async function endRun(session: RunSession, input: Ending): Promise<void> {
  switch (input.kind) {
    case "completed":
      // The log is not journaled again: the value returned is rebuilt from the frames (completedOutput).
      await session.appender.append({
        type: "run.completed",
        data: { output: { content: input.content, iterations: input.turn + 1 } },
      });
      return;
    case "interrupted":
      session.appender.close(input.reason);
      await session.appender.appendFinal(interruptionEntry(session, input));
      return;
    case "cancelled":
      if (!cancelEnds(session)) return;
      session.appender.close("cancelled");
      await session.appender.appendFinal({ type: "run.cancelled", data: { reason: input.reason } });
      return;
    case "failed": {
      const entry = failedEntry(session, input.error);
      if (entry === undefined) return;
      session.appender.close("failed");
      await session.appender.appendFinal(entry);
      return;
    }
  }
}

/**
 * The loop machine's actors, built once: each does the journaled work the statechart asks for
 * (read and fold, call the model as a durable step, complete or interrupt the run) for the run
 * bound to the actor system it runs in (runBinding.ts).
 */
export const loopLogic = {
  prepare: fromPromise<PrepareOutput, { runId: string }>(({ system }) => prepare(boundRun(system))),
  modelCalls,
  end,
};

/**
 * Starts the run's telemetry in this process (`config.telemetry`), listening to its events, with
 * the trace context the run journaled; returns the decision that journals one when it has none.
 */
function startTelemetry(session: RunSession, state: RunState): NewEntry[] {
  const { telemetry, id: loopId, model } = session.config;
  if (telemetry === undefined) return [];
  const recorded = recordedTraceContext(state, loopId);
  const toolCallIds = recordedToolCallIds(state, loopId);
  const scope = telemetry.startRun({
    runId: session.options.runId,
    loopId,
    model: model.id,
    ...(model.provider === undefined ? {} : { provider: model.provider }),
    recorded,
    toolCallIds,
  });
  session.trace(scope);
  const onEvent = scope.onEvent;
  const onEntries = scope.onEntries;
  if (onEntries !== undefined) session.events.observeEntries((entries) => onEntries.call(scope, entries));
  if (onEvent !== undefined) session.events.observe((event) => onEvent.call(scope, event));
  return recorded === undefined && scope.carrier !== undefined ? [traceContextDecision(loopId, scope.carrier)] : [];
}

/**
 * The model call of one turn as a durable step: its hooks are methods of one object a call (a
 * literal of closures cost a turn nine functions), and a module's class, so the step's calls into
 * it see one shape in every run.
 */
class ModelStep implements StepEffect<ModelResponse, ModelResponse> {
  /** The attempt whose deltas watchers were sent, if one streamed any. */
  streamed: number | undefined;
  readonly timeoutMs: number | undefined;

  constructor(
    private readonly session: RunSession,
    private readonly frameId: string,
    private readonly turn: number,
    private readonly actor: CallStop,
  ) {
    this.timeoutMs = session.config.timeouts?.modelAttemptMs;
  }

  /** Named for a timeout's message (made only then). */
  get describe(): string {
    return `model call ${this.frameId}`;
  }

  serve(frame: FrameState): ModelResponse {
    return frame.output as ModelResponse;
  }

  execute(stop: StepStop, attempt: number): Promise<ModelResponse> {
    return askModel(this.session, stop, this.frameId, attempt, this);
  }

  /** Told by `askModel` when an attempt first streams a delta. */
  delta(attempt: number): void {
    this.streamed = attempt;
  }

  record(raw: ModelResponse): ModelResponse {
    const session = this.session;
    // Written with the next append (its tools' frame.started, or the run's end): nothing acts on it before.
    session.appender.defer({
      type: "frame.completed",
      data: { frameId: this.frameId, output: normalizeResponse(raw) },
    });
    return responseAt(session.state, this.turn) as ModelResponse;
  }

  classify(error: unknown, now: number): AttemptError {
    return attemptError(error, now);
  }

  policy(): RetryPolicy {
    return modelPolicy(this.session.config);
  }

  stop(): StepStop {
    return this.session.stepStop(this.actor); // read only by a step that runs: linked then
  }
}

/** The run's deadline (`timeouts.runMs`, journaled at its start) has passed: it stops for good. */
function pastDeadline(deadlineAt: number | undefined): CallModelOutput {
  // Only a run with a deadline is ever past it; null would say the run had none.
  const at = deadlineAt === undefined ? null : new Date(deadlineAt).toISOString();
  return { ok: false, reason: "deadline", detail: { deadlineAt: at } };
}

/**
 * A model response as the journal records it (its JSON form): `toolCalls` always an array, each call with a
 * distinct string id and a name (a missing name is kept as "" and settled as an unknown tool).
 */
function normalizeResponse(live: ModelResponse | undefined): ModelResponse {
  const raw = (jsonForm(live) ?? partsInJsonForm(live)) as ModelResponse | undefined;
  const calls: unknown[] = Array.isArray(raw?.toolCalls) ? raw.toolCalls : [];
  const seen = new Set<string>();
  const toolCalls: ToolCall[] = calls.map((c, index) => {
    const call = (typeof c === "object" && c !== null ? c : {}) as Partial<ToolCall>;
    let id = typeof call.id === "string" && call.id !== "" ? call.id : `call_${index}`;
    if (seen.has(id)) id = `${id}#${index}`; // two calls with one id: results must stay distinguishable
    seen.add(id);
    return {
      id,
      name: typeof call.name === "string" ? call.name : "",
      input: call.input ?? {},
    };
  });
  const out: { content?: string; toolCalls: ToolCall[]; usage?: ModelResponse["usage"]; finishReason?: string } = {
    toolCalls,
  };
  if (typeof raw?.content === "string") out.content = raw.content;
  if (raw?.usage) out.usage = raw.usage;
  // Journaled so every reader has it: the chat span's gen_ai.response.finish_reasons, the viewer.
  if (typeof raw?.finishReason === "string") out.finishReason = raw.finishReason;
  return out;
}

/**
 * A response with no JSON form as a whole (a BigInt or a cycle in one call's input, from a buggy
 * adapter), part by part: an input with no JSON form becomes the adapters' invalid-input marker,
 * so that call is fed back as an error instead of the whole response reading as an empty answer.
 */
function partsInJsonForm(live: unknown): unknown {
  if (typeof live !== "object" || live === null) return null;
  try {
    const { content, toolCalls, usage } = live as { content?: unknown; toolCalls?: unknown; usage?: unknown };
    const calls = Array.isArray(toolCalls)
      ? toolCalls.map((c: unknown) => {
          if (typeof c !== "object" || c === null) return jsonForm(c);
          const { id, name, input } = c as { id?: unknown; name?: unknown; input?: unknown };
          let recorded: unknown;
          try {
            const text = JSON.stringify(input);
            recorded = text === undefined ? undefined : JSON.parse(text);
          } catch (e) {
            recorded = { __loomInvalidInput: "(no JSON form)", error: String((e as Error)?.message ?? e) };
          }
          return { id: jsonForm(id), name: jsonForm(name), input: recorded };
        })
      : [];
    return { content: jsonForm(content), toolCalls: calls, usage: jsonForm(usage) };
  } catch {
    return null; // a getter that throws: nothing of the response can be trusted
  }
}

/** A value as a JSON store hands it back; a value with no JSON form becomes null. */
export function jsonForm(value: unknown): unknown {
  try {
    return jsonRoundTrip(value) ?? null;
  } catch {
    return null;
  }
}

/**
 * The `run.started` a new run begins with: the loop id, the input in its JSON form, the tool names
 * and the definition pin. `loop.run` and `submitRun` write exactly this. With `continues` (a
 * session's next message), the input's first messages are that history: only the rest is written.
 */
export function runStartedData(
  config: AgentLoopConfig,
  input: string | readonly Message[],
  continues?: ContinuesData,
): RunStartedData {
  const added = continues === undefined ? input : (input as readonly Message[]).slice(continues.messages);
  return {
    loopId: config.id,
    input: jsonForm(added) as string,
    tools: Object.keys(config.tools ?? {}),
    definition: definitionPin(config),
    ...(continues === undefined ? {} : { continues }),
  };
}

/**
 * Whether `given` is the input run `state` was started with: compared with what it journaled, and
 * for a session's message with the history it names too (read back only when `given` was not made
 * on that same history).
 */
async function sameInput(journal: Journal, state: RunState, given: string | readonly Message[]): Promise<boolean> {
  const continues = state.continues;
  if (continues === undefined) return digestOf(given).digest === digestOfRecorded(state.input).digest;
  const named = continuesOf(given);
  if (named !== undefined && named.digest === continues.digest && named.messages === continues.messages) {
    const added = (given as readonly Message[]).slice(continues.messages);
    return digestOf(added).digest === digestOfRecorded(state.input).digest;
  }
  return digestOf(given).digest === digestOfRecorded(await resolvedInput(journal, state)).digest;
}
