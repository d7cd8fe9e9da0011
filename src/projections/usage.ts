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

/** The tokens one model response reported (its `usage`), 0 where a figure is missing. */
export interface CallTokens {
  readonly inputTokens: number;
  readonly outputTokens: number;
}

/**
 * What each completed model call of a run recorded of its tokens, in no set order: the tokens its
 * response reported, `"none"` for a response without a usage, `"archived"` for one whose output
 * was compacted away and not read back. The one fold of a run's token usage: the totals a run
 * shows ({@link tokenUsage}) and what a budget counts are both summed from it.
 *
 * @example
 * for (const tokens of modelCallTokens(state)) if (tokens === "archived") console.log("hydrate first");
 */
export function* modelCallTokens(state: RunState): Generator<CallTokens | "none" | "archived"> {
  for (const frame of Object.values(state.frames)) {
    if (frame.status !== "completed" || parseFrameId(frame.frameId)?.kind !== "model") continue;
    if (!("output" in frame)) {
      yield "archived";
      continue;
    }
    yield callTokens((frame.output as { usage?: unknown } | null)?.usage) ?? "none";
  }
}

/**
 * A response's `usage` as {@link CallTokens} (figures that are not finite numbers count 0), or
 * undefined when it has none.
 *
 * @example
 * callTokens({ inputTokens: 12 }); // { inputTokens: 12, outputTokens: 0 }
 */
export function callTokens(usage: unknown): CallTokens | undefined {
  if (!usage) return undefined;
  const u = usage as { inputTokens?: unknown; outputTokens?: unknown };
  return { inputTokens: finiteOr0(u.inputTokens), outputTokens: finiteOr0(u.outputTokens) };
}

const finiteOr0 = (n: unknown): number => (typeof n === "number" && Number.isFinite(n) ? n : 0);

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
  for (const tokens of modelCallTokens(state)) {
    if (tokens === "archived") archived++;
    else if (tokens !== "none") {
      counted++;
      inputTokens += tokens.inputTokens;
      outputTokens += tokens.outputTokens;
    }
  }
  return { inputTokens, outputTokens, counted, archived };
}
