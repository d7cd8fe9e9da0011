import { digestOf } from "../core/digest.ts";
import { IntegrityError, LoomError } from "../core/errors.ts";
import { parseFrameId } from "./ids.ts";
import { readJournal } from "./journal.ts";
import type { ArchivedFrame, Journal } from "./spi.ts";
import type { EntryOf, JournalEntry } from "./types.ts";

/** Where `readArchived` looks for the step. */
export interface ReadArchivedOptions {
  /** The run the step belongs to. Without it every run is searched (step ids repeat across runs). */
  readonly runId?: string;
  /** The run's entries, already read with `readJournal`: saves reading them again. */
  readonly entries?: readonly JournalEntry[];
}

/**
 * Returns a frame that compaction moved to the archive, verified: the archive batch must hash to
 * its ref, hold the frame, and the frame's output must have the digest (and the effect and input
 * digest) that the `frames.archived` marker in the hot journal recorded. Any mismatch raises
 * `IntegrityError` naming the run, the step and the marker's seq. Resolves to `undefined` when no
 * marker names the step (it is still in the hot journal, or was never run).
 *
 * @example
 * const frame = await readArchived(journal, "support#turn:0:tool:1", { runId: "run-1" });
 * frame?.completed.data.output; // the tool's output, as recorded
 */
export async function readArchived(
  journal: Journal,
  stepId: string,
  options: ReadArchivedOptions = {},
): Promise<ArchivedFrame | undefined> {
  const found: { runId: string; marker: EntryOf<"frames.archived"> }[] = [];
  if (options.entries !== undefined || options.runId !== undefined) {
    const runId = options.runId ?? options.entries?.[0]?.runId ?? "";
    const entries = options.entries ?? (await readJournal(journal, runId));
    const marker = markerFor(entries, stepId);
    if (marker !== undefined) found.push({ runId, marker });
  } else {
    for (const { runId } of await journal.store.listRuns()) {
      const marker = markerFor(await readJournal(journal, runId), stepId);
      if (marker !== undefined) found.push({ runId, marker });
    }
  }
  if (found.length === 0) return undefined;
  if (found.length > 1) {
    throw new LoomError(
      "ambiguousStep",
      `step ${stepId} was archived in several runs (${found.map((f) => f.runId).join(", ")}); pass { runId } to readArchived`,
    );
  }
  const { runId, marker } = found[0]!;
  const frame = (await archiveBatch(journal, runId, marker)).find((f) => f.frameId === stepId);
  return verifiedFrame(runId, marker, frame, stepId);
}

/** What {@link uncompactedEntries} reads back. */
export interface UncompactedOptions {
  /** Only archived entries from this seq on are wanted (those before it were read already). Default 1. */
  readonly from?: number;
  /**
   * Entries up to this seq are not wanted either: a batch of tool frames whose entries all lie
   * at or before it is not read (a follower's `after`). Batches holding a model frame are read.
   */
  readonly after?: number;
}

/**
 * A run's entries as they were before compaction: each `frames.archived` marker is replaced by
 * the entries of the frames it moved (read from the archive, one read per batch, each frame
 * verified against the marker as {@link readArchived} verifies it), at their original seqs, in
 * seq order. `hot` is what `readJournal` read (from any seq). With `from`/`after`, batches with
 * no wanted entry are not read (known from the marker's `seqs`) and entries before `from` are
 * left out, so a reader that goes on after entries it already has reads only what is new.
 * Without a marker, `hot` itself is returned.
 *
 * @internal
 * @example
 * const history = await uncompactedEntries(journal, "run-1", await readJournal(journal, "run-1"));
 * history.some((e) => e.type === "frames.archived"); // false: the frames are back in their place
 */
export async function uncompactedEntries(
  journal: Journal,
  runId: string,
  hot: readonly JournalEntry[],
  options: UncompactedOptions = {},
): Promise<readonly JournalEntry[]> {
  if (!hot.some((e) => e.type === "frames.archived")) return hot; // not compacted: nothing to read
  const from = options.from ?? 1;
  const after = options.after ?? 0;
  const out = hot.filter((e) => e.type !== "frames.archived");
  for (const marker of hot) {
    if (marker.type !== "frames.archived") continue;
    const { frameIds, seqs } = marker.data;
    const tools = frameIds.every((id) => parseFrameId(id)?.kind === "tool");
    if (seqs?.every((seq) => seq < from || (tools && seq <= after))) continue;
    const batch = new Map((await archiveBatch(journal, runId, marker)).map((f) => [f.frameId, f]));
    for (const frameId of frameIds) {
      const frame = verifiedFrame(runId, marker, batch.get(frameId), frameId);
      for (const entry of [...(frame.attempts ?? []), frame.started, frame.completed])
        if (entry.seq >= from) out.push(entry);
    }
  }
  return out.sort((a, b) => a.seq - b.seq);
}

async function archiveBatch(
  journal: Journal,
  runId: string,
  marker: EntryOf<"frames.archived">,
): Promise<readonly ArchivedFrame[]> {
  const ref = marker.data.archiveRef;
  if (journal.archive === undefined) {
    throw new IntegrityError(
      `run ${runId}: frames were archived into ${ref} (marker at seq ${marker.seq}) but the journal has no archive store; open it with the archive it was compacted into`,
      "archiveMissing",
    );
  }
  return journal.archive.get(ref);
}

/** The frame `stepId` as its archive batch holds it (undefined: not held), checked against the marker that moved it. */
function verifiedFrame(
  runId: string,
  marker: EntryOf<"frames.archived">,
  frame: ArchivedFrame | undefined,
  stepId: string,
): ArchivedFrame {
  const ref = marker.data.archiveRef;
  const where = `run ${runId} step ${stepId} (frames.archived at seq ${marker.seq}, archive ${ref})`;
  if (frame === undefined)
    throw new IntegrityError(`${where}: the archive batch does not hold the frame`, "archiveIncomplete");
  const expected = Object.hasOwn(marker.data.digests, stepId) ? marker.data.digests[stepId] : undefined;
  const failed = frame.completed.data.failed === true;
  const actual = failed ? { digest: null, bytes: 0 } : digestOf(frame.completed.data.output);
  const matches =
    frame.started.data.frameId === stepId &&
    frame.completed.data.frameId === stepId &&
    expected !== undefined &&
    actual.digest === expected.digest &&
    actual.bytes === expected.bytes &&
    (expected.failed === undefined || expected.failed === failed) &&
    (expected.effect === undefined || expected.effect === frame.started.data.effect) &&
    (expected.inputDigest === undefined || expected.inputDigest === frame.started.data.inputDigest);
  if (!matches) {
    throw new IntegrityError(
      `${where}: the archived frame does not match its marker (output digest ${actual.digest}, recorded ${expected?.digest}); the archive was altered: restore it from a backup`,
    );
  }
  return frame;
}

/** The last marker that names the step (a frame is archived once; the last one wins if not). */
function markerFor(entries: readonly JournalEntry[], stepId: string): EntryOf<"frames.archived"> | undefined {
  for (let i = entries.length - 1; i >= 0; i--) {
    const e = entries[i]!;
    if (e.type === "frames.archived" && e.data.frameIds.includes(stepId)) return e;
  }
  return undefined;
}
