import { approvalId, modePinId, outcomeId, waitId } from "../events/ids.ts";
import type { ModelResponse } from "../index.ts";
import {
  type AttemptError,
  type Digest,
  digestOf,
  type ErrorCause,
  type FrameState,
  type InterruptReason,
  modelFrameId,
  parseFrameId,
  type RunState,
  type RunStatus,
  type SettledReason,
  toolStepId,
} from "../journal.ts";
import { chartStateOf, type JournalChartState } from "../machines/chartState.ts";
import { asWaitChoice, type WaitChoice } from "../policies/wait.ts";

/**
 * What the faces show of a run (the viewer's pages, `loom show`): its timeline turn by turn (model
 * call, tool calls with status, bytes and duration, failed attempts, approvals) and the statechart
 * state it was in. Derived from the run's folded state ({@link runViewOf}), the same state a
 * resume trusts, so what a person sees cannot drift from what the run will do.
 */

/** One tool call of a turn, as far as the journal tells at this point. */
export interface CallView {
  readonly stepId: string;
  readonly toolName: string;
  readonly input: unknown;
  /** asked: in the model's response, not started; running: started, not ended (in flight, or outcome unknown). */
  status: "asked" | "running" | "awaiting-approval" | "ok" | "error";
  startedAt?: string;
  endedAt?: string;
  bytes?: number;
  digest?: string | null;
  /** How the call ended without running (a refusal, a declined approval, a built-in). */
  settled?: SettledReason;
  /** Failed attempts (`attempt.failed`), the last one's error. */
  failures: number;
  lastError?: AttemptError;
  /** When the next attempt is due (ms since the epoch), while the call waits for it after a failed attempt. */
  retryAt?: number | null;
  /**
   * Times it started again with no outcome recorded for its run before (cut off by a crash, a kill
   * or a stop, then run again on resume): the tool ran more than once.
   */
  reruns?: number;
  /** The answer to its approval: approved or declined, by whom, why (as recorded). */
  approval?: {
    readonly approved: boolean;
    readonly by?: string;
    readonly reason?: string;
    /** The input a person approved instead of the model's (edit and approve): the call ran with it. */
    readonly editedInput?: unknown;
    /** `run` or `session`: the answer also approved the tool's later calls there. */
    readonly scope?: "run" | "session";
  };
  /** Moved to the archive by compaction. */
  archived?: boolean;
  /** What the call waits for (its `<stepId>:wait`: a time or an event), once it began waiting. */
  wait?: WaitChoice;
}

/** One model call and the tool calls it asked for. */
export interface TurnView {
  readonly turn: number;
  readonly stepId: string;
  model: {
    status: "started" | "completed" | "failed";
    startedAt?: string;
    endedAt?: string;
    failures: number;
    lastError?: AttemptError;
    /** When the next attempt is due (ms since the epoch), while the step waits for it. */
    retryAt?: number | null;
    content?: string;
    usage?: ModelResponse["usage"];
    finishReason?: string;
    archived?: boolean;
  };
  calls: CallView[];
}

/** A run as the viewer shows it at one point of its journal. */
export interface RunView {
  runId: string | undefined;
  loopId: string | undefined;
  /** The seq of the last entry folded (0: none). */
  seq: number;
  /** The type of that entry. */
  lastType: string | undefined;
  status: RunStatus;
  /** The agentLoop statechart state the run was in (`running.callingModel`…): see `chartStateOf`. */
  chart: JournalChartState;
  startedAt: string | undefined;
  lastAt: string | undefined;
  /** The turns, in order: `turns[t]` is turn t. */
  turns: TurnView[];
  turnCount: number;
  tokens: { input: number; output: number; reported: boolean };
  interruption: { reason: InterruptReason; detail: unknown; cause?: ErrorCause } | undefined;
  error: { name: string; message: string } | undefined;
  /** Why a cancelled run was cancelled (`cancelRun`). */
  cancelled: { reason: string } | undefined;
  answer: string | undefined;
  /** Step ids the last `approval-pending` interruption named, while it stands. */
  pending: string[];
  /** The log's recorded shape (the mode pin), when one was journaled. */
  mode: "full" | "lean" | undefined;
}

/** The turn at index `t`, or undefined. */
export const turnAt = (view: RunView, t: number): TurnView | undefined => view.turns[t];

/** Every turn, in order. */
export function* turnsOf(view: RunView): Generator<TurnView> {
  yield* view.turns;
}

