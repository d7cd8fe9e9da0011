import { digestOf } from "../core/digest.ts";
import { LoomError } from "../core/errors.ts";
import type { SqliteArchiveStore } from "./archive.ts";
import { parseFrameId, turnId } from "./ids.ts";
import { readJournal } from "./journal.ts";
import { redactedFields } from "./redaction/redact.ts";
import type { ArchivedFrame, Journal } from "./spi.ts";
import type { SqliteEventStore } from "./sqlite/sqlite.ts";
import { sqliteFileOf } from "./sqlite/sqliteFile.ts";
import type { ArchivedFrameDigest, EntryOf, FramesArchivedData, JournalEntry } from "./types.ts";

/** How much of a run `compact` keeps hot. */
export interface CompactOptions {
  /** How many of the run's last turns keep their tool frames in the hot journal (0: none). */
  readonly keepTurns: number;
}

/** What `compact` moved, where to, and the stream's version after. */
export interface CompactResult {
  /** The frame ids moved to the archive, in journal order (empty: nothing to compact). */
  readonly frameIds: readonly string[];
  /** The archive batch they went to. */
  readonly archiveRef?: string;
  /** The stream's version afterwards (the marker's seq when frames moved). */
  readonly version: number;
}

interface FramePlan {
  readonly frameId: string;
  readonly starts: EntryOf<"frame.started">[];
  completed?: EntryOf<"frame.completed">;
}

/** Which frames a compaction moves, and the marker that replaces them (without its archive ref yet). */
function plan(entries: readonly JournalEntry[], keepTurns: number) {
  const frames = new Map<string, FramePlan>();
  const lastTurn = new Map<string, number>(); // per loop id
  const inFlight = new Set<string>(); // "<loop>#turn:<i>" with a frame started and not completed
  for (const e of entries) {
    if (e.type !== "frame.started" && e.type !== "frame.completed") continue;
    const id = parseFrameId(e.data.frameId);
    if (id !== undefined) lastTurn.set(id.loopId, Math.max(lastTurn.get(id.loopId) ?? 0, id.turn));
    let f = frames.get(e.data.frameId);
    if (f === undefined) frames.set(e.data.frameId, (f = { frameId: e.data.frameId, starts: [] }));
    if (e.type === "frame.started") f.starts.push(e);
    else f.completed = e;
  }
  for (const f of frames.values()) {
    const id = parseFrameId(f.frameId);
    if (id !== undefined && f.completed === undefined) inFlight.add(turnId(id.loopId, id.turn));
  }
  const moved: ArchivedFrame[] = [];
  const removeSeqs: number[] = [];
  const digests: Record<string, ArchivedFrameDigest> = {};
  for (const f of frames.values()) {
    const id = parseFrameId(f.frameId);
    const started = f.starts[f.starts.length - 1];
    if (id?.kind !== "tool" || f.completed === undefined || started === undefined) continue;
    const turn = id.turn;
    if (turn > lastTurn.get(id.loopId)! - keepTurns || inFlight.has(turnId(id.loopId, turn))) continue;
    const completed = f.completed;
    const attempts = f.starts.slice(0, -1);
    moved.push({ frameId: f.frameId, started, completed, ...(attempts.length > 0 ? { attempts } : {}) });
    for (const s of f.starts) removeSeqs.push(s.seq);
    removeSeqs.push(completed.seq);
    const failed = completed.data.failed === true;
    const d = failed ? { digest: null, bytes: 0 } : digestOf(completed.data.output);
    // A redacted output: the marker keeps the digest its frame recorded (the original's, the lean log's).
    const redacted = redactedFields(completed.data).some((r) => r.field === "output" && r.blob === undefined);
    const original = redacted && !failed && completed.data.digest !== undefined ? completed.data : undefined;
    digests[f.frameId] = {
      digest: d.digest,
      bytes: d.bytes,
      effect: started.data.effect,
      inputDigest: started.data.inputDigest,
      ...(failed ? { failed: true } : {}),
      ...(original ? { original: { digest: original.digest ?? null, bytes: original.bytes ?? 0 } } : {}),
    };
  }
  removeSeqs.sort((a, b) => a - b);
  return { moved, removeSeqs, digests };
}

/**
 * Moves the completed tool frames of a run's older turns (all but the last `keepTurns`) to the
 * journal's archive and appends one `frames.archived` marker in their place: frame ids, archive
 * ref, and per frame the `digestOf` its output (`null`/0 when it failed), its effect and input
 * digest, so folds, the replay guard and the lean log still work without reading the archive.
 *
 * Model frames stay in the hot journal: they hold the tool names and inputs that both log
 * shapes need, so the lean log rebuilds after compaction with no archive read. A turn with a
 * frame still in flight (started, not completed) keeps all its frames.
 *
 * Atomic: when the store and the archive share one SQLite file, the archive write, the removal
 * and the marker are one transaction. Otherwise the frames are archived first (idempotent: the
 * same frames give the same ref) and the store then removes them and appends the marker in one
 * step; a crash in between leaves the journal as it was and an unreferenced archive batch.
 * `ConcurrencyError` when the run moved while compacting: compact again.
 *
 * A run may be compacted while it runs: the marker moves the run's version, so the live run's
 * next append meets a `ConcurrencyError`, reads what came after its version, finds only markers
 * of frames it has already settled (turns it no longer reads), folds them in and appends again
 * (runtime/base/appender.ts). Any other entry there is another writer's, and stays a conflict.
 *
 * @example
 * const { frameIds } = await compact(journal, "run-1", { keepTurns: 2 });
 */
export async function compact(journal: Journal, runId: string, options: CompactOptions): Promise<CompactResult> {
  const { keepTurns } = options;
  if (!Number.isInteger(keepTurns) || keepTurns < 0) {
    throw new LoomError("compactOptions", `compact run ${runId}: keepTurns must be an integer ≥ 0, got ${keepTurns}`);
  }
  const archive = journal.archive;
  if (archive === undefined) {
    throw new LoomError(
      "noArchive",
      `compact run ${runId}: the journal has no archive store; create it with createJournal({ store, archive })`,
    );
  }
  const entries = await readJournal(journal, runId);
  const version = entries[entries.length - 1]?.seq ?? 0;
  const { moved, removeSeqs, digests } = plan(entries, keepTurns);
  if (moved.length === 0) return { frameIds: [], version };
  const frameIds = moved.map((f) => f.frameId);
  const request = (archiveRef: string) => ({
    removeSeqs,
    expectedVersion: version,
    marker: {
      type: "frames.archived" as const,
      data: { frameIds, archiveRef, digests, seqs: removeSeqs } satisfies FramesArchivedData,
    },
  });

  const file = (journal.store as Partial<SqliteEventStore>)[sqliteFileOf];
  if (file !== undefined && file === (archive as Partial<SqliteArchiveStore>)[sqliteFileOf]) {
    const store = journal.store as SqliteEventStore;
    const sqliteArchive = archive as SqliteArchiveStore;
    return file.db
      .transaction(() => {
        const { ref } = sqliteArchive.putSync(runId, moved);
        return { frameIds, archiveRef: ref, version: store.compactSync(runId, request(ref)).version };
      })
      .immediate();
  }
  const { ref } = await archive.put(runId, moved);
  const result = await journal.store.compact(runId, request(ref));
  return { frameIds, archiveRef: ref, version: result.version };
}
