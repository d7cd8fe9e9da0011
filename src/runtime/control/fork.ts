import { approvalId, checkRunId, outcomeId } from "../../events/ids.ts";
import { readJournal } from "../../events/journal.ts";
import { uncompactedEntries } from "../../events/readArchived.ts";
import type { Journal } from "../../events/spi.ts";
import type { ForkedFromData, JournalEntry, NewEntry } from "../../events/types.ts";
import { RunControlError } from "./errors.ts";

/** What `forkRun` is asked for. */
export interface ForkOptions {
  /**
   * Where the fork starts: a step id (the fork holds what came before that step, and runs the
   * step again when resumed) or a seq of the source (the fork holds the entries before it: the
   * run as a crash at that point would have left it).
   */
  readonly at: string | number;
  /** The new run's id (a run id not yet in the journal). */
  readonly newRunId: string;
}

/** What `forkRun` made. */
export interface ForkResult {
  readonly runId: string;
  /**
   * The marker its `run.started` holds: the source run, the seq the fork starts at, the step,
   * and how many entries were copied.
   */
  readonly forkedFrom: ForkedFromData;
  /** Entries copied into the new run. */
  readonly entries: number;
}

/**
 * Forks a run: a new run `newRunId` whose journal is the source's up to `at` (a step id or a
 * seq), its `run.started` marked with where it came from (`forkedFrom`). Resuming it
 * (`loop.run({ runId: newRunId, journal })`) goes on from there, so a changed tool, prompt
 * handling or model can be tried on the same history; the source is not touched. Forking at a
 * step keeps the results of the steps that had started before it (a tool running beside it
 * does not run again). A compacted source is copied with its archived frames put back (read
 * from the archive, verified against their markers), and claim-checked outputs keep their blob
 * refs (the same blob store), so every output of the fork resolves. Refused with
 * `RunControlError`: an unknown source (`runNotFound`), an `at` that names no step or seq of it
 * (`forkPointNotFound`), or a `newRunId` already in the journal (`runExists`).
 *
 * @example
 * await forkRun(journal, "order-42", { at: "support#turn:2:model", newRunId: "order-42-retry" });
 * const out = await loopWithNewModel.run({ runId: "order-42-retry", journal }); // from turn 2 on
 */
export async function forkRun(journal: Journal, runId: string, options: ForkOptions): Promise<ForkResult> {
  checkRunId(runId, "forkRun");
  const { at, newRunId } = options;
  checkRunId(newRunId, "forkRun");
  const hot = await readJournal(journal, runId);
  if (hot.length === 0) {
    throw new RunControlError(
      "runNotFound",
      runId,
      `run ${runId} is not in this journal; check the run id (loom runs)`,
    );
  }
  if ((await journal.store.read(newRunId, { from: 1 })).length > 0) {
    throw new RunControlError(
      "runExists",
      newRunId,
      `run ${newRunId} is in the journal already; fork into a new run id (--as <newRunId>)`,
    );
  }
  const history = await uncompactedEntries(journal, runId, hot); // archived frames put back, verified
  const seq = forkPoint(runId, history, at);
  const kept = history.filter((e) => e.seq < seq);
  if (typeof at === "string") kept.push(...resultsOfStartedSteps(history, seq, at));
  const copied = kept.length; // the fork's journal before anyone resumes it (`runActivity`: not-started)
  const forkedFrom: ForkedFromData =
    typeof at === "string" ? { runId, seq, stepId: at, entries: copied } : { runId, seq, entries: copied };
  const entries = kept.map(
    (e): NewEntry =>
      e.type === "run.started"
        ? { type: e.type, data: { ...e.data, forkedFrom } }
        : ({ type: e.type, data: e.data } as NewEntry),
  );
  await journal.store.append(newRunId, entries, { expectedVersion: 0 });
  return { runId: newRunId, forkedFrom, entries: entries.length };
}

/** Whether `entry` is about step `stepId`: its frame, its settlement, its approval or outcome. */
function concerns(entry: JournalEntry, stepId: string): boolean {
  switch (entry.type) {
    case "frame.started":
    case "frame.completed":
    case "attempt.failed":
      return entry.data.frameId === stepId;
    case "call.settled":
      return entry.data.stepId === stepId;
    case "decision.recorded":
      return entry.data.decisionId === approvalId(stepId) || entry.data.decisionId === outcomeId(stepId);
    default:
      return false;
  }
}

/** The seq the fork starts at: the step's first entry, or the seq given (at most one past the last). */
function forkPoint(runId: string, history: readonly JournalEntry[], at: string | number): number {
  const last = history.at(-1)?.seq ?? 0;
  if (typeof at === "number") {
    if (Number.isInteger(at) && at >= 2 && at <= last + 1) return at;
    throw new RunControlError(
      "forkPointNotFound",
      runId,
      `run ${runId} has seqs 1 to ${last}: fork it at a seq from 2 (after its run.started) to ${last + 1} (all of it), not ${at}`,
    );
  }
  const first = history.find((e) => concerns(e, at));
  if (first !== undefined && first.seq >= 2) return first.seq;
  throw new RunControlError(
    "forkPointNotFound",
    runId,
    `run ${runId} has no step ${at}: fork it at a step it ran (a model call <loop>#turn:<i>:model or a tool call <loop>#turn:<i>:tool:<j>; loom show ${runId} lists them) or at a seq`,
  );
}

/**
 * Forking at a step: the results (completion, failed attempts, outcome) of the other steps that
 * had started before it, even when journaled after it, so they are served instead of run again.
 */
function resultsOfStartedSteps(history: readonly JournalEntry[], seq: number, stepId: string): JournalEntry[] {
  const started = new Set<string>();
  for (const e of history) {
    if (e.seq >= seq) break;
    if (e.type === "frame.started") started.add(e.data.frameId);
  }
  started.delete(stepId);
  return history.filter((e) => {
    if (e.seq < seq) return false;
    if (e.type === "frame.completed" || e.type === "attempt.failed") return started.has(e.data.frameId);
    if (e.type !== "decision.recorded" || !e.data.decisionId.endsWith(":outcome")) return false;
    return started.has(e.data.decisionId.slice(0, -":outcome".length));
  });
}
