import { digestOf } from "../core/digest.ts";
import { errorGuard, LoomError } from "../core/errors.ts";
import { modelFrameId, modePinId, outcomeId, parseFrameId, toolStepId } from "../events/ids.ts";
import { readModePin } from "../events/modePin.ts";
import type { ModelResponse, ToolCall } from "../events/types.ts";
import type { RunState } from "./runState.ts";
import type { AgentOutput, AgentStep, LeanAgentStep, ToolCallLogMode } from "./types.ts";

/**
 * The tool-call log: a pure projection of a run's folded state, in the full or
 * the lean shape, at any point of the run's life. A call is in the log once it has ended: its
 * frame completed, its tool failed (the `<stepId>:outcome` decision), or it was settled without
 * running (`call.settled`). Calls still in flight or awaiting approval are not. Order: by
 * iteration, then by the call's index in the model response.
 */

/**
 * An archived frame's output is needed but was not read back from the archive (the full shape,
 * or a model frame moved by compaction). Hydrate the state first: `hydrateArchived(journal,
 * state)`, or use `rebuildToolCallLog(journal, runId, mode)`, which does it.
 */
export class ArchivedOutputError extends LoomError {
  readonly runId: string | undefined;
  readonly frameId: string;
  constructor(runId: string | undefined, frameId: string) {
    super(
      "archivedOutputNotHydrated",
      `run ${runId}: frame ${frameId} was moved to the archive by compaction and its output is not in this state; read it back with hydrateArchived(journal, state) first, or call rebuildToolCallLog(journal, runId, mode) (the lean shape needs no tool output).`,
    );
    this.runId = runId;
    this.frameId = frameId;
  }
}

/** True when `e` is an `ArchivedOutputError`. */
export const isArchivedOutputError = errorGuard(ArchivedOutputError, { codes: ["archivedOutputNotHydrated"] });

/** Where an ended tool call's result is recorded. */
export type ToolCallSource = "frame" | "outcome" | "settled";

/** How a tool call ended, as the journal records it. */
export interface ToolCallResult {
  readonly stepId: string;
  readonly source: ToolCallSource;
  /** The isError flag the model was fed. */
  readonly status: "ok" | "error";
  /** Whether `output` holds what the model was fed; false for an archived frame not hydrated. */
  readonly hasOutput: boolean;
  /** What the model was fed: the frame output (or claim-check envelope), `choice.failed`, or the settled result. */
  readonly output: unknown;
  /** Set for a frame compaction moved to the archive: its ref and the output's digest and bytes. */
  readonly archived?: { readonly ref: string; readonly digest: string | null; readonly bytes: number };
  /** `digestOf(output)` as the frame recorded it, when it did (not verified here: see resolveStep). */
  readonly recorded?: { readonly digest: string | null; readonly bytes: number };
}

/** A call of the log: where the model asked for it, and how it ended. */
export interface EndedToolCall {
  readonly iteration: number;
  readonly index: number;
  readonly call: ToolCall;
  readonly result: ToolCallResult;
}

/**
 * How the tool call `stepId` ended, or undefined while it has not (in flight, awaiting approval)
 * or when the run has no such call.
 *
 * @example
 * toolCallResult(state, "support#turn:0:tool:0"); // { source: "frame", status: "ok", output: {...}, ... }
 */
export function toolCallResult(state: RunState, stepId: string): ToolCallResult | undefined {
  const frame = state.frames[stepId];
  if (frame?.status === "completed") {
    const hasOutput = !frame.archived || "output" in frame;
    return {
      stepId,
      source: "frame",
      status: "ok",
      hasOutput,
      output: frame.output,
      ...(frame.archived ? { archived: frame.archived } : {}),
      ...(frame.recorded ? { recorded: frame.recorded } : {}),
    };
  }
  // A failed frame ends the call once its outcome decision says what the model was fed.
  const outcome = frame?.status === "failed" ? state.decisions[outcomeId(stepId)] : undefined;
  if (outcome) {
    const choice = outcome.choice as { readonly failed?: unknown } | null | undefined;
    return { stepId, source: "outcome", status: "error", hasOutput: true, output: choice?.failed };
  }
  const settled = state.settled[stepId];
  if (settled) return { stepId, source: "settled", status: settled.status, hasOutput: true, output: settled.result };
  return undefined;
}

