import { fromPromise } from "xstate";
import { digestOf, digestOfRecorded } from "../core/digest.ts";
import { AgentLoopConfigError, DefinitionChangedError, ReplayDivergenceError } from "../core/errors.ts";
import { readJournal } from "../events/journal.ts";
import { readModePin } from "../events/modePin.ts";
import type { Message, ModelResponse, NewEntry, RunStartedData, ToolCall } from "../events/types.ts";
import type { CallModelOutput, Interruption, PrepareOutput, ReplayOutput } from "../machines/agentLoop.machine.ts";
import { resolveModePin } from "../machines/modePin.machine.ts";
import { type DefinitionPin, definitionPin, describeChange, unacceptedChanges } from "../policies/definition.ts";
import { attemptError } from "../policies/retry.ts";
import { modelFrameId, modePinId, toolStepId } from "../projections/ids.ts";
import { foldEntries, responseAt } from "../projections/runState.ts";
import { Appender, type Fence } from "./appender.ts";
import type { AgentLoopConfig } from "./config.ts";
import {
  causeOf,
  modelPolicy,
  nextAttempt,
  runDeadline,
  timeoutError,
  waitUntil,
  withLimits,
} from "./failurePolicy.ts";
import { hydrateArchived } from "./readers.ts";
import type { RunSession } from "./session.ts";
import { prepareToolSources } from "./toolSources.ts";

/**
 * The loop machine's actors for one run: each does the journaled work the statechart asks for
 * (read and fold, call the model as a durable step, complete or interrupt the run).
 */
