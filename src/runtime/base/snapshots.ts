import { SnapshotError } from "../../core/errors.ts";
import { readJournal } from "../../events/journal.ts";
import type { Journal } from "../../events/spi.ts";
import type { JournalEntry } from "../../events/types.ts";
import {
  checkRunSnapshot,
  compactRunState,
  entryFacts,
  extendFacts,
  runSnapshotOf,
  type SnapshotFacts,
} from "../../projections/runSnapshot.ts";
import { type FrameState, foldEntries, type RunState, runStateProjection } from "../../projections/runState.ts";

/**
 * Run snapshots through the journal: a read starts from the run's latest snapshot (checked by
 * its digest, its layout and the entry it names) and folds the entries after it; a snapshot is
 * written from the same read. Anything wrong with a snapshot is told to the warning hook and the
 * whole journal is folded instead: a snapshot only ever saves work.
 */

/** How a read may use snapshots. */
export interface SnapshotReadOptions {
  /**
   * Told each snapshot that was not used (damaged, unreadable, or of another stream: a
   * `SnapshotError`); the read folded the whole journal instead. What it throws is ignored.
   */
  readonly onSnapshotWarning?: (error: SnapshotError) => void;
}

/** How `readRunState` and `writeRunSnapshot` read a run. */
export interface RunStateReadOptions extends SnapshotReadOptions {
  /**
   * Accept a compact state (what a resume needs: `RunState.compacted` set, the frames of older
   * turns left out) when the latest snapshot is compact; `writeRunSnapshot` then writes a compact
   * one. Without it, a compact snapshot is passed over and the whole journal folded (no warning:
   * nothing is wrong with it).
   */
  readonly compact?: boolean;
}

/** A run's folded state, and how much of the journal was read for it. */
export interface ReadRunState {
  readonly state: RunState;
  /** The seq of the snapshot the fold started from (0: none, every entry was read). */
  readonly snapshotSeq: number;
  /** Entries read and folded after the snapshot (all of them without one). */
  readonly tail: number;
  /** The last entry folded, read or named by the snapshot (undefined for a run with no entries). */
  readonly last: { readonly seq: number; readonly type: string; readonly at: string } | undefined;
}

/**
 * Reads a run's state: its latest snapshot plus the entries after it where the store keeps
 * snapshots and the snapshot checks out, else the fold of the whole journal. Either way the
 * state equals `foldEntries(await readJournal(journal, runId))`, except with `compact: true`
 * from a compact snapshot: then it is that state without the frames of the turns below
 * `state.compacted.belowTurn` (what a resume reads: `compactRunState`).
 *
 * @example
 * const { state, snapshotSeq, tail } = await readRunState(journal, "run-1");
 * // snapshotSeq 9000, tail 412: 412 entries read instead of 9412
 * const resume = await readRunState(journal, "run-1", { compact: true }); // resume.state.compacted?.belowTurn
 */
export async function readRunState(
  journal: Journal,
  runId: string,
  options?: RunStateReadOptions,
): Promise<ReadRunState> {
  const { state, snapshotSeq, tail, last } = await readRunTail(journal, runId, options);
  return { state, snapshotSeq, tail, last };
}

/** A run read as {@link readRunState} reads it, with the entries it read and what its snapshot says of the others. */
export interface RunTailRead extends ReadRunState {
  /** The entries read and folded: those after the snapshot, or every entry without one. */
  readonly entries: readonly JournalEntry[];
  /**
   * What the snapshot says of the entries up to its seq (`SnapshotFacts`: their count, bytes and
   * the first one), when it was written with them and no compaction ran since (a `frames.archived`
   * marker among `entries` may have removed some of them); else undefined: read them to know.
   */
  readonly facts: SnapshotFacts | undefined;
}

/**
 * {@link readRunState} for a reader that needs more than the state: the entries it read (after
 * the snapshot) and what the snapshot says of those before (`facts`), so that a run's listing
 * (`loom runs`) reads only the tail.
 *
 * @example
 * const read = await readRunTail(journal, "run-1", { compact: true });
 * const entries = (read.facts?.entries ?? 0) + read.entries.length; // every entry the run keeps
 */
