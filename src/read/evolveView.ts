import { decisionStepOf } from "../events/ids.ts";
import type { ModelResponse } from "../index.ts";
import {
  type ArchivedFrame,
  type AttemptError,
  digestOf,
  type JournalEntry,
  modelFrameId,
  modePinId,
  parseFrameId,
  toolStepId,
} from "../journal.ts";
import { asWaitChoice } from "../policies/wait.ts";
import {
  type CallView,
  CHUNK,
  callAt,
  chartStateOf,
  initialView,
  type RunView,
  type TurnView,
  turnAt,
} from "./runView.ts";

/**
 * What each journal entry does to a {@link RunView}. Handlers write to the view they are given:
 * in place for the run page, on an immer draft for time travel (src/viewer/travel.ts).
 */

/** Folds one entry into `view` (in place, or on an immer draft) and returns it. */
export function evolveView(view: RunView, entry: JournalEntry): RunView {
  view.runId = entry.runId;
  view.seq = entry.seq;
  view.lastType = entry.type;
  view.lastAt = entry.meta.at;
  switch (entry.type) {
    case "run.started":
      view.status = "running";
      view.loopId = entry.data.loopId;
      view.startedAt = entry.meta.at;
      break;
    case "frame.started":
      resumed(view);
      onStarted(view, entry.data.frameId, entry.meta.at);
      break;
    case "frame.completed":
      if (entry.data.failed) onFailed(view, entry.data.frameId, entry.meta.at);
      else onCompleted(view, entry.data.frameId, entry.data, entry.meta.at);
      break;
    case "attempt.failed":
      onAttemptFailed(view, entry.data.frameId, entry.data.error, entry.data.retryAt);
      break;
    case "decision.recorded":
      onDecision(view, entry.data.decisionId, entry.data.choice);
      break;
    case "call.settled": {
      const call = callAt(view, entry.data.stepId);
      if (call) {
        call.status = entry.data.status;
        call.settled = entry.data.reason;
        call.endedAt = entry.meta.at;
        const { digest, bytes } = digestOf(entry.data.result);
        call.digest = digest;
        call.bytes = bytes;
      }
      break;
    }
    case "frames.archived":
      for (const frameId of entry.data.frameIds) {
        const d = entry.data.digests[frameId];
        onArchived(view, frameId, d?.failed === true, d?.digest ?? null, d?.bytes ?? 0);
      }
      break;
    case "run.completed":
      view.status = "completed";
      view.answer = entry.data.output.content;
      break;
    case "run.interrupted": {
      view.status = "interrupted";
      const { reason, detail, cause } = entry.data;
      view.interruption = cause === undefined ? { reason, detail } : { reason, detail, cause };
      const stepIds = (detail as { stepIds?: unknown } | null)?.stepIds;
      view.pending =
        reason === "approval-pending" && Array.isArray(stepIds) ? stepIds.filter((s) => typeof s === "string") : [];
      for (const stepId of view.pending) {
        const call = callAt(view, stepId);
        if (call && (call.status === "asked" || call.status === "running")) call.status = "awaiting-approval";
      }
      break;
    }
    case "run.failed":
      nothingWaits(view);
      view.status = "failed";
      view.error = { name: entry.data.error.name, message: entry.data.error.message };
      break;
    case "run.cancelled":
      nothingWaits(view);
      view.status = "cancelled";
      view.cancelled = { reason: entry.data.reason };
      break;
    default: {
      // Every entry type is folded above: a new one must be added here (an older viewer shows it by seq).
      const unknown: never = entry;
      void unknown;
      break;
    }
  }
  view.chart = chartStateOf(view);
  return view;
}

/**
 * Puts back in `view` what compaction moved out of the journal for one frame (`readArchived`'s
 * entries: its start, earlier starts and completion): the model's text, usage and tool names,
 * a call's times. The frame's status stays the one its `frames.archived` marker gave; the run's
 * does not change (these entries are history, not news).
 */
