import { type Journal, readJournal } from "../index.ts";
import { foldEntries, type JournalEntry, parseFrameId, type RunState, readRunTail, runIdProblem } from "../journal.ts";
import { entryBytes } from "../projections/runSnapshot.ts";
import { activityOfFolded } from "../runtime/control/activity.ts";
import { type RunInfo, resumeRefusalOf, runInfoOfState } from "./runInfo.ts";
import { parentAmong, type RunParent, startedCalls } from "./runsTree.ts";

/**
 * A run's row of `loom runs` and of the viewer's runs page, read from the run's latest snapshot
 * and the entries after it: the snapshot's facts (entries, bytes, first entry, and what a compact
 * state left out) stand for the entries before it. A run without a snapshot, with one written
 * without facts, or compacted since (a `frames.archived` marker after it) is read in full, as
 * before. Either way the row equals `runInfoOf` of every entry.
 */

/** What {@link readRunRow} read of a run: its row, and the tool calls it started (for its sub-agents' rows). */
export interface RunRowRead {
  readonly info: RunInfo;
  /** The tool calls it started (`startedCalls`), of the turns at or above {@link callsFrom}. */
  readonly calls: ReadonlySet<string>;
  /** Set when read from a compact snapshot: `calls` leaves out the turns below it. */
  readonly callsFrom?: number;
  /** Entries read for it: the tail after its snapshot, or every entry. */
  readonly read: number;
}

/**
 * A run's row (`runInfoOf`), reading only what follows its latest snapshot when the snapshot says
 * enough of the entries before it (see this module).
 *
 * @example
 * const { info, read } = await readRunRow(journal, "run-1");
 * info.entries; // 400,002 after reading `read` (412) of them
 */
export async function readRunRow(journal: Journal, runId: string): Promise<RunRowRead> {
  const tail = await readRunTail(journal, runId, { compact: true });
  const facts = tail.facts;
  if (tail.snapshotSeq === 0 || facts === undefined) {
    // No snapshot, or one that cannot stand for the entries before it: every entry, as before.
    const entries = tail.snapshotSeq === 0 ? tail.entries : await readJournal(journal, runId);
    const state = tail.snapshotSeq === 0 ? tail.state : foldEntries(entries);
    const { activity } = await activityOfFolded(journal, runId, state, entries[0]);
    const info = runInfoOfState(
      runId,
      state,
      {
        entries: entries.length,
        bytes: bytesOf(entries),
        startedAt: entries[0]?.meta.at,
        updatedAt: entries.at(-1)?.meta.at,
      },
      activity,
      await resumeRefusalOf(journal, state),
    );
    return {
      info,
      calls: startedCalls(entries),
      read: tail.entries.length + (tail.snapshotSeq === 0 ? 0 : entries.length),
    };
  }
  const state = tail.state;
  const { activity } = await activityOfFolded(journal, runId, state, facts.first);
  const row = runInfoOfState(
    runId,
    state,
    {
      entries: facts.entries + tail.entries.length,
      bytes: facts.bytes + bytesOf(tail.entries),
      startedAt: facts.first.meta.at,
      updatedAt: tail.last?.at,
    },
    activity,
    await resumeRefusalOf(journal, state),
  );
  const left = state.compacted === undefined ? undefined : facts.leftOut;
  const info =
    left === undefined
      ? row
      : {
          ...row,
          iterations: row.iterations + left.modelCalls,
          tokens: { input: row.tokens.input + left.inputTokens, output: row.tokens.output + left.outputTokens },
        };
  return {
    info,
    calls: callsOf(state),
    ...(state.compacted === undefined ? {} : { callsFrom: state.compacted.belowTurn }),
    read: tail.entries.length,
  };
}

/**
 * The rows of every run of the journal (`readRunRow`), in `listRuns` order, with the parent of each
 * sub-agent's run among them. A run id no store reads any more is told to `onSkipped` and left out.
 * A sub-agent's run under a call its parent's compact snapshot left out has its parent's calls read
 * from every entry.
 *
 * @example
 * const { rows, parentOf } = await readRunRows(journal);
 * inTreeOrder(rows, parentOf);
 */
export async function readRunRows(
  journal: Journal,
  onSkipped?: (runId: string, problem: string) => void,
): Promise<{ readonly rows: RunInfo[]; readonly parentOf: (runId: string) => RunParent | undefined }> {
  const reads = new Map<string, RunRowRead>();
  for (const { runId } of await journal.store.listRuns()) {
    const problem = runIdProblem(runId);
    if (problem !== undefined) {
      onSkipped?.(runId, problem);
      continue;
    }
    reads.set(runId, await readRunRow(journal, runId));
  }
  const calls = new Map<string, ReadonlySet<string>>();
  for (const [runId, read] of reads) calls.set(runId, read.calls);
  for (const runId of reads.keys()) {
    for (let i = runId.lastIndexOf("/"); i > 0; i = runId.lastIndexOf("/", i - 1)) {
      const parent = reads.get(runId.slice(0, i));
      const turn = parseFrameId(runId.slice(i + 1));
      if (parent?.callsFrom === undefined || turn?.kind !== "tool" || turn.turn >= parent.callsFrom) continue;
      if (calls.get(parent.info.runId) !== parent.calls) continue; // read in full already
      calls.set(parent.info.runId, startedCalls(await readJournal(journal, parent.info.runId)));
    }
  }
  return { rows: [...reads.values()].map((r) => r.info), parentOf: (runId) => parentAmong(runId, calls) };
}

/** `startedCalls` of a folded run: the tool frames it started whose entries the journal keeps (not archived). */
function callsOf(state: RunState): Set<string> {
  const calls = new Set<string>();
  for (const frame of Object.values(state.frames))
    if (frame.effect !== "model" && frame.archived === undefined) calls.add(frame.frameId);
  return calls;
}

function bytesOf(entries: readonly JournalEntry[]): number {
  let bytes = 0;
  for (const e of entries) bytes += entryBytes(e);
  return bytes;
}
