import { digestOf, digestOfRecorded } from "../core/digest.ts";
import { DECISION_SOURCES, decisionStepOf, type ParsedFrameId, parseFrameId } from "../events/ids.ts";
import { isModePinDecision } from "../events/modePin.ts";
import type { JournalEntry, ModelResponse, ToolCall } from "../events/types.ts";
import { initialRunEventState, pinOf, type RunEventOptions, type RunEventState } from "./eventFoldState.ts";
import type { JournaledRunEvent } from "./runEvents.ts";

export { initialRunEventState, type RunEventOptions, type RunEventState } from "./eventFoldState.ts";

/**
 * The pure fold from a run's journal entries to its journaled `RunEvent`s: each
 * event carries its entry's `seq` as `cursor`. `loop.stream`, `run({ onEvent })` and `followRun`
 * all fold through it, so every watcher of a run sees the same events.
 */
/**
 * The events one journal entry gives, each carrying the entry's `seq` as `cursor`, folding the
 * entry into `state`. Pure: no clock, no I/O. Entries must come in seq order, from the run's first
 * (or after the state `initialRunEventState` was seeded with).
 *
 * A tool's failed attempt (`attempt.failed` of a tool step) gives no event, and its next attempt's
 * `frame.started` no second `tool-started`: a watcher sees each tool call start once and finish
 * once (`tool-finished` with status `error` when the last attempt failed). A model call's failed
 * attempt gives `reset` (its deltas are void) and `model-retrying`; a model frame started again
 * with no `frame.completed` or `attempt.failed` since its last start (a resume asks a call whose
 * process died, or that was aborted) gives `reset` before its `model-started`, both at its cursor. Compaction markers give
 * nothing: to get a compacted run's events, fold the entries of the frames a marker moved in their
 * place, at their seqs, as `followRun` does (it reads them back from the archive).
 *
 * @example
 * ```ts
 * const state = initialRunEventState();
 * evolveRunEvents(state, entry); // e.g. [{ type: "model-started", runId, cursor: 3, stepId, turn: 0, attempt: 1 }]
 * ```
 */
export function evolveRunEvents(state: RunEventState, entry: JournalEntry): JournaledRunEvent[] {
  const runId = entry.runId;
  const cursor = entry.seq;
  switch (entry.type) {
    case "run.started":
      state.loopId = entry.data.loopId;
      return [{ type: "run-started", runId, cursor, loopId: entry.data.loopId, input: entry.data.input }];
    case "frame.started": {
      const { frameId, effect } = entry.data;
      const parsed = parseFrameId(frameId);
      if (parsed?.kind === "model") {
        const attempt = (state.failedAttempts.get(frameId) ?? 0) + 1;
        const started: JournaledRunEvent = {
          type: "model-started",
          runId,
          cursor,
          stepId: frameId,
          turn: parsed.turn,
          attempt,
        };
        if (!state.asking.has(frameId)) {
          state.asking.add(frameId);
          return [started];
        }
        // Asked again with no end to the attempt before (its process died, or it was aborted): the
        // deltas a watcher got of that attempt are void, also for one that reconnects here.
        return [{ type: "reset", runId, cursor, stepId: frameId, attempt }, started];
      }
      if (parsed?.kind !== "tool" || state.toolsStarted.has(frameId)) return [];
      state.toolsStarted.add(frameId);
      const toolName = effect.startsWith("tool:") ? effect.slice("tool:".length) : effect;
      state.toolNames.set(frameId, toolName);
      const call = callAt(state, parsed);
      return [
        { type: "tool-started", runId, cursor, stepId: frameId, toolName: call?.name ?? toolName, input: call?.input },
      ];
    }
    case "frame.completed": {
      const data = entry.data;
      const parsed = parseFrameId(data.frameId);
      state.asking.delete(data.frameId);
      if (data.failed) return []; // a failed tool's result is its outcome decision, which follows
      if (parsed?.kind === "model") {
        const response = (data.output ?? { toolCalls: [] }) as ModelResponse;
        state.responses.set(parsed.turn, response);
        const toolCalls = Array.isArray(response.toolCalls) ? response.toolCalls : [];
        const { content, usage, finishReason } = response;
        const finished: Mutable<Extract<JournaledRunEvent, { type: "model-finished" }>> = {
          type: "model-finished",
          runId,
          cursor,
          stepId: data.frameId,
          turn: parsed.turn,
          content,
          toolCalls,
        };
        // Set only when there (no `usage: undefined`), without a spread's copy.
        if (usage !== undefined) finished.usage = usage;
        if (finishReason !== undefined) finished.finishReason = finishReason;
        return [finished];
      }
      if (parsed?.kind !== "tool") return [];
      const name = toolNameAt(state, data.frameId, parsed);
      if (data.digest !== undefined) {
        const bytes = data.bytes ?? 0;
        return [toolFinished(state, runId, cursor, data.frameId, name, "ok", data.digest, bytes, data.output)];
      }
      const { digest, bytes } = digestOf(data.output);
      return [toolFinished(state, runId, cursor, data.frameId, name, "ok", digest, bytes, data.output)];
    }
    case "decision.recorded": {
      const { decisionId, source, choice } = entry.data;
      if (isModePinDecision(entry.data)) {
        state.pinned = pinOf(entry.data);
        return [];
      }
      const failedStep = decisionStepOf(decisionId, "outcome");
      if (source === DECISION_SOURCES.outcome && failedStep !== undefined) {
        const failed = (choice as { failed?: unknown } | null)?.failed;
        const { digest, bytes } = digestOf(failed);
        const name = toolNameOf(state, failedStep);
        return [toolFinished(state, runId, cursor, failedStep, name, "error", digest, bytes, failed)];
      }
      const stepId = decisionStepOf(decisionId, "approval");
      if (source === DECISION_SOURCES.approval && stepId !== undefined) {
        const { approved, by } = (choice ?? {}) as { approved?: unknown; by?: unknown };
        return [
          {
            type: "approval-decided",
            runId,
            cursor,
            stepId,
            approved: approved === true,
            ...(typeof by === "string" ? { by } : {}),
          },
        ];
      }
      return [];
    }
    case "call.settled": {
      const { stepId, status, reason } = entry.data;
      return [{ type: "call-settled", runId, cursor, stepId, toolName: toolNameOf(state, stepId), status, reason }];
    }
    case "attempt.failed": {
      const { frameId, attempt, error, retryAt } = entry.data;
      state.failedAttempts.set(frameId, attempt);
      if (parseFrameId(frameId)?.kind !== "model") return [];
      state.asking.delete(frameId);
      return [
        { type: "reset", runId, cursor, stepId: frameId, attempt }, // its deltas are void, also for a reconnecting client
        {
          type: "model-retrying",
          runId,
          cursor,
          stepId: frameId,
          attempt,
          error: {
            name: error.name,
            message: error.message,
            ...(error.status === undefined ? {} : { status: error.status }),
            retryable: error.retryable,
          },
          retryAt: retryAt === null ? null : new Date(retryAt).toISOString(),
        },
      ];
    }
    case "run.interrupted": {
      const { reason, detail, cause } = entry.data;
      const requested: JournaledRunEvent[] = [];
      if (reason === "approval-pending") {
        const stepIds = (detail as { stepIds?: unknown } | null)?.stepIds;
        for (const stepId of Array.isArray(stepIds) ? stepIds : []) {
          if (typeof stepId !== "string") continue;
          if (state.toolsStarted.has(stepId)) continue; // a sub-agent's call: its child run asks (its events nest)
          const input = callOf(state, stepId)?.input;
          const inputDigest = digestOfRecorded(input).digest;
          const toolName = toolNameOf(state, stepId);
          requested.push({ type: "approval-requested", runId, cursor, stepId, toolName, input, inputDigest });
        }
      }
      const interrupted: JournaledRunEvent = {
        type: "run-interrupted",
        runId,
        cursor,
        reason,
        detail,
        ...(cause === undefined ? {} : { cause }),
      };
      return [...requested, interrupted];
    }
    case "run.completed": {
      const { content, iterations } = entry.data.output;
      return [{ type: "run-completed", runId, cursor, content, iterations }];
    }
    case "run.failed":
      return [{ type: "run-failed", runId, cursor, error: entry.data.error }];
    case "run.cancelled":
      return [{ type: "run-cancelled", runId, cursor, reason: entry.data.reason }];
    case "frames.archived":
      return [];
    default: {
      const never: never = entry;
      throw new Error(`unhandled entry ${JSON.stringify(never)}`);
    }
  }
}

