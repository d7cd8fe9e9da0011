import type { Journal } from "../../events/spi.ts";
import type { PriceTable } from "../../policies/budget.ts";
import {
  type DiffOptions,
  diffRuns,
  type RunDiff,
  type RunDiffSide,
  runDiffSideOf,
} from "../../projections/runDiff.ts";
import { projectToolCallLog } from "../../projections/toolCallLog.ts";
import { foldRun, hydrateForLog } from "../base/readers.ts";
import { usageOfRun } from "../steps/budget.ts";

/** Options of {@link readDiffSide}. */
export interface ReadDiffSideOptions {
  /** Prices by model id: with them the side's usage counts a cost (as a `cost` budget does). */
  readonly prices?: PriceTable;
}

/**
 * One side of a {@link diffRuns} read from a journal: the run's lean tool-call log, its model
 * calls (with the digests of their prompts and responses), its answer, and what it spent. An
 * unknown run is an empty side: check the run exists first where that matters.
 *
 * @example
 * ```ts
 * const diff = diffRuns(await readDiffSide(journal, "r-1"), await readDiffSide(replays, "r-1"));
 * ```
 */
export async function readDiffSide(
  journal: Journal,
  runId: string,
  options: ReadDiffSideOptions = {},
): Promise<RunDiffSide> {
  const state = await foldRun(journal, runId);
  await hydrateForLog(journal, state, "lean");
  const usage = usageOfRun(state, undefined, options.prices);
  return runDiffSideOf(state, projectToolCallLog(state, "lean"), {
    modelCalls: usage.modelCalls,
    inputTokens: usage.inputTokens,
    outputTokens: usage.outputTokens,
    ...(options.prices ? { cost: usage.cost } : {}),
  });
}

/** Where one side of {@link diffJournaledRuns} is: a run of a journal. */
export interface DiffRunRef {
  readonly journal: Journal;
  readonly runId: string;
}

/**
 * Diffs two journaled runs (of one journal or two): {@link readDiffSide} on each, then
 * {@link diffRuns}.
 *
 * @example
 * ```ts
 * const diff = await diffJournaledRuns({ journal, runId: "r-1" }, { journal: replays, runId: "r-1" });
 * diff.identical; // true when the replay made the same calls with the same results
 * ```
 */
export async function diffJournaledRuns(
  a: DiffRunRef,
  b: DiffRunRef,
  options: DiffOptions & ReadDiffSideOptions = {},
): Promise<RunDiff> {
  const [sideA, sideB] = await Promise.all([
    readDiffSide(a.journal, a.runId, options),
    readDiffSide(b.journal, b.runId, options),
  ]);
  return diffRuns(sideA, sideB, options);
}
