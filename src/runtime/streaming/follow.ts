import { parseFrameId } from "../../events/ids.ts";
import { readJournal } from "../../events/journal.ts";
import { uncompactedEntries } from "../../events/readArchived.ts";
import type { Journal } from "../../events/spi.ts";
import type { JournalEntry } from "../../events/types.ts";
import {
  evolveRunEvents,
  initialRunEventState,
  isRunEnd,
  type LiveRunEvent,
  type RunEvent,
  type RunEventCursor,
} from "../../projections/events.ts";
import type { RunState } from "../../projections/runState.ts";
import type { ToolCallLogMode } from "../../projections/types.ts";
import { readSnapshotState } from "../base/snapshots.ts";
import { DEFAULT_STREAM_BUFFER, isDelta, watchLiveRun } from "./events.ts";
import { NestedFollowers } from "./subRunEvents.ts";

/**
 * What `followRun` is given beside the journal and the run.
 *
 * @example
 * ```ts
 * const options: FollowOptions = { after: 12, signal: AbortSignal.timeout(60_000), mode: "lean" };
 * ```
 */
export interface FollowOptions {
  /** The last cursor the caller saw: only events after it are given (default: from the run's start). */
  readonly after?: RunEventCursor;
  /** Stops following: the iteration ends (without an error) at the next event or wait. */
  readonly signal?: AbortSignal;
  /** `lean`: tool outputs as digests only. Default: the run's mode pin, else `full`. */
  readonly mode?: ToolCallLogMode;
  /** How often to read a store that cannot be watched (no `EventStore.watch`), in ms. Default 100. */
  readonly pollMs?: number;
  /** `false`: the run's own events only, not its sub-agents' (`agentTool`). Default: theirs too. */
  readonly subRuns?: boolean;
}

/**
 * The events of run `runId`, which may be running in another process: the journal's
 * events after `after`, then each as it is appended, ending after the run's last entry
 * (`run-completed`, `run-failed`, `run-cancelled`, or `run-interrupted`) or when `signal` aborts.
 * Reconnecting with the last cursor seen misses nothing journaled and repeats nothing (all events
 * of one entry share its cursor: resume after a cursor once its last event, the one that is not
 * `approval-requested` or `reset`, was seen). Nothing is stored for it: it reads the journal.
 *
 * It is told of appends by the store (`EventStore.watch`: at once in this process; from other
 * processes, SQLite by polling `PRAGMA data_version`, PostgreSQL by `LISTEN`), else it polls.
 * For a run this process runs it also carries the live deltas of the model call in flight; a
 * consumer too slow for them loses deltas past a bounded buffer, never a journaled event.
 * Following a run whose journal ends interrupted at or before `after` waits for it to be resumed.
 *
 * Compaction changes nothing a follower sees: the frames it moved to the archive are read back
 * (verified against their `frames.archived` marker; `IntegrityError` when the journal has no
 * archive or it was altered) and folded at their own seqs, so a compacted run gives the events and
 * cursors of the uncompacted one, also when it is compacted while being followed. Only batches
 * holding events after `after` are read.
 *
 * After a cursor, a follower starts from the run's latest snapshot taken at or before it (a compact
 * one too), when the run had not ended then and no tool call was in flight: it reads only the
 * entries after the snapshot, not the run from its start.
 *
 * A sub-agent's events (`agentTool`: the child run of a call) come too, as the child's run gives
 * them, each with the child's `runId` (see `RunEvent`): from the call's start to the child's end,
 * and for a call in flight when the follower resumed after a cursor, from the child's first
 * event. The cursor to resume after is that of the last event of `runId` itself.
 *
 * @example
 * ```ts
 * for await (const event of followRun(journal, "r-1", { after: lastEventId, signal })) {
 *   send(event.type, event, "cursor" in event ? event.cursor : undefined);
 * }
 * ```
 */
export function followRun(journal: Journal, runId: string, options: FollowOptions = {}): AsyncIterable<RunEvent> {
  return { [Symbol.asyncIterator]: () => new Batched(follow(journal, runId, options), options.signal) };
}

/** Most events handed over at once: a long catch-up's first events come before the whole of it is folded. */
const BATCH = 512;

const DONE: IteratorReturnResult<undefined> = { done: true, value: undefined };

/**
 * The events of `follow`'s batches one by one: a batch's events cost no async generator step each
 * (what made replaying a long run cost more than resuming it). Ends at the next event once `signal`
 * aborts.
 */
class Batched implements AsyncIterator<RunEvent, undefined> {
  private batch: readonly RunEvent[] = [];
  private at = 0;

  constructor(
    private readonly source: AsyncGenerator<readonly RunEvent[], void>,
    private readonly signal: AbortSignal | undefined,
  ) {}

  next(): Promise<IteratorResult<RunEvent, undefined>> {
    if (this.signal?.aborted) return this.return();
    if (this.at < this.batch.length) return Promise.resolve({ done: false, value: this.batch[this.at++] as RunEvent });
    return this.source.next().then((r) => {
      if (r.done) return DONE;
      this.batch = r.value;
      this.at = 0;
      return this.next();
    });
  }

  return(): Promise<IteratorResult<RunEvent, undefined>> {
    this.batch = [];
    return this.source.return(undefined).then(() => DONE);
  }
}