/**
 * A run's journaled events, in order: every entry's events, each with the entry's seq as `cursor`.
 * Of a compacted run's hot entries, the archived frames' events are missing: `followRun` gives them.
 *
 * @example
 * ```ts
 * const events = runEventsOf(await readJournal(journal, "r-1"), { mode: "lean" });
 * events.filter((e) => e.type === "tool-finished"); // digests and bytes, no outputs
 * ```
 */
export function runEventsOf(entries: Iterable<JournalEntry>, options: RunEventOptions = {}): JournaledRunEvent[] {
  const state = initialRunEventState(options);
  const events: JournaledRunEvent[] = [];
  for (const entry of entries) for (const event of evolveRunEvents(state, entry)) events.push(event);
  return events;
}

/**
 * Whether `entry` is a run's last (for now): `run.completed`, `run.failed`, `run.cancelled` end it
 * for good; `run.interrupted` until it is resumed.
 *
 * @example
 * ```ts
 * if (isRunEnd(entry)) console.log(`run ${entry.runId} stopped at ${entry.seq}`);
 * ```
 */
export function isRunEnd(entry: { readonly type: string }): boolean {
  const type: string = entry.type;
  return type === "run.completed" || type === "run.failed" || type === "run.cancelled" || type === "run.interrupted";
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** The call a tool step answers, from the response of its turn (undefined once that was archived). */
function callOf(state: RunEventState, stepId: string): ToolCall | undefined {
  const parsed = parseFrameId(stepId);
  return parsed?.kind === "tool" ? callAt(state, parsed) : undefined;
}

/** {@link callOf} of a step id already parsed. */
function callAt(state: RunEventState, parsed: Extract<ParsedFrameId, { kind: "tool" }>): ToolCall | undefined {
  const calls = state.responses.get(parsed.turn)?.toolCalls;
  return Array.isArray(calls) ? calls[parsed.index] : undefined;
}

function toolNameOf(state: RunEventState, stepId: string): string {
  return callOf(state, stepId)?.name ?? state.toolNames.get(stepId) ?? "";
}

function toolNameAt(state: RunEventState, stepId: string, parsed: Extract<ParsedFrameId, { kind: "tool" }>): string {
  return callAt(state, parsed)?.name ?? state.toolNames.get(stepId) ?? "";
}

function toolFinished(
  state: RunEventState,
  runId: string,
  cursor: number,
  stepId: string,
  toolName: string,
  status: "ok" | "error",
  digest: string | null,
  bytes: number,
  output: unknown,
): JournaledRunEvent {
  if ((state.requested ?? state.pinned ?? "full") === "lean")
    return { type: "tool-finished", runId, cursor, stepId, toolName, status, digest, bytes };
  return { type: "tool-finished", runId, cursor, stepId, toolName, status, digest, bytes, output };
}
