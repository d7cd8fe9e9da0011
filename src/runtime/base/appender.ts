import {
  isConcurrencyError,
  isOwnershipLostError,
  isRunCancelledError,
  type OwnershipLostError,
} from "../../core/errors.ts";
import { parseFrameId } from "../../events/ids.ts";
import { storedFormOf } from "../../events/redaction/redact.ts";
import type { AppendOptions, EventStore } from "../../events/store.ts";
import { type JournalEntry, type NewEntry, SCHEMA_VERSION } from "../../events/types.ts";
import { validateEntries } from "../../events/validate.ts";
import { type RunState, responseAt, runStateProjection } from "../../projections/runState.ts";
import type { Fence } from "./runStop.ts";

/**
 * The longest a run holds the event loop, in ms (about), before it lets other work run (timers,
 * I/O: a lease's renewal): an append waits a turn of the event loop then, and so does the session's
 * `breathe` between the calls it serves.
 */
export const BREATH_MS = 10;

/**
 * Appends one run's entries in order (tool calls run concurrently, the stream is one line) and
 * keeps the run's folded state current by evolving each appended entry into `state`.
 *
 * Group commit: appends queued in one turn of the event loop (a response's calls, dispatched
 * together), or while one is being written, go out together in one store append (one
 * transaction, one commit); a step's `frame.started` that nothing else can join (a model call's,
 * the only call of a response) goes out without waiting that turn, though still at least every
 * few ms, so a run on a synchronous store lets timers run. Each caller's promise resolves once its own entries are
 * durable, and a refused combined append rejects every caller in it. Results nothing has acted
 * on yet (a model's response, a tool's output) are `defer`red: folded into `state` at once and
 * written with the next append, which is always one an effect waits on (the next `frame.started`)
 * or the run's last (`run.completed`, `run.interrupted`). So a tool's call still starts only once
 * its `frame.started` is durable, and whatever it was computed from is durable with it or before.
 * A model call's `frame.started` need only be written (`appendWritten`): the model changes nothing
 * outside the run, and the store may flush it while the model is called; the next durable append
 * (a tool's start, the run's end) is durable with everything before it.
 *
 * Entries must already be in their JSON form (what a JSON store hands back: the runtime round-
 * trips user values where they enter: the input, tool outputs, model responses), so the state
 * of a live run equals the state of a resumed one without a second round trip here.
 *
 * Every append is fenced with the run's lease token when there is one: once the store refuses
 * it (`OwnershipLostError`), every later append, the final one included, fails with that error
 * without reaching the store, so the run stops where it stands. A compaction that ran beside the
 * run (its `frames.archived` marker moved the version) is folded in and the append retried.
 */
export class Appender {
  private queue: Queued[] = [];
  private writing = false;
  /** The version of the last durable entry (`state` may hold deferred entries past it). */
  private durable: number;
  private closedBecause: string | undefined;
  private lostTo: OwnershipLostError | undefined;
  private refusedWith: unknown;
  /** Store appends made (each one transaction): what a turn costs in commits. */
  appends = 0;
  /**
   * Told the entries of each store append once they are stored (durable, or written for
   * `appendWritten`) and folded into `state`, before the callers waiting on them go on: what
   * `loop.stream` and `run({ onEvent })` fold into events. `stored` gives them as the store keeps
   * them (made when asked: a run nobody watches only keeps them).
   * A listener that throws is ignored: watching a run never changes it.
   */
  onAppended: ((entries: AppendedEntries) => void) | undefined;
  /** Told the durable version after each store append (the run's snapshot schedule). Must not throw. */
  onDurable: ((version: number) => void) | undefined;

  constructor(
    private readonly store: EventStore,
    readonly runId: string,
    readonly state: RunState,
    private readonly fence?: Fence,
  ) {
    this.durable = state.version;
  }

  /** Appends atomically after everything queued before. Resolves once the entries are durable. */
  append(...entries: NewEntry[]): Promise<void> {
    return this.enqueue(entries, false);
  }

  /**
   * `append`, resolved once the entries are written (in order, safe from a crash of this process)
   * rather than flushed to disk (`AppendOptions.durability: "written"`): for a model call's
   * `frame.started`, since a model call changes nothing outside the run. Where the store honours
   * it, the flush runs in the background while the model is called, and the next durable append
   * (the one a tool's call or the run's result waits on) is durable with this one. A store append
   * that any caller needs durable is durable for all of them.
   */
  appendWritten(...entries: NewEntry[]): Promise<void> {
    return this.enqueue(entries, false, true);
  }

  /** The run's last entry (`run.interrupted` after an abort): accepted even once closed. */
  appendFinal(entry: NewEntry): Promise<void> {
    return this.enqueue([entry], true);
  }

  /**
   * Folds entries into `state` now and writes them with the next append, without waiting: for a
   * result no effect has been started from yet. Throws, as an append would, once the run stopped.
   */
  defer(...entries: NewEntry[]): void {
    if (this.lostTo !== undefined) throw this.lostTo;
    if (this.closedBecause !== undefined) throw new AppendAfterCloseError(this.runId, this.closedBecause);
    this.fold(entries);
    this.queue.push({ entries, deferred: true, final: false, written: false });
  }