export async function readRunTail(
  journal: Journal,
  runId: string,
  options?: RunStateReadOptions,
): Promise<RunTailRead> {
  const warn = (error: SnapshotError) => {
    try {
      options?.onSnapshotWarning?.(error);
    } catch {
      // The hook's failure is the hook's: the read goes on.
    }
  };
  const store = journal.store;
  if (store.latestSnapshot !== undefined) {
    const stored = await store.latestSnapshot(runId);
    if (stored !== undefined) {
      const check = checkRunSnapshot(runId, stored);
      if (!check.ok) warn(check.error);
      else if (check.state.compacted !== undefined && options?.compact !== true) {
        // A resume's compact state: this reader wants every frame, which only the journal holds.
      } else {
        // From the snapshot's own seq: the entry there must be the one it names (compaction may have removed it).
        const tail = await readJournal(journal, runId, { from: stored.seq });
        const first = tail[0];
        const same =
          first !== undefined &&
          (first.seq > stored.seq || (first.type === check.anchor.type && first.meta.at === check.anchor.at));
        if (same) {
          const state = check.state;
          const entries = first.seq > stored.seq ? tail : tail.slice(1);
          let compacted = false;
          for (const entry of entries) {
            runStateProjection.evolve(state, entry);
            if (entry.type === "frames.archived") compacted = true;
          }
          const end = tail.at(-1) as JournalEntry;
          const last = end.seq > stored.seq ? end : { seq: stored.seq, ...check.anchor };
          const facts = compacted ? undefined : check.facts;
          return { state, snapshotSeq: stored.seq, tail: entries.length, last: lastOf(last), entries, facts };
        }
        warn(
          new SnapshotError(
            "snapshotStale",
            runId,
            stored.seq,
            "the journal does not hold the entry it was taken after (the run was removed and started again?); it was ignored and the whole journal folded instead",
          ),
        );
      }
    }
  }
  return readAll(journal, runId);
}

/** Every entry of the run, folded (no snapshot). */
async function readAll(journal: Journal, runId: string): Promise<RunTailRead> {
  const entries = await readJournal(journal, runId);
  const end = entries.at(-1);
  const state = foldEntries(entries);
  return { state, snapshotSeq: 0, tail: entries.length, last: end && lastOf(end), entries, facts: undefined };
}

/**
 * The state of run `runId`'s latest snapshot as it was taken (a compact one too), when the store
 * keeps one, it checks out and it was taken at or before seq `atMost`; else undefined (a snapshot
 * that does not check out is told to `onSnapshotWarning`). For a reader that goes on folding
 * from the snapshot's seq itself (`followRun` after a cursor).
 *
 * @example
 * const start = await readSnapshotState(journal, "run-1", lastCursor); // start?.seq <= lastCursor
 */
export async function readSnapshotState(
  journal: Journal,
  runId: string,
  atMost: number,
  options?: SnapshotReadOptions,
): Promise<{ readonly state: RunState; readonly seq: number } | undefined> {
  const stored = await journal.store.latestSnapshot?.(runId);
  if (stored === undefined || stored.seq > atMost) return undefined;
  const check = checkRunSnapshot(runId, stored);
  if (!check.ok) {
    try {
      options?.onSnapshotWarning?.(check.error);
    } catch {
      // The hook's failure is the hook's.
    }
    return undefined;
  }
  // The entry it names must be the journal's (as readRunState checks): the first one from its seq.
  const [first] = await journal.store.read(runId, { from: stored.seq });
  const same =
    first !== undefined &&
    (first.seq > stored.seq || (first.type === check.anchor.type && first.meta.at === check.anchor.at));
  return same ? { state: check.state, seq: stored.seq } : undefined;
}

function lastOf(e: { seq: number; type: string; at?: string; meta?: { at: string } }) {
  return { seq: e.seq, type: e.type, at: e.meta?.at ?? e.at ?? "" };
}

/**
 * Writes a snapshot of run `runId` at its last entry (its latest snapshot plus the entries
 * since, folded), unless the store keeps no snapshots or nothing was appended since the latest.
 * Never changes the entries. Resolves to the seq written, or undefined.
 *
 * @example
 * await writeRunSnapshot(journal, "run-1"); // 9412: the next read folds only what follows
 * await writeRunSnapshot(journal, "run-1", { compact: true }); // what a resume needs only: flat in the run's length
 */