export function loopActors(session: RunSession, fence?: Fence) {
  const { config, options } = session;
  const runId = options.runId;

  const divergence = (frameId: string, what: string) => session.divergence(frameId, `a model frame ${what}`);

  const prepare = fromPromise<PrepareOutput, { runId: string }>(async () => {
    const entries = await readJournal(options.journal, runId);
    const state = foldEntries(entries);
    session.appender = new Appender(options.journal.store, runId, state, fence);
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
    session.mode = pin.mode;
    const pinEntry: NewEntry[] = pin.appendPin && pin.pin ? [{ type: "decision.recorded", data: pin.pin }] : [];
    if (state.status === "new") {
      if (options.input === undefined) {
        throw new AgentLoopConfigError(
          `run ${runId} has no journal yet, so it needs an input: call loop.run({ runId: "${runId}", input, journal })`,
          "missingInput",
        );
      }
      const lists = await prepareToolSources(session, state); // asked live, before anything is appended
      const deadline = runDeadline(config, state, Date.now());
      session.deadlineAt = deadline.deadlineAt;
      await session.appender.append(
        { type: "run.started", data: runStartedData(config, options.input) },
        ...pinEntry,
        ...lists,
        ...deadline.append,
      );
      return { kind: "ready" };
    }
    if (state.loopId !== config.id) {
      throw new ReplayDivergenceError(
        runId,
        modelFrameId(state.loopId ?? "?", 0),
        `run ${runId} was recorded by loop "${state.loopId}" but this loop is "${config.id}": its frame ids would not match; run it with the loop that recorded it.`,
      );
    }
    if (options.input !== undefined && digestOf(options.input).digest !== digestOfRecorded(state.input).digest) {
      throw new AgentLoopConfigError(
        `run ${runId} was started with another input; resume it without input (the recorded one is used) or start a new run.`,
        "inputMismatch",
      );
    }
    if (state.status === "completed") return { kind: "completed" };
    checkDefinition(runId, config, state.definition);
    const lists = await prepareToolSources(session, state); // journaled lists; a source's first one asked live
    // A late pin (ADR 0142 D3); a deadline configured after the run started runs from now.
    const deadline = runDeadline(config, state, Date.now());
    session.deadlineAt = deadline.deadlineAt;
    if (pinEntry.length > 0 || lists.length > 0 || deadline.append.length > 0)
      await session.appender.append(...pinEntry, ...lists, ...deadline.append);
    return { kind: "ready" };
  });

  const replay = fromPromise<ReplayOutput, { runId: string }>(async () => {
    const state = session.state;
    await hydrateArchived(options.journal, state);
    session.startConversation(state.input ?? "");
    for (let turn = 0; turn < state.turns; turn++) {
      const response = responseAt(state, turn) as ModelResponse;
      const frameId = modelFrameId(config.id, turn);
      const digest = session.nextPromptDigest();
      if (state.frames[frameId]?.inputDigest !== digest) {
        throw divergence(
          frameId,
          "with a prompt digest this run does not produce (the system prompt, input or a tool result differs)",
        );
      }
      session.modelAnswered(digest, response);
      if (response.toolCalls.length === 0) return { kind: "answered", turn, response };
      let open = false;
      for (let index = 0; index < response.toolCalls.length; index++) {
        const stepId = toolStepId(config.id, turn, index);
        await session.breathe();
        session.judgeToolFrame(stepId, response.toolCalls[index] as ToolCall);
        const fed = await session.fedFromJournal(stepId);
        if (fed) session.setFed(stepId, fed);
        else open = true;
      }
      if (open) return { kind: "dispatch", turn, response };
      session.pushToolResults(turn, response);
    }
    return { kind: "next-turn", turn: state.turns };
  });

  const callModel = fromPromise<CallModelOutput, { turn: number }>(async ({ input, signal }) => {
    const { turn } = input;
    if (turn > 0) session.pushToolResults(turn - 1, responseAt(session.state, turn - 1) as ModelResponse);
    const frameId = modelFrameId(config.id, turn);
    const digest = session.nextPromptDigest();
    const existing = session.state.frames[frameId];
    if (existing && (existing.effect !== "model" || existing.inputDigest !== digest)) {
      throw divergence(frameId, `for effect ${existing.effect} with another prompt digest`);
    }
    if (existing?.status === "completed") {
      const response = existing.output as ModelResponse;
      session.modelAnswered(digest, response);
      return { ok: true, response };
    }
    const runSignal = options.signal;
    if (runSignal?.aborted) return { ok: false, reason: "aborted", detail: null };
    const deadlineAt = session.deadlineAt;
    const now = Date.now();
    if (deadlineAt !== undefined && now >= deadlineAt) return pastDeadline(deadlineAt);
    const failed = session.state.attempts[frameId];
    // Resumed during a back-off (or woken early): wait what remains of it, as journaled.
    if (failed?.waiting && failed.retryAt !== null && failed.retryAt > now) {
      return { ok: false, retry: { attempt: failed.attempt, delayMs: waitUntil(failed.retryAt, now, deadlineAt) } };
    }
    const attempt = (failed?.attempt ?? 0) + 1;
    // Always, a re-run of a call whose outcome is unknown too (a new attempt): the fenced append
    // is what proves this process still owns the run before the model is called.
    await session.appender.append({ type: "frame.started", data: { frameId, effect: "model", inputDigest: digest } });
    const timeoutMs = config.timeouts?.modelAttemptMs;
    const callSignal = runSignal ? AbortSignal.any([runSignal, signal]) : signal;
    const result = await withLimits(callSignal, timeoutMs, deadlineAt, (s) =>
      config.model.generate({ messages: session.messages, tools: session.toolDescriptors, signal: s }),
    );
    if ("error" in result) {
      if (runSignal?.aborted || signal.aborted) return { ok: false, reason: "aborted", detail: null };
      if (result.stopped === "deadline") return pastDeadline(deadlineAt as number);
      const failedAt = Date.now();
      const error =
        result.stopped === "timeout"
          ? timeoutError(`model call ${frameId}`, timeoutMs as number)
          : attemptError(result.error, failedAt); // never throws, whatever the model threw
      const decision = nextAttempt(modelPolicy(config), attempt, failed?.spent ?? 0, error, failedAt);
      const retryAt = decision.retry ? decision.retryAt : null;
      await session.appender.append({ type: "attempt.failed", data: { frameId, attempt, error, retryAt } });
      if (decision.retry) {
        return { ok: false, retry: { attempt, delayMs: waitUntil(decision.retryAt, Date.now(), deadlineAt) } };
      }
      const cause = causeOf(error);
      // `detail` keeps the fields Loom 0.1.0 wrote (readers of it keep working); `cause` is the typed record.
      const detail = { frameId, name: cause.name, message: cause.message };
      return { ok: false, reason: "model-error", detail, cause };
    }
    const raw = result.value;
    if (signal.aborted) return { ok: false, reason: "aborted", detail: null };
    const response = normalizeResponse(raw);
    // Written with the next append (its tools' frame.started, or the run's end): nothing acts on it before.
    session.appender.defer({ type: "frame.completed", data: { frameId, output: response } });
    const recorded = responseAt(session.state, turn) as ModelResponse;
    session.modelAnswered(digest, recorded);
    return { ok: true, response: recorded };
  });

  // The log is not journaled again: the value returned is rebuilt from the frames (completedOutput).
  const complete = fromPromise<void, { turn: number; content: string }>(async ({ input }) => {
    await session.appender.append({
      type: "run.completed",
      data: { output: { content: input.content, iterations: input.turn + 1 } },
    });
  });

  const interrupt = fromPromise<void, Interruption & { turn: number; pending: string[] }>(async ({ input }) => {
    const { reason, detail, cause } = input;
    session.appender.close(reason);
    await session.appender.appendFinal({
      type: "run.interrupted",
      data: cause === undefined ? { reason, detail } : { reason, detail, cause },
    });
  });

  return { prepare, replay, callModel, complete, interrupt };
}