  /** Writes what was deferred, if anything; resolves once it is durable. */
  flush(): Promise<void> {
    return this.queue.length === 0 ? Promise.resolve() : this.enqueue([], true);
  }

  private enqueue(entries: NewEntry[], final: boolean, written = false): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ entries, deferred: false, final, written, resolve, reject });
      if (!this.writing) void this.drain();
    });
  }

  /** Writes the queue, all of it in one store append each time, until nothing waits. */
  private async drain(): Promise<void> {
    this.writing = true;
    try {
      while (this.waits()) {
        // One turn of the event loop first: the other calls of a response, dispatched together,
        // queue their frame.started meanwhile (a synchronous store would otherwise commit each alone).
        // Not when nothing else can queue, unless the run has held the event loop for a while: a turn
        // before every append cost a run on SQLite about 8% of its time (docs/benchmarks.md).
        if (!this.alone() || performance.now() - this.lastTick >= BREATH_MS) {
          await new Promise<void>((resolve) => setImmediate(resolve));
          this.lastTick = performance.now();
        }
        const batch = this.queue;
        this.queue = [];
        const live: Queued[] = [];
        // What the store append writes (the live appends' entries, in order), and whether every
        // caller in it needs them written only (`appendWritten`, or deferred with nobody waiting).
        const written: NewEntry[] = [];
        let relaxed = true;
        for (const q of batch) {
          if (this.lostTo !== undefined) q.reject?.(this.lostTo);
          else if (this.closedBecause !== undefined && !q.final && !q.deferred)
            q.reject?.(new AppendAfterCloseError(this.runId, this.closedBecause));
          else {
            live.push(q);
            for (const entry of q.entries) written.push(entry);
            if (!q.deferred && !q.written) relaxed = false;
          }
        }
        if (written.length === 0) {
          for (const q of live) q.resolve?.();
          continue;
        }
        let stored: readonly NewEntry[] | undefined;
        try {
          stored = await this.write(written, relaxed);
        } catch (e) {
          // Deferred results stay queued for a later append (the run's last); callers are told.
          if (this.lostTo === undefined) this.queue.unshift(...live.filter((q) => q.deferred));
          for (const q of live) q.reject?.(e);
          continue;
        }
        for (const q of live) if (!q.deferred) this.fold(q.entries);
        this.tell(stored ?? written);
        for (const q of live) q.resolve?.();
      }
    } finally {
      this.writing = false;
    }
  }

  /** Whether an append waits in the queue (not only deferred entries). */
  private waits(): boolean {
    for (const q of this.queue) if (!q.deferred) return true;
    return false;
  }

  /**
   * Whether what waits is one step's `frame.started` that no other append of the run can join: a
   * model call's (the chart calls the model once every call of the turn has ended), or the only
   * call of a response. Calls dispatched together are what the event loop's turn waits for.
   */
  private alone(): boolean {
    let waiting: Queued | undefined;
    for (const q of this.queue) {
      if (q.deferred) continue;
      if (waiting !== undefined) return false;
      waiting = q;
    }
    const entry = waiting?.entries.length === 1 ? waiting.entries[0] : undefined;
    if (entry?.type !== "frame.started") return false;
    const frame = parseFrameId(entry.data.frameId);
    if (frame === undefined || frame.loopId !== this.state.loopId) return false;
    return frame.kind === "model" || responseAt(this.state, frame.turn)?.toolCalls.length === 1;
  }
  /** When the appender last let the event loop run (timers, I/O: a lease's renewal). */
  private lastTick = performance.now();

  /** Hands the entries just made durable (ending at `durable`) to the listener, as the store keeps them. */
  private tell(entries: readonly NewEntry[]): void {
    const listener = this.onAppended;
    if (listener === undefined || entries.length === 0) return;
    const first = this.durable - entries.length + 1;
    const at = this.metaNow().at; // now, as an ISO string (made once a millisecond)
    try {
      listener(new AppendedEntries(this.runId, entries, first, at));
    } catch {
      // A watcher's failure is the watcher's: the run goes on.
    }
  }

  /** Evolves entries into `state` as they will be journaled; `state.version` stays the durable one. */
  private fold(entries: readonly NewEntry[]): void {
    const { runId } = this;
    const seq = this.durable + 1;
    for (const { type, data } of entries) {
      runStateProjection.evolve(this.state, { runId, seq, type, data, meta: this.metaNow() } as JournalEntry);
    }
    this.state.version = this.durable;
  }

  /** The meta of entries folded now: one object a millisecond (folds come several a turn). */
  metaNow(): JournalEntry["meta"] {
    const now = Date.now();
    if (now !== this.metaMs) {
      this.metaMs = now;
      this.meta = Object.freeze({ v: SCHEMA_VERSION, at: new Date(now).toISOString() });
    }
    return this.meta as JournalEntry["meta"];
  }
  private metaMs = -1;
  private meta: JournalEntry["meta"] | undefined;

  /**
   * Appends at the durable version (after folding any compaction marker in); `relaxed`: written is
   * enough. Resolves to the entries as stored when the store changed them (redaction).
   */
  private async write(entries: NewEntry[], relaxed: boolean): Promise<readonly NewEntry[] | undefined> {
    for (;;) {
      const expectedVersion = this.durable;
      try {
        this.appends++;
        const options: AppendOptions = {
          expectedVersion,
          ...(this.fence === undefined ? {} : { fence: this.fence.token }),
          ...(relaxed ? { durability: "written" as const } : {}),
        };
        const appended = await this.store.append(this.runId, entries, options);
        this.durable = expectedVersion + entries.length;
        this.state.version = this.durable;
        this.onDurable?.(this.durable);
        return appended.stored;
      } catch (e) {
        if (isOwnershipLostError(e)) this.lost(e);
        if (isRunCancelledError(e)) this.fence?.onCancelled?.(e); // the run stops and ends with run.cancelled
        if (!isConcurrencyError(e) || !(await this.foldCompaction(expectedVersion))) {
          this.refusedWith ??= e;
          throw e;
        }
      }
    }
  }

  /**
   * After a refused append: folds what was appended since `version` if it is only compaction
   * markers of frames this run already settled (no other writer's work), and says so.
   */
  private async foldCompaction(version: number): Promise<boolean> {
    const from = version + 1;
    const since = await this.store.read(this.runId, { from });
    validateEntries(this.runId, since, { from });
    if (since.length === 0) return false;
    for (const e of since) {
      if (e.type !== "frames.archived") return false;
      for (const frameId of e.data.frameIds) {
        const status = this.state.frames[frameId]?.status;
        if (status !== "completed" && status !== "failed") return false;
      }
    }
    for (const e of since) runStateProjection.evolve(this.state, e);
    this.durable = this.state.version;
    return true;
  }

  /** The lease is gone: nothing more is appended, and the run's error is this one. */
  lost(error: OwnershipLostError): void {
    if (this.lostTo !== undefined) return;
    this.lostTo = error;
    this.closedBecause ??= "ownership lost";
    this.fence?.onLost(error);
  }

  /**
   * The first error the store failed an append with (refused, unreachable, a crash), if any: a run
   * that fails then cannot journal its failure either (the journal is what failed).
   */
  get storeFailure(): unknown {
    return this.refusedWith;
  }

  /** Why appends are refused for good, if the lease was lost. */
  get lostOwnership(): OwnershipLostError | undefined {
    return this.lostTo;
  }

  /** No append is accepted after this (an abort): work still in flight must not write. */
  close(reason: string): void {
    this.closedBecause ??= reason;
  }

  get closed(): boolean {
    return this.closedBecause !== undefined;
  }
}