export async function writeRunSnapshot(
  journal: Journal,
  runId: string,
  options?: RunStateReadOptions,
): Promise<number | undefined> {
  const store = journal.store;
  if (store.writeSnapshot === undefined || store.latestSnapshot === undefined) return undefined;
  let read = await readRunTail(journal, runId, options);
  const last = read.last;
  if (last === undefined || (read.snapshotSeq === last.seq && read.tail === 0)) return undefined;
  // A snapshot without facts (written before them) or a compaction since: read every entry once, so the new one has them.
  if (read.snapshotSeq !== 0 && read.facts === undefined) read = await readAll(journal, runId);
  const end = read.last ?? last;
  const anchor = { runId, seq: end.seq, type: end.type, meta: { at: end.at } } as JournalEntry;
  const compact = options?.compact === true;
  const state = compact ? compactRunState(read.state) : read.state;
  const dropped = compact ? leftOutFrames(read.state, state) : undefined;
  const base = read.snapshotSeq === 0 ? entryFacts(read.entries) : read.facts;
  const facts = base === undefined ? undefined : extendFacts(base, read.snapshotSeq === 0 ? [] : read.entries, dropped);
  await store.writeSnapshot(runId, runSnapshotOf(state, anchor, facts));
  return end.seq;
}

/** The frames of `state` that its compaction `compact` left out. */
function leftOutFrames(state: RunState, compact: RunState): FrameState[] {
  return Object.values(state.frames).filter((f) => !Object.hasOwn(compact.frames, f.frameId));
}

/** What `AgentLoopConfig.snapshots` asks for. */
export interface SnapshotConfig {
  /**
   * Write a snapshot once this many entries were appended since the run's latest one (a turn
   * with one tool call appends about four).
   */
  readonly every: number;
  /** Told each snapshot ignored on a read, and each one that could not be written (`SnapshotError`). */
  readonly onWarning?: (error: SnapshotError) => void;
  /**
   * Write compact snapshots (`compactRunState`): only what a resume needs, so that a resume reads,
   * holds and walks the last turns whatever the run's length (docs/long-runs.md). `foldRun` and
   * the other full readers then fold the whole journal. Default false: full snapshots (a loop with
   * no `snapshots` option at all writes compact ones).
   */
  readonly compact?: boolean;
}

/**
 * Entries between two snapshots when a loop sets no `snapshots` option: rare enough that a run of
 * a few hundred turns writes none, frequent enough that a resume folds at most this many entries.
 */
export const DEFAULT_SNAPSHOT_EVERY = 1000;

/**
 * The snapshots a loop writes for its `snapshots` option: unset gives compact snapshots every
 * {@link DEFAULT_SNAPSHOT_EVERY} entries (each costs what was appended since the last one, and a
 * resume reads the last turns only), `false` none, an object what it says.
 *
 * @example
 * snapshotConfigOf(undefined); // { every: 1000, compact: true }
 * snapshotConfigOf(false); // undefined: no snapshots
 */
export function snapshotConfigOf(option: SnapshotConfig | false | undefined): SnapshotConfig | undefined {
  if (option === false) return undefined;
  return option ?? { every: DEFAULT_SNAPSHOT_EVERY, compact: true };
}

/**
 * A run's snapshot schedule while it runs: told each durable version, it writes a snapshot once
 * `every` entries were appended since the last, one at a time, beside the run (the run never
 * waits on it; `settled` is awaited at the run's end). A write that fails is told as a warning.
 */
export class SnapshotSchedule {
  private writing: Promise<void> | undefined;
  constructor(
    private readonly journal: Journal,
    private readonly runId: string,
    private readonly config: SnapshotConfig,
    /** The seq of the snapshot the run was resumed from (0: none). */
    private last: number,
  ) {}

  /** The run's entries are durable up to `version`. */
  durable(version: number): void {
    if (this.writing !== undefined || version - this.last < this.config.every) return;
    const onWarning = this.config.onWarning;
    const options = {
      ...(onWarning === undefined ? {} : { onSnapshotWarning: onWarning }),
      ...(this.config.compact === true ? { compact: true } : {}),
    };
    this.writing = writeRunSnapshot(this.journal, this.runId, options).then(
      (seq) => {
        this.last = seq ?? version;
        this.writing = undefined;
      },
      (e: unknown) => {
        this.last = version; // not tried again at every append
        this.writing = undefined;
        const error = new SnapshotError(
          "snapshotWriteFailed",
          this.runId,
          version,
          `writing it failed (${e instanceof Error ? e.message : String(e)}); the run goes on, and a resume reads more of the journal`,
          { cause: e },
        );
        try {
          onWarning?.(error);
        } catch {
          // The hook's failure is the hook's.
        }
      },
    );
  }

  /** Resolves once no snapshot is being written. */
  async settled(): Promise<void> {
    await this.writing;
  }
}
