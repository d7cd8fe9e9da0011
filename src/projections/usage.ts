import { parseFrameId } from "../events/ids.ts";
import type { RunState } from "./runState.ts";

/** Tokens a run's model calls used, summed from the usage its model frames recorded. */
export interface TokenUsage {
  readonly inputTokens: number;
  readonly outputTokens: number;
  /** Model calls whose frames recorded a usage. */
  readonly counted: number;
  /** Model calls whose output was archived (`compact`) and not read back: not in the sums. */
  readonly archived: number;
}

/**
 * The run's token usage: the `usage` each completed model frame recorded, summed. Frames whose
 * output was compacted away are counted in `archived` (hydrate the state first to include them).
 *
 * @example
 * const { inputTokens, outputTokens } = tokenUsage(await foldRun(journal, "r-1"));
 */
export function tokenUsage(state: RunState): TokenUsage {
  let inputTokens = 0;
  let outputTokens = 0;
  let counted = 0;
  let archived = 0;
  for (const frame of Object.values(state.frames)) {
    if (frame.status !== "completed" || parseFrameId(frame.frameId)?.kind !== "model") continue;
    if (!("output" in frame)) {
      archived++;
      continue;
    }
    const usage = (frame.output as { usage?: { inputTokens?: unknown; outputTokens?: unknown } } | null)?.usage;
    if (!usage) continue;
    counted++;
    if (typeof usage.inputTokens === "number") inputTokens += usage.inputTokens;
    if (typeof usage.outputTokens === "number") outputTokens += usage.outputTokens;
  }
  return { inputTokens, outputTokens, counted, archived };
}