/** The run's deadline (`timeouts.runMs`, journaled at its start) has passed: it stops for good. */
function pastDeadline(deadlineAt: number): CallModelOutput {
  return { ok: false, reason: "deadline", detail: { deadlineAt: new Date(deadlineAt).toISOString() } };
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
  const out: { content?: string; toolCalls: ToolCall[]; usage?: ModelResponse["usage"] } = { toolCalls };
  if (typeof raw?.content === "string") out.content = raw.content;
  if (raw?.usage) out.usage = raw.usage;
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
    const text = JSON.stringify(value);
    return text === undefined ? null : JSON.parse(text);
  } catch {
    return null;
  }
}

/**
 * Refuses to go on with a run recorded under another definition of the loop than this one, unless
 * the loop accepts every change (`acceptDefinitionChanges`). Runs recorded before the pin pass.
 */
function checkDefinition(runId: string, config: AgentLoopConfig, recorded: DefinitionPin | undefined): void {
  if (recorded === undefined) return;
  const changes = unacceptedChanges(recorded, definitionPin(config), config.acceptDefinitionChanges);
  if (changes.length === 0) return;
  const kinds = [...new Set(changes.map((c) => c.kind))].filter((k) => k !== "system-changed");
  const accepts =
    kinds.length === changes.length
      ? `acceptDefinitionChanges: [${kinds.map((k) => JSON.stringify(k)).join(", ")}] in the loop's configuration`
      : "a system prompt change cannot be accepted: every model call's prompt digest covers it";
  throw new DefinitionChangedError(runId, config.id, changes.map(describeChange), accepts);
}

/**
 * The `run.started` a new run begins with: the loop id, the input in its JSON form, the tool names
 * and the definition pin. `loop.run` and `submitRun` write exactly this.
 */
export function runStartedData(config: AgentLoopConfig, input: string | readonly Message[]): RunStartedData {
  return {
    loopId: config.id,
    input: jsonForm(input) as string,
    tools: Object.keys(config.tools ?? {}),
    definition: definitionPin(config),
  };
}
