import { digestOf, digestOfRecorded } from "../core/digest.ts";
import { isModePinDecision } from "../events/modePin.ts";
import type { JournalEntry, ModelResponse, ToolCall } from "../events/types.ts";
import type { JournaledRunEvent } from "./events.ts";
import { DECISION_SOURCES, parseFrameId } from "./ids.ts";
import type { RunState } from "./runState.ts";
import type { ToolCallLogMode } from "./types.ts";

/**
 * The pure fold from a run's journal entries to its journaled `RunEvent`s (DESIGN §7.1): each
 * event carries its entry's `seq` as `cursor`. `loop.stream`, `run({ onEvent })` and `followRun`
 * all fold through it, so every watcher of a run sees the same events.
 */
/**
 * What the event fold keeps between entries: the run's loop, the shape tool outputs are shown in,
 * the model's responses (which name each tool call), the tool steps already started and each
 * frame's last failed attempt. Mutated in place by {@link evolveRunEvents}, like `RunState`.
 *
 * @example
 * ```ts
 * const state: RunEventState = initialRunEventState({}, foldEntries(entries)); // go on after `entries`
 * ```
 */
export interface RunEventState {
  loopId: string | undefined;
  /** The shape asked for; undefined follows the run's mode pin (full when it has none). */
  readonly requested: ToolCallLogMode | undefined;
  /** The run's mode pin, once folded. */
  pinned: ToolCallLogMode | undefined;
  readonly responses: Map<number, ModelResponse>;
  /** Tool steps whose `tool-started` was given (a retried attempt starts its frame again: not told twice). */
  readonly toolsStarted: Set<string>;
  /** Tool names by step id, from each tool frame's effect (when the response naming it was archived). */
  readonly toolNames: Map<string, string>;
  /** The last failed attempt per frame id: the next `frame.started` is that number plus one. */
  readonly failedAttempts: Map<string, number>;
  /**
   * Model frames asked and not yet answered (no `frame.completed`, no `attempt.failed` since their
   * `frame.started`): one started again was asked again by a resume, so its deltas so far are void.
   */
  readonly asking: Set<string>;
}

/**
 * How events are folded: `mode` shows tool outputs (`full`) or only their digests (`lean`).
 *
 * @example
 * ```ts
 * runEventsOf(entries, { mode: "lean" } satisfies RunEventOptions);
 * ```
 */
export interface RunEventOptions {
  /** `lean`: `tool-finished` carries `digest` and `bytes`, no `output`. Default: the run's mode pin, else `full`. */
  readonly mode?: ToolCallLogMode;
}

/**
 * A fresh event fold, or (given the run's folded state) one that goes on after the entries that
 * state was folded from: what the runtime uses when it resumes a run and streams what it appends.
 *
 * @example
 * ```ts
 * const state = initialRunEventState({ mode: "lean" });
 * for (const entry of entries) for (const event of evolveRunEvents(state, entry)) console.log(event.type, event.cursor);
 * ```
 */
export function initialRunEventState(options: RunEventOptions = {}, from?: RunState): RunEventState {
  const state: RunEventState = {
    loopId: undefined,
    requested: options.mode,
    pinned: undefined,
    responses: new Map(),
    toolsStarted: new Set(),
    toolNames: new Map(),
    failedAttempts: new Map(),
    asking: new Set(),
  };
  if (from === undefined) return state;
  state.loopId = from.loopId;
  for (const decision of Object.values(from.decisions)) if (isModePinDecision(decision)) state.pinned = pinOf(decision);
  for (const frame of Object.values(from.frames)) {
    const parsed = parseFrameId(frame.frameId);
    if (parsed?.kind === "model" && frame.status === "completed" && "output" in frame)
      state.responses.set(parsed.turn, frame.output as ModelResponse);
    if (parsed?.kind === "model" && frame.status === "started" && from.attempts[frame.frameId]?.waiting !== true)
      state.asking.add(frame.frameId);
    if (parsed?.kind === "tool") {
      state.toolsStarted.add(frame.frameId);
      state.toolNames.set(frame.frameId, frame.effect.slice("tool:".length));
    }
  }
  for (const [frameId, attempts] of Object.entries(from.attempts)) state.failedAttempts.set(frameId, attempts.attempt);
  return state;
}

