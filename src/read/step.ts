import type { Journal } from "../index.ts";
import {
  foldRun,
  hydrateArchived,
  parseFrameId,
  type ResolvedStep,
  type RunState,
  readRunState,
  resolveStep,
  verifyTurnResults,
} from "../journal.ts";
import { endedToolCallAt } from "../projections/toolCallLog.ts";

/**
 * One step's output resolved and verified: what `loom show <stepId>` prints and the viewer's step
 * page shows, read by this one function so both say the same thing.
 */

/** A resolved step, with what it is (a model or a tool call) and what vouches for its output. */
export interface ShownStep extends ResolvedStep {
  readonly kind: "model" | "tool";
  /** The tool's name (a tool step that ended). */
  readonly toolName: string | undefined;
  /** The model call it belongs to. */
  readonly iteration: number | undefined;
  /** What checked the output, in words; empty when nothing records it yet. */
  readonly verified: readonly string[];
}

/**
 * Resolves `stepId` (in run `runId`, or the one run that holds it) and verifies its output
 * against everything that records it. A step it cannot resolve is resolveStep's
 * `StepResolutionError` (`unknownStep`, `ambiguousStep`, `stepNotEnded`).
 *
 * @example
 * const step = await showStep(journal, "loom-demo#turn:3:tool:0", "done-1");
 * step.verified; // ["the digest its frame recorded", "the prompt digest of the next model call (…) covers it"]
 */
export async function showStep(journal: Journal, stepId: string, runId: string | undefined): Promise<ShownStep> {
  const step = await resolveStep(journal, stepId, runId === undefined ? undefined : { runId });
  // One fold of the run serves the log entry and the checks.
  const state = await hydrateArchived(journal, await stepState(journal, step.runId, stepId));
  // The step's own turn, as the lean log would name it (not a projection of every turn).
  const ended = endedToolCallAt(state, stepId);
  const frame = parseFrameId(stepId);
  return {
    ...step,
    kind: frame?.kind ?? "tool",
    toolName: ended?.call.name,
    iteration: ended?.iteration ?? frame?.turn,
    verified: await verify(journal, state, step),
  };
}

/**
 * The run's state as far as one step goes: its latest snapshot (a compact one too) plus the
 * entries after it. A compact state holds the frames of the last two turns (the step's and the
 * next model call, which vouches for it); a step older than those reads the whole run.
 */
async function stepState(journal: Journal, runId: string, stepId: string): Promise<RunState> {
  const { state } = await readRunState(journal, runId, { compact: true });
  const below = state.compacted?.belowTurn;
  const turn = parseFrameId(stepId)?.turn;
  if (below === undefined || turn === undefined || turn >= below) return state;
  return foldRun(journal, runId);
}

/**
 * What vouches for the resolved output: the compaction marker's digest (checked by resolveStep),
 * the blob's own hash (claim-check), and the prompt digest of the model call that followed, which
 * covers everything fed back in that turn (`IntegrityError` when it no longer does).
 */
async function verify(journal: Journal, state: RunState, step: ResolvedStep): Promise<string[]> {
  const verified: string[] = [];
  if (step.source === "archive") verified.push("the digest in the compaction's frames.archived marker");
  // resolveStep compared the output with the digest its frame recorded (frames written by Loom after 0.1.0).
  // A redacted output is not the one its frame's digest (the original's) covers: nothing hashes it.
  if (step.source === "frame" && state.frames[step.stepId]?.recorded && (!step.redacted || step.redacted.blob))
    verified.push("the digest its frame recorded");
  if (step.claimCheck) verified.push("the blob's sha256 in its claim-check envelope");
  const turn = parseFrameId(step.stepId)?.turn;
  if (turn !== undefined) {
    const next = await verifyTurnResults(journal, state, turn);
    if (next) verified.push(`the prompt digest of the next model call (${next}) covers it`);
  }
  return verified;
}