/** The tool call `stepId` (`<loop>#turn:<i>:tool:<j>`), once its model call asked for it. */
export function callAt(view: RunView, stepId: string): CallView | undefined {
  const id = parseFrameId(stepId);
  if (id?.kind !== "tool") return undefined;
  return turnAt(view, id.turn)?.calls[id.index];
}

/**
 * The view of a run with this folded state (`foldEntries`, `foldRun`; hydrated, its archived
 * frames show their texts and tool names). Derived anew on each call: keep the state, not the view.
 *
 * @example
 * const view = runViewOf(foldEntries(await readJournal(journal, "r-1")));
 * view.chart; // "running.dispatching"
 */
export function runViewOf(state: RunState): RunView {
  const loopId = state.loopId ?? "?";
  const turns: TurnView[] = [];
  const tokens = { input: 0, output: 0, reported: false };
  const { count: turnCount, archivedCalls } = turnsReached(state);
  for (let t = 0; t < turnCount; t++) turns.push(turnViewOf(state, loopId, t, archivedCalls.get(t) ?? 0, tokens));
  const running = state.status === "interrupted" ? state.interruption : undefined;
  const pending = running?.reason === "approval-pending" ? pendingOf(state, running.detail) : [];
  for (const stepId of pending) {
    const call = callAtStep(turns, stepId);
    if (call && (call.status === "asked" || call.status === "running")) call.status = "awaiting-approval";
  }
  const mode = (state.loopId === undefined ? undefined : state.decisions[modePinId(state.loopId)])?.choice as
    | { mode?: unknown }
    | null
    | undefined;
  return {
    runId: state.runId,
    loopId: state.loopId,
    seq: state.version,
    lastType: state.lastType,
    status: state.status,
    chart: chartStateOf(state),
    startedAt: state.startedAt,
    lastAt: state.lastAt,
    turns,
    turnCount,
    tokens,
    interruption:
      running === undefined
        ? undefined
        : running.cause === undefined
          ? { reason: running.reason, detail: running.detail }
          : { reason: running.reason, detail: running.detail, cause: running.cause },
    error:
      state.status === "failed" && state.error ? { name: state.error.name, message: state.error.message } : undefined,
    cancelled: state.status === "cancelled" && state.cancelled ? { reason: state.cancelled.reason } : undefined,
    answer: state.status === "completed" ? state._output?.content : undefined,
    pending,
    mode: mode?.mode === "full" || mode?.mode === "lean" ? mode.mode : undefined,
  };
}

/**
 * The turns the frames reach (a model call started, or an archived call's turn) and, by turn, one
 * past the last archived call: what stands of a turn whose response was archived unread.
 */
function turnsReached(state: RunState): { count: number; archivedCalls: Map<number, number> } {
  let count = state.turns;
  const archivedCalls = new Map<number, number>();
  for (const frameId in state.frames) {
    const id = parseFrameId(frameId);
    if (id === undefined) continue;
    if (id.kind === "tool") {
      if (state.frames[frameId]?.archived === undefined) continue;
      archivedCalls.set(id.turn, Math.max(archivedCalls.get(id.turn) ?? 0, id.index + 1));
    }
    if (id.turn >= count) count = id.turn + 1;
  }
  return { count, archivedCalls };
}

function turnViewOf(
  state: RunState,
  loopId: string,
  t: number,
  archivedCalls: number,
  tokens: RunView["tokens"],
): TurnView {
  const stepId = modelFrameId(loopId, t);
  const frame = state.frames[stepId];
  const model: TurnView["model"] = { status: frame?.status ?? "started", failures: 0 };
  if (frame?.startedAt !== undefined) model.startedAt = frame.startedAt;
  if (frame?.endedAt !== undefined) model.endedAt = frame.endedAt;
  takeAttempts(state, stepId, model);
  if (frame?.archived) model.archived = true;
  const response = responseOf(frame);
  if (response) {
    if (typeof response.content === "string") model.content = response.content;
    if (response.finishReason !== undefined) model.finishReason = response.finishReason;
    if (response.usage) {
      model.usage = response.usage;
      tokens.input += response.usage.inputTokens ?? 0;
      tokens.output += response.usage.outputTokens ?? 0;
      tokens.reported = true;
    }
  }
  const calls: CallView[] = [];
  if (response) {
    const asked = Array.isArray(response.toolCalls) ? response.toolCalls : [];
    asked.forEach((c, j) => {
      calls.push(callViewOf(state, toolStepId(loopId, t, j), c.name, c.input));
    });
  } else {
    // The response was archived unread: its archived calls stand, named only by their step ids.
    for (let j = 0; j < archivedCalls; j++)
      calls.push(callViewOf(state, toolStepId(loopId, t, j), "(archived)", undefined));
  }
  return { turn: t, stepId, model, calls };
}