/**
 * The entries of one store append, as `Appender.onAppended` is told them: `stored()` makes them as
 * the store keeps them (seq, meta). Made only when needed: a run nobody watches keeps its appends
 * for a watcher that may come, and a journal entry with its meta cost that twice the memory.
 */
export class AppendedEntries {
  constructor(
    readonly runId: string,
    readonly entries: readonly NewEntry[],
    /** The seq of the first entry. */
    readonly first: number,
    /** When they were appended (`meta.at`). */
    readonly at: string,
  ) {}

  get length(): number {
    return this.entries.length;
  }

  /** The entries as the store keeps them. */
  stored(): JournalEntry[] {
    return this.entries.map((entry, i) => this.entryAt(entry, i));
  }

  /**
   * The entries as a read of the journal hands them back: where a redacting store replaced one
   * (`withRedaction`), its redacted form, with the records and keyed digests of what it redacted.
   */
  journaled(): JournalEntry[] {
    return this.entries.map((entry, i) => this.entryAt(storedFormOf(entry), i));
  }

  private entryAt(entry: NewEntry, i: number): JournalEntry {
    const { runId, first, at } = this;
    return {
      runId,
      seq: first + i,
      type: entry.type,
      data: entry.data,
      meta: { v: SCHEMA_VERSION, at },
    } as JournalEntry;
  }
}

/** An append waiting in the queue (deferred ones have no caller waiting). */
interface Queued {
  readonly entries: NewEntry[];
  readonly deferred: boolean;
  readonly final: boolean;
  /** Its caller needs it written, not yet durable (`appendWritten`). */
  readonly written: boolean;
  readonly resolve?: () => void;
  readonly reject?: (e: unknown) => void;
}

/** The run's lease as its appends use it (runStop.ts, with the rest of what stops a run). */
export type { Fence } from "./runStop.ts";

/** Internal: an effect finished after its run stopped; its result is not journaled (outcome unknown). */
export class AppendAfterCloseError extends Error {
  constructor(
    readonly runId: string,
    readonly reason: string,
  ) {
    super(`run ${runId}: not journaled, the run stopped (${reason})`);
  }
}