/**
 * The events one journal entry gives, each carrying the entry's `seq` as `cursor`, folding the
 * entry into `state`. Pure: no clock, no I/O. Entries must come in seq order, from the run's first
 * (or after the state `initialRunEventState` was seeded with).
 *
 * A tool's failed attempt (`attempt.failed` of a tool step) gives no event, and its next attempt's
 * `frame.started` no second `tool-started`: a watcher sees each tool call start once and finish
 * once (`tool-finished` with status `error` when the last attempt failed). A model frame started
 * again with no `frame.completed` or `attempt.failed` since its last start (a resume asks a call
 * whose process died, or that was aborted) gives `reset` (that attempt's deltas are void) before
 * its `model-started`, both at its cursor. Compaction markers give
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
      state.toolNames.set(frameId, effect.startsWith("tool:") ? effect.slice("tool:".length) : effect);
      const call = callOf(state, frameId);
      return [
        {
          type: "tool-started",
          runId,
          cursor,
          stepId: frameId,
          toolName: toolNameOf(state, frameId),
          input: call?.input,
        },
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
        return [
          {
            type: "model-finished",
            runId,
            cursor,
            stepId: data.frameId,
            turn: parsed.turn,
            content: response.content,
            toolCalls: Array.isArray(response.toolCalls) ? response.toolCalls : [],
            ...(response.usage === undefined ? {} : { usage: response.usage }),
            ...(response.finishReason === undefined ? {} : { finishReason: response.finishReason }),
          },
        ];
      }
      if (parsed?.kind !== "tool") return [];
      const { digest, bytes } =
        data.digest !== undefined ? { digest: data.digest, bytes: data.bytes ?? 0 } : digestOf(data.output);
      return [toolFinished(state, runId, cursor, data.frameId, "ok", digest, bytes, data.output)];
    }
    case "decision.recorded": {
      const { decisionId, source, choice } = entry.data;
      if (isModePinDecision(entry.data)) {
        state.pinned = pinOf(entry.data);
        return [];
      }
      if (source === DECISION_SOURCES.outcome && decisionId.endsWith(":outcome")) {
        const stepId = decisionId.slice(0, -":outcome".length);
        const failed = (choice as { failed?: unknown } | null)?.failed;
        const { digest, bytes } = digestOf(failed);
        return [toolFinished(state, runId, cursor, stepId, "error", digest, bytes, failed)];
      }
      if (source === DECISION_SOURCES.approval && decisionId.endsWith(":approval")) {
        const { approved, by } = (choice ?? {}) as { approved?: unknown; by?: unknown };
        const stepId = decisionId.slice(0, -":approval".length);
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

function pinOf(decision: { readonly choice: unknown }): ToolCallLogMode | undefined {
  const mode = (decision.choice as { mode?: unknown } | null)?.mode;
  return mode === "full" || mode === "lean" ? mode : undefined;
}

/** The call a tool step answers, from the response of its turn (undefined once that was archived). */
function callOf(state: RunEventState, stepId: string): ToolCall | undefined {
  const parsed = parseFrameId(stepId);
  if (parsed?.kind !== "tool") return undefined;
  const calls = state.responses.get(parsed.turn)?.toolCalls;
  return Array.isArray(calls) ? calls[parsed.index] : undefined;
}

function toolNameOf(state: RunEventState, stepId: string): string {
  return callOf(state, stepId)?.name ?? state.toolNames.get(stepId) ?? "";
}

function toolFinished(
  state: RunEventState,
  runId: string,
  cursor: number,
  stepId: string,
  status: "ok" | "error",
  digest: string | null,
  bytes: number,
  output: unknown,
): JournaledRunEvent {
  const lean = (state.requested ?? state.pinned ?? "full") === "lean";
  const toolName = toolNameOf(state, stepId);
  return { type: "tool-finished", runId, cursor, stepId, toolName, status, digest, bytes, ...(lean ? {} : { output }) };
}
