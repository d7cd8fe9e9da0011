import type { RunHolderInfo } from "../../core/errors.ts";
import { checkRunId } from "../../events/ids.ts";
import { readJournal } from "../../events/journal.ts";
import type { Journal } from "../../events/spi.ts";
import type { JournalEntry } from "../../events/types.ts";
import { foldEntries, type RunState } from "../../projections/runState.ts";
import { listPendingApprovals } from "./approvals.ts";

/**
 * What a run is doing, as an operator needs to know it. The journal's own status
 * (`RunState.status`) says `running` for every run whose journal does not end; this tells those
 * apart with the run's ownership, and tells an interruption for approvals that were all answered
 * from one that still waits:
 * - `running`: a live loop owns the run (its lease is current);
 * - `stalled`: nobody owns it and its journal does not end (its process crashed or was killed):
 *   it goes on only when resumed;
 * - `not-started`: nobody owns it and nothing was journaled past what was written before any loop
 *   ran it (a fork's copied entries, or a submitted run's `run.started`);
 * - `waiting-for-approval`: interrupted, a call waits for an approval no one gave yet;
 * - `answered`: interrupted for approvals that have all been answered since: it goes on when resumed;
 * - `interrupted`, `completed`, `failed`, `cancelled`, `new`: as the journal says.
 */
export type RunActivity =
  | "new"
  | "running"
  | "stalled"
  | "not-started"
  | "waiting-for-approval"
  | "answered"
  | "interrupted"
  | "completed"
  | "failed"
  | "cancelled";

/** What `runActivity` tells of a run. */
export interface RunActivityInfo {
  readonly activity: RunActivity;
  /** The live owner, for a `running` run whose store can say (`EventStore.holder`). */
  readonly holder?: RunHolderInfo;
  /**
   * False when the store cannot tell who owns a run (it has no `EventStore.holder`): a run whose
   * journal does not end is then `running`, whether a loop runs it or not.
   */
  readonly ownershipKnown: boolean;
}

/** What decides a run's activity besides its folded state (read from the store by `runActivity`). */
export interface ActivityFacts {
  /** The run's live owner; `"unknown"` when the store cannot tell. */
  readonly holder: RunHolderInfo | undefined | "unknown";
  /** Calls of an `approval-pending` run (its sub-agents' included) still waiting for an answer. */
  readonly pendingApprovals: number;
  /** The run's first entry (`run.started`), for a fork's marker. */
  readonly first: JournalEntry | undefined;
}

/**
 * A run's activity from its folded state and the facts the store gives: pure, no I/O.
 *
 * @example
 * activityOf(state, { holder: undefined, pendingApprovals: 0, first }); // "stalled" for a crashed run
 */
export function activityOf(state: RunState, facts: ActivityFacts): RunActivity {
  const { holder } = facts;
  switch (state.status) {
    case "running":
      if (holder === "unknown" || holder !== undefined) return "running";
      return notStarted(state, facts.first) ? "not-started" : "stalled";
    case "interrupted":
      if (state.interruption?.reason !== "approval-pending") return "interrupted";
      if (holder !== "unknown" && holder !== undefined) return "running"; // a resume holds it, not yet journaled
      return facts.pendingApprovals > 0 ? "waiting-for-approval" : "answered";
    default:
      return state.status;
  }
}

/**
 * Nothing past what was journaled before any loop ran the run: a fork's copied entries
 * (`forkedFrom.entries`, recorded by `forkRun`), or a lone `run.started` (`submitRun`).
 */
function notStarted(state: RunState, first: JournalEntry | undefined): boolean {
  const copied = first?.type === "run.started" ? first.data.forkedFrom?.entries : undefined;
  if (copied !== undefined) return state.version <= copied;
  return state.version === 1 && first?.type === "run.started";
}

/**
 * What a run is doing (see {@link RunActivity}): its journal folded, its owner asked of the store
 * (`EventStore.holder`), and, for a run interrupted for approvals, whether any still waits. Reads
 * only. `entries` are the run's entries when the caller read them already.
 *
 * @example
 * const { activity } = await runActivity(journal, "order-42");
 * if (activity === "stalled") await loop.run({ runId: "order-42", journal }); // its process died: go on
 */
export async function runActivity(
  journal: Journal,
  runId: string,
  entries?: readonly JournalEntry[],
): Promise<RunActivityInfo> {
  checkRunId(runId, "runActivity");
  const read = entries ?? (await readJournal(journal, runId));
  return activityOfFolded(journal, runId, foldEntries(read), read[0]);
}

/**
 * {@link runActivity} of a run already folded (`state`, and `first`, its first entry): what a
 * reader that keeps a run's state as entries are appended (the viewer's live page) asks, with
 * no second read and fold of the journal.
 */
export async function activityOfFolded(
  journal: Journal,
  runId: string,
  state: RunState,
  first: JournalEntry | undefined,
): Promise<RunActivityInfo> {
  const store = journal.store;
  const known = typeof store.holder === "function";
  const needsOwner = state.status === "running" || state.interruption?.reason === "approval-pending";
  const holder = !needsOwner ? undefined : known ? await store.holder?.(runId) : "unknown";
  const waiting =
    state.interruption?.reason === "approval-pending" && (holder === undefined || holder === "unknown")
      ? (await listPendingApprovals(journal, { runId })).length
      : 0;
  const activity = activityOf(state, { holder, pendingApprovals: waiting, first });
  return {
    activity,
    ownershipKnown: known,
    ...(activity === "running" && holder !== undefined && holder !== "unknown" ? { holder } : {}),
  };
}