export function evolveArchived(view: RunView, frame: ArchivedFrame): RunView {
  const { started, completed } = frame;
  const startedAt = frame.attempts?.[0]?.meta.at ?? started.meta.at; // its first start, as the journal had it
  const id = parseFrameId(started.data.frameId);
  if (id?.kind === "model") {
    const turn = ensureTurn(view, id.turn);
    turn.model.startedAt = startedAt;
    turn.model.endedAt = completed.meta.at;
    const response = (completed.data.failed ? {} : (completed.data.output ?? {})) as Partial<ModelResponse>;
    takeResponse(view, turn, response);
    const calls = Array.isArray(response.toolCalls) ? response.toolCalls : [];
    calls.forEach((c, j) => {
      const was = turn.calls[j];
      turn.calls[j] = was
        ? { ...was, toolName: c.name, input: c.input }
        : { stepId: toolStepId(id.loopId, id.turn, j), toolName: c.name, input: c.input, status: "asked", failures: 0 };
    });
  } else if (id?.kind === "tool") {
    const call = callAt(view, started.data.frameId);
    if (call) {
      call.startedAt = startedAt;
      call.endedAt = completed.meta.at;
    }
  }
  return view;
}

/** Folds entries into a fresh view, in place. */
export function foldView(entries: Iterable<JournalEntry>): RunView {
  let view = initialView();
  for (const entry of entries) view = evolveView(view, entry);
  return view;
}

function resumed(view: RunView): void {
  if (view.status === "interrupted") view.status = "running";
  nothingWaits(view);
}

/** The run goes on or ended: no call waits for an approval any more (each stands asked again). */
function nothingWaits(view: RunView): void {
  view.interruption = undefined;
  for (const stepId of view.pending) {
    const call = callAt(view, stepId);
    if (call?.status === "awaiting-approval") call.status = "asked";
  }
  view.pending = [];
}

/** The turn `t`, created (with the turns before it) when the journal reaches it. */
function ensureTurn(view: RunView, t: number): TurnView {
  while (view.turnCount <= t) {
    const index = view.turnCount;
    const chunk = view.chunks[Math.floor(index / CHUNK)];
    const turn: TurnView = {
      turn: index,
      stepId: modelFrameId(view.loopId ?? "?", index),
      model: { status: "started", failures: 0 },
      calls: [],
    };
    if (chunk) chunk.push(turn);
    else view.chunks.push([turn]);
    view.turnCount++;
  }
  return turnAt(view, t) as TurnView;
}

function onStarted(view: RunView, frameId: string, at: string): void {
  const id = parseFrameId(frameId);
  if (id?.kind === "model") {
    const model = ensureTurn(view, id.turn).model;
    model.status = "started";
    model.startedAt = at;
    model.retryAt = undefined;
  } else if (id?.kind === "tool") {
    const call = callAt(view, frameId);
    if (call) {
      // Started again while its last start has no outcome and no failed attempt awaits a retry: the
      // run that started it was cut off, and this one runs the tool again.
      if (call.status === "running" && call.retryAt === undefined) call.reruns = (call.reruns ?? 0) + 1;
      call.retryAt = undefined;
      call.status = "running";
      call.startedAt = at;
    }
  }
}

function onCompleted(
  view: RunView,
  frameId: string,
  data: { readonly output: unknown; readonly digest?: string | null; readonly bytes?: number },
  at: string,
): void {
  const id = parseFrameId(frameId);
  if (id?.kind === "model") {
    const turn = ensureTurn(view, id.turn);
    const response = (data.output ?? {}) as Partial<ModelResponse>;
    turn.model.status = "completed";
    turn.model.endedAt = at;
    takeResponse(view, turn, response);
    const calls = Array.isArray(response.toolCalls) ? response.toolCalls : [];
    turn.calls = calls.map((c, j) => ({
      stepId: toolStepId(id.loopId, id.turn, j),
      toolName: c.name,
      input: c.input,
      status: "asked",
      failures: 0,
    }));
  } else if (id?.kind === "tool") {
    const call = callAt(view, frameId);
    if (!call) return;
    call.status = "ok";
    call.endedAt = at;
    const { digest, bytes } =
      data.digest !== undefined ? { digest: data.digest, bytes: data.bytes ?? 0 } : digestOf(data.output);
    call.digest = digest;
    call.bytes = bytes;
  }
}