/** A model frame's response, when its output is at hand (a failed or unread archived frame has none). */
function responseOf(frame: FrameState | undefined): Partial<ModelResponse> | undefined {
  if (frame?.status !== "completed" || !("output" in frame)) return undefined;
  return (frame.output ?? {}) as Partial<ModelResponse>;
}

function callViewOf(state: RunState, stepId: string, toolName: string, input: unknown): CallView {
  const frame = state.frames[stepId];
  const settled = state.settled[stepId];
  const outcome = state.decisions[outcomeId(stepId)];
  const call: CallView = { stepId, toolName, input, status: "asked", failures: 0 };
  if (frame) {
    call.status = frame.status === "started" ? "running" : frame.status === "completed" ? "ok" : "error";
    if (frame.startedAt !== undefined) call.startedAt = frame.startedAt;
    if (frame.endedAt !== undefined) call.endedAt = frame.endedAt;
    if (frame.reruns) call.reruns = frame.reruns;
    if (frame.archived) {
      call.archived = true;
      if (frame.status === "completed")
        Object.assign(call, { digest: frame.archived.digest, bytes: frame.archived.bytes });
    } else if (frame.status === "completed") {
      const { digest, bytes } = frame.recorded ?? digestOfKept(frame, frame.output);
      Object.assign(call, { digest, bytes });
    }
  }
  if (outcome) {
    call.status = "error";
    const { digest, bytes } = digestOfKept(outcome, (outcome.choice as { failed?: unknown } | null)?.failed);
    Object.assign(call, { digest, bytes });
  }
  if (settled) {
    call.status = settled.status;
    call.settled = settled.reason;
    const at = state.settledAt[stepId];
    if (at !== undefined) call.endedAt = at;
    const { digest, bytes } = digestOfKept(settled, settled.result);
    Object.assign(call, { digest, bytes });
  }
  takeAttempts(state, stepId, call);
  const approval = state.decisions[approvalId(stepId)];
  if (approval) {
    const answer = (approval.choice ?? {}) as {
      approved?: unknown;
      by?: unknown;
      reason?: unknown;
      approvedInput?: unknown;
      approvedInputDigest?: unknown;
      scope?: unknown;
    };
    call.approval = {
      approved: answer.approved === true,
      ...(typeof answer.by === "string" ? { by: answer.by } : {}),
      ...(typeof answer.reason === "string" ? { reason: answer.reason } : {}),
      ...(typeof answer.approvedInputDigest === "string" ? { editedInput: answer.approvedInput } : {}),
      ...(answer.scope === "run" || answer.scope === "session" ? { scope: answer.scope } : {}),
    };
  }
  const wait = asWaitChoice(state.decisions[waitId(stepId)]?.choice);
  if (wait) call.wait = wait;
  return call;
}

/** A step's failed attempts: how many, the last one's error, and the next attempt's time while it waits for it. */
function takeAttempts(
  state: RunState,
  frameId: string,
  into: { failures: number; lastError?: AttemptError; retryAt?: number | null },
): void {
  const attempts = state.attempts[frameId];
  if (!attempts) return;
  into.failures = attempts.attempt; // numbered over the whole journal: the count of failed attempts
  into.lastError = attempts.error;
  if (attempts.waiting) into.retryAt = attempts.retryAt;
}

/** The calls the standing `approval-pending` interruption names that have no answer yet. */
function pendingOf(state: RunState, detail: unknown): string[] {
  const stepIds = (detail as { stepIds?: unknown } | null)?.stepIds;
  if (!Array.isArray(stepIds)) return [];
  return stepIds.filter((s): s is string => typeof s === "string" && state.decisions[approvalId(s)] === undefined);
}

function callAtStep(turns: readonly TurnView[], stepId: string): CallView | undefined {
  const id = parseFrameId(stepId);
  return id?.kind === "tool" ? turns[id.turn]?.calls[id.index] : undefined;
}

/**
 * Digests computed once per recorded object (a frame, a decision, a settled call): a view derived
 * again for each page of a live run does not digest the same outputs again.
 */
const digests = new WeakMap<object, Digest>();
function digestOfKept(holder: object, value: unknown): Digest {
  let d = digests.get(holder);
  if (d === undefined) digests.set(holder, (d = digestOf(value)));
  return d;
}