/** The run's events in batches, each handed over before the follower waits (on the journal, a wake-up). */
async function* follow(journal: Journal, runId: string, options: FollowOptions): AsyncGenerator<readonly RunEvent[]> {
  const after = options.after ?? 0;
  const signal = options.signal;
  const store = journal.store;
  const foldOptions = options.mode === undefined ? {} : { mode: options.mode };
  // After a cursor, the run's latest snapshot at or before it is where the fold starts (unless the
  // run had ended or a tool call was in flight then: canStartFrom): only what follows it is read.
  // The events before `after` are not given either way.
  const start = after > 0 ? await readSnapshotState(journal, runId, after) : undefined;
  const usable = start !== undefined && canStartFrom(start.state);
  const fold = initialRunEventState(foldOptions, usable ? start.state : undefined);
  let folded = usable ? start.seq : 0; // the seq of the last entry read
  let stale = true; // the journal may hold entries past `folded`
  let runEnd: JournalEntry | undefined; // the run's last entry when it is an end (completed, interrupted …)
  let ended = false; // its last entry given: what is left is its sub-agents' events
  let wake: (() => void) | undefined;
  const rouse = () => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  const deltas: LiveRunEvent[] = [];
  const gapped = new Set<string>();
  const finished = new Set<string>(); // model steps whose model-finished was given: their deltas are late
  const stopLive = watchLiveRun(store, runId, (event) => {
    if (event === undefined) stale = true;
    else if (isDelta(event)) {
      const key = `${event.stepId}\u0000${event.attempt}`;
      if (gapped.has(key) || deltas.length >= DEFAULT_STREAM_BUFFER) gapped.add(key);
      else deltas.push(event);
    } else deltas.push(event); // a reset: rare and small, always kept
    rouse();
  });
  const onAppend = () => {
    stale = true;
    rouse();
  };
  const nested =
    options.subRuns === false
      ? undefined
      : new NestedFollowers(journal, runId, { mode: options.mode, pollMs: options.pollMs }, followRun, rouse);
  // The store is watched from the first wait on: a replay of a run that has ended reads it once and
  // never starts a watch (on SQLite, a poller of its own).
  let stopStore: (() => void) | undefined;
  let poll: NodeJS.Timeout | undefined;
  let watching = false;
  signal?.addEventListener("abort", rouse);
  let out: RunEvent[] = [];
  try {
    for (;;) {
      if (signal?.aborted) return;
      if (stale) {
        stale = false;
        const hot: JournalEntry[] = await readJournal(journal, runId, { from: folded + 1 });
        // Frames compaction moved out are read back from the archive, at their seqs: the events
        // (and cursors) are those of the uncompacted run, whenever it was compacted.
        const entries = await uncompactedEntries(journal, runId, hot, { from: folded + 1, after });
        folded = hot.at(-1)?.seq ?? folded;
        await nested?.lookUp(entries);
        for (const entry of entries) {
          for (const event of evolveRunEvents(fold, entry)) {
            const waiting = nested?.seen(event, event.cursor > after);
            // A sub-agent's events come inside its call (or its run): all of them before the call's end.
            while (waiting?.() && nested !== undefined) {
              if (nested.queue.length > 0) out.push(nested.queue.shift() as RunEvent);
              else if (out.length > 0) {
                yield out; // then look again: the queue may have grown meanwhile
                out = [];
              } else await new Promise<void>((resolve) => (wake = resolve));
              if (signal?.aborted) return;
            }
            if (event.cursor <= after) continue;
            if (event.type === "model-finished") finished.add(event.stepId);
            out.push(event);
          }
          if (out.length >= BATCH) {
            yield out;
            out = [];
            if (signal?.aborted) return;
          }
        }
        nested?.caughtUp();
        const last = entries.at(-1); // markers left out: a compacted run ends at its last entry, not its marker
        if (last !== undefined) runEnd = isRunEnd(last) ? last : undefined;
        // Its last entry given, or seen before `after` (an interrupted run may be resumed: wait for it).
        if (runEnd !== undefined && (runEnd.seq > after || runEnd.type !== "run.interrupted")) {
          if (nested === undefined) {
            if (out.length > 0) yield out;
            return;
          }
          nested.runEnded();
          ended = true;
        }
      }
      while (nested !== undefined && nested.queue.length > 0) out.push(nested.queue.shift() as RunEvent);
      if (ended && !nested?.active && nested?.queue.length === 0) {
        if (out.length > 0) yield out;
        return; // its sub-agents' ends given too
      }
      // Entries appended since it read come first: a call's deltas follow its model-started (and a
      // re-asked call's reset), which were appended before them.
      while (!stale && deltas.length > 0) {
        const event = deltas.shift() as LiveRunEvent;
        if (!finished.has(event.stepId)) out.push(event);
      }
      if (out.length > 0) {
        yield out;
        out = [];
        continue; // what came while the consumer read them is looked at before any wait
      }
      if (stale || (nested?.queue.length ?? 0) > 0) continue; // a sub-agent's events came while it gave others
      if (signal?.aborted) return; // aborted while it read: no wake-up would come
      if (!watching) {
        watching = true;
        stopStore = store.watch?.(runId, onAppend);
        if (stopStore === undefined) poll = setInterval(onAppend, options.pollMs ?? 100);
        stale = true; // what was appended before the watch began is read first
        continue;
      }
      await new Promise<void>((resolve) => {
        wake = resolve;
      });
    }
  } finally {
    nested?.stop();
    signal?.removeEventListener("abort", rouse);
    stopLive();
    stopStore?.();
    if (poll !== undefined) clearInterval(poll);
  }
}

/**
 * Whether a follower can start from `state`: the run had not ended (an ended run's end entry is
 * what ends the following) and no tool call was in flight (a sub-agent's run is looked up from its
 * call's entries).
 */
function canStartFrom(state: RunState): boolean {
  if (state.status !== "running" && state.status !== "interrupted") return false;
  for (const frame of Object.values(state.frames))
    if (frame.status === "started" && parseFrameId(frame.frameId)?.kind === "tool") return false;
  return true;
}
