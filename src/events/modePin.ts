import { JournalFormatError } from "../core/errors.ts";
import type { DecisionRecordedData } from "./types.ts";

/**
 * The mode pin's grammar (the tool-call log's shape, fixed for a run): the `<loop>#toolCallLog`
 * decision, source `agent-tool-call-log`, choice `{ mode: "full" | "lean" }`. {@link readModePin}
 * is the one reader of a recorded pin: the journal's validator, the run state's readers, the
 * runtime and the CLI all go through it, so a damaged pin is refused everywhere instead of ignored
 * somewhere.
 */

/** A shape of the tool-call log a run can be pinned to. */
export type PinnedMode = "full" | "lean";

/** The `source` of a mode-pin decision. */
export const MODE_PIN_SOURCE = "agent-tool-call-log";

/** What a mode pin's decision id ends with (`<loop>#toolCallLog`). */
export const MODE_PIN_SUFFIX = "#toolCallLog";

/** Whether a decision is a mode pin (by its source or its id, so altering one still reads as a pin). */
export const isModePinDecision = (d: Pick<DecisionRecordedData, "decisionId" | "source">): boolean =>
  d.source === MODE_PIN_SOURCE || (typeof d.decisionId === "string" && d.decisionId.endsWith(MODE_PIN_SUFFIX));

/**
 * The mode a pin decision records. Anything but `{ mode: "full" | "lean" }` raises
 * `JournalFormatError` naming the run, the seq (when known) and the decision id: a run whose pin
 * cannot be read is never resumed, rebuilt or shown in a shape it may not have.
 *
 * @example
 * readModePin("run-1", { decisionId: "support#toolCallLog", source: "agent-tool-call-log", choice: { mode: "lean" } }, 2); // "lean"
 */
export function readModePin(runId: string, decision: DecisionRecordedData, seq?: number): PinnedMode {
  const mode = (decision.choice as { readonly mode?: unknown } | null | undefined)?.mode;
  if (mode === "full" || mode === "lean") return mode;
  throw new JournalFormatError(
    runId,
    seq,
    "data.choice.mode",
    `the mode pin ${decision.decisionId} holds ${JSON.stringify(decision.choice) ?? "nothing"}, not { mode: "full" | "lean" }; the journal was altered or written by another program: restore it from a backup, or start a new run`,
  );
}
