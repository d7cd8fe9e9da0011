/** The state the RunEvent fold (eventFold.ts) keeps between entries, fresh or seeded from a folded journal. */

import { parseFrameId } from "../events/ids.ts";
import { isModePinDecision } from "../events/modePin.ts";
import type { ModelResponse } from "../events/types.ts";
import type { RunState } from "./runState.ts";
import type { ToolCallLogMode } from "./types.ts";

/**
 * What the event fold keeps between entries: the run's loop, the shape tool outputs are shown in,
 * the model's responses (which name each tool call), the tool steps already started and each
 * frame's last failed attempt. Mutated in place by `evolveRunEvents` (eventFold.ts), like `RunState`.
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

/** The shape a mode pin decision asks for, if it names one. */
export function pinOf(decision: { readonly choice: unknown }): ToolCallLogMode | undefined {
  const mode = (decision.choice as { mode?: unknown } | null)?.mode;
  return mode === "full" || mode === "lean" ? mode : undefined;
}