/**
 * The ended tool calls of a run, by iteration then index. Throws {@link ArchivedOutputError} when a
 * model frame (which names the calls) was archived and not hydrated.
 */
export function* endedToolCalls(state: RunState): Generator<EndedToolCall> {
  const loopId = state.loopId;
  if (loopId === undefined) return;
  const turns = state.turns;
  for (let iteration = 0; iteration < turns; iteration++) {
    const response = modelResponse(state, loopId, iteration);
    if (!response) continue;
    const calls = Array.isArray(response.toolCalls) ? response.toolCalls : [];
    for (let index = 0; index < calls.length; index++) {
      const result = toolCallResult(state, toolStepId(loopId, iteration, index));
      if (result) yield { iteration, index, call: calls[index] as ToolCall, result };
    }
  }
}

/**
 * The ended tool call `stepId` names, as {@link endedToolCalls} yields it (undefined where it
 * yields none for that id), looking at its turn alone: what a reader of one step (`showStep`)
 * asks, without walking every turn of a long run.
 *
 * @example
 * endedToolCallAt(state, "support#turn:3:tool:0")?.call.name; // "search"
 */
export function endedToolCallAt(state: RunState, stepId: string): EndedToolCall | undefined {
  const loopId = state.loopId;
  const parsed = parseFrameId(stepId);
  if (loopId === undefined || parsed?.kind !== "tool") return undefined;
  const { turn: iteration, index } = parsed;
  if (iteration >= state.turns || toolStepId(loopId, iteration, index) !== stepId) return undefined;
  const response = modelResponse(state, loopId, iteration);
  if (!response) return undefined;
  const calls = Array.isArray(response.toolCalls) ? response.toolCalls : [];
  if (index >= calls.length) return undefined;
  const result = toolCallResult(state, stepId);
  return result ? { iteration, index, call: calls[index] as ToolCall, result } : undefined;
}

function modelResponse(state: RunState, loopId: string, turn: number): ModelResponse | undefined {
  const frame = state.frames[modelFrameId(loopId, turn)];
  if (frame?.status === "completed" && !frame.archived) return frame.output as ModelResponse;
  if (!frame?.archived || frame.status !== "completed") return undefined; // not answered yet
  if (!("output" in frame)) throw new ArchivedOutputError(state.runId, frame.frameId);
  return frame.output as ModelResponse;
}

/**
 * The run's tool-call log in `mode`'s shape: full `{ iteration, toolName, toolInput, toolOutput }`
 * or lean `{ iteration, toolName, toolInput, status, bytes, digest, stepId }`. Pure; never throws
 * for an odd output (no JSON form: `digest: null, bytes: 0`). The full shape of an archived frame
 * needs its output: it throws {@link ArchivedOutputError} unless the state was hydrated.
 *
 * @example
 * const state = foldEntries(await readJournal(journal, "run-1"));
 * projectToolCallLog(state, "lean"); // [{ iteration: 0, toolName: "search", toolInput, status: "ok", bytes, digest, stepId }]
 */
export function projectToolCallLog(state: RunState, mode: "full"): AgentStep[];
export function projectToolCallLog(state: RunState, mode: "lean"): LeanAgentStep[];
export function projectToolCallLog(state: RunState, mode: ToolCallLogMode): AgentStep[] | LeanAgentStep[];
export function projectToolCallLog(state: RunState, mode: ToolCallLogMode): AgentStep[] | LeanAgentStep[] {
  if (mode === "lean") {
    const lean: LeanAgentStep[] = [];
    for (const ended of endedToolCalls(state)) lean.push(leanEntry(ended));
    return lean;
  }
  const full: AgentStep[] = [];
  for (const ended of endedToolCalls(state)) full.push(fullEntry(state, ended));
  return full;
}