function onFailed(view: RunView, frameId: string, at: string): void {
  const id = parseFrameId(frameId);
  if (id?.kind === "model") {
    const turn = ensureTurn(view, id.turn);
    turn.model.status = "failed";
    turn.model.endedAt = at;
  } else {
    const call = callAt(view, frameId);
    if (call) {
      call.status = "error";
      call.endedAt = at;
    }
  }
}

function onAttemptFailed(view: RunView, frameId: string, error: AttemptError, retryAt: number | null): void {
  const id = parseFrameId(frameId);
  if (id?.kind === "model") {
    const model = ensureTurn(view, id.turn).model;
    model.failures++;
    model.lastError = error;
    model.retryAt = retryAt;
  } else {
    const call = callAt(view, frameId);
    if (call) {
      call.failures++;
      call.lastError = error;
      call.retryAt = retryAt;
    }
  }
}

function onDecision(view: RunView, decisionId: string, choice: unknown): void {
  if (view.loopId !== undefined && decisionId === modePinId(view.loopId)) {
    const mode = (choice as { mode?: unknown } | null)?.mode;
    if (mode === "full" || mode === "lean") view.mode = mode;
    return;
  }
  const stepId = decisionStepOf(decisionId, "approval");
  if (stepId !== undefined) {
    const call = callAt(view, stepId);
    if (call) {
      const answer = (choice ?? {}) as { approved?: unknown; by?: unknown; reason?: unknown };
      call.approval = {
        approved: answer.approved === true,
        ...(typeof answer.by === "string" ? { by: answer.by } : {}),
        ...(typeof answer.reason === "string" ? { reason: answer.reason } : {}),
      };
      // Answered (from another process, while the run stays interrupted): it waits for a resume now.
      if (call.status === "awaiting-approval") call.status = "asked";
    }
    if (view.pending.includes(stepId)) view.pending = view.pending.filter((s) => s !== stepId);
    return;
  }
  const waitStep = decisionStepOf(decisionId, "wait");
  if (waitStep !== undefined) {
    const call = callAt(view, waitStep);
    const wait = asWaitChoice(choice);
    if (call && wait) call.wait = wait;
    return;
  }
  const failedStep = decisionStepOf(decisionId, "outcome");
  if (failedStep !== undefined) {
    const call = callAt(view, failedStep);
    if (call) {
      call.status = "error";
      const { digest, bytes } = digestOf((choice as { failed?: unknown } | null)?.failed);
      call.digest = digest;
      call.bytes = bytes;
    }
  }
}

function onArchived(view: RunView, frameId: string, failed: boolean, digest: string | null, bytes: number): void {
  const id = parseFrameId(frameId);
  if (id?.kind === "model") {
    const model = ensureTurn(view, id.turn).model;
    model.status = failed ? "failed" : "completed";
    model.archived = true;
  } else if (id?.kind === "tool") {
    const turn = ensureTurn(view, id.turn);
    // The call's model frame may be archived too (its tool names with it): keep a placeholder.
    while (turn.calls.length <= id.index) {
      turn.calls.push({
        stepId: toolStepId(id.loopId, id.turn, turn.calls.length),
        toolName: "(archived)",
        input: undefined,
        status: "asked",
        failures: 0,
      });
    }
    const call = turn.calls[id.index] as CallView;
    call.status = failed ? "error" : "ok";
    call.archived = true;
    if (!failed) {
      call.digest = digest;
      call.bytes = bytes;
    }
  }
}

/** A model response's text, finish reason and usage, into its turn and the run's token count (live and archived alike). */
function takeResponse(view: RunView, turn: ReturnType<typeof ensureTurn>, response: Partial<ModelResponse>): void {
  if (typeof response.content === "string") turn.model.content = response.content;
  if (response.finishReason !== undefined) turn.model.finishReason = response.finishReason;
  if (response.usage) {
    turn.model.usage = response.usage;
    view.tokens.input += response.usage.inputTokens ?? 0;
    view.tokens.output += response.usage.outputTokens ?? 0;
    view.tokens.reported = true;
  }
}