function fullEntry(state: RunState, { iteration, call, result }: EndedToolCall): AgentStep {
  if (!result.hasOutput) throw new ArchivedOutputError(state.runId, result.stepId);
  return { iteration, toolName: call.name, toolInput: call.input, toolOutput: result.output };
}

function leanEntry({ iteration, call, result }: EndedToolCall): LeanAgentStep {
  // The frame (or, once archived, its marker) records digestOf(output): the lean shape hashes
  // nothing and reads no archive. Older frames without it are hashed here.
  const { digest, bytes } =
    result.recorded ?? (result.hasOutput || !result.archived ? digestOf(result.output) : result.archived);
  return {
    iteration,
    toolName: call.name,
    toolInput: call.input,
    status: result.status,
    bytes,
    digest,
    stepId: result.stepId,
  };
}

/**
 * Turns a full entry lean: its output replaced by `digestOf(toolOutput)` (the digest of its
 * canonical JSON), the status the model was fed, and the step id that resolves the output. Never
 * throws.
 *
 * @example
 * toLeanStep({ iteration: 0, toolName: "search", toolInput: { q: "x" }, toolOutput: { hits: [] } }, "support#turn:0:tool:0", "ok");
 * // { iteration: 0, toolName: "search", toolInput: { q: "x" }, status: "ok", bytes: 11, digest: "…", stepId: "support#turn:0:tool:0" }
 */
export function toLeanStep(full: AgentStep, stepId: string, status: "ok" | "error"): LeanAgentStep {
  const { digest, bytes } = digestOf(full.toolOutput);
  return {
    iteration: full.iteration,
    toolName: full.toolName,
    toolInput: full.toolInput,
    status,
    bytes,
    digest,
    stepId,
  };
}

/**
 * The value of a completed run, as the loop returns it: `run.completed`'s `{ content, iterations }`
 * with the tool-call log projected in `mode`'s shape between them (the key order the value always
 * had). Undefined unless the run completed. Like {@link projectToolCallLog}, the full shape needs
 * archived outputs hydrated.
 *
 * @example
 * const state = await hydrateArchived(journal, await foldRun(journal, "run-1"));
 * completedOutput(state, "full"); // { content, toolCallLog, iterations }, equal to what loop.run returned
 */
export function completedOutput(state: RunState, mode: ToolCallLogMode): AgentOutput | undefined {
  const value = state._output;
  if (state.status !== "completed" || value === undefined) return undefined;
  return { content: value.content, toolCallLog: projectToolCallLog(state, mode), iterations: value.iterations };
}

/**
 * Narrows a log entry to the lean shape.
 *
 * @example
 * const outputs = output.toolCallLog.map((s) => (isLeanAgentStep(s) ? s.digest : s.toolOutput));
 */
export function isLeanAgentStep(step: AgentStep | LeanAgentStep): step is LeanAgentStep {
  return typeof (step as Partial<LeanAgentStep>).stepId === "string" && "status" in step && "digest" in step;
}

/**
 * Narrows a whole log to the full shape: true for a full log and for an empty one.
 *
 * @example
 * if (isFullToolCallLog(output.toolCallLog)) takesAgentSteps(output.toolCallLog);
 */
export function isFullToolCallLog(log: AgentStep[] | LeanAgentStep[]): log is AgentStep[] {
  return log.every((step) => !isLeanAgentStep(step));
}

/**
 * The mode pin the run's journal recorded (`<loop>#toolCallLog`), if any, read with the journal's
 * one pin reader (`readModePin`): a pin that is not `{ mode: "full" | "lean" }` raises
 * `JournalFormatError` naming the run and the decision.
 *
 * @example
 * resolveModePin({ loopId, runId, recorded: recordedModePin(state), configured, runCompleted: state.status === "completed" });
 */
export function recordedModePin(state: RunState): ToolCallLogMode | undefined {
  if (state.loopId === undefined) return undefined;
  const pin = state.decisions[modePinId(state.loopId)];
  return pin ? readModePin(state.runId ?? "?", pin) : undefined;
}
