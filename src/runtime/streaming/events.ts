import type { EventStore } from "../../events/store.ts";
import type { JournalEntry } from "../../events/types.ts";
import {
  evolveRunEvents,
  initialRunEventState,
  type LiveRunEvent,
  type RunEvent,
  type RunEventState,
} from "../../projections/events.ts";
import type { AppendedEntries, Appender } from "../base/appender.ts";

/**
 * The events of one run in the process that runs it: the journaled ones, folded from what the
 * appender made durable (so they are exactly what the journal holds, in its order), and the live
 * deltas of the model call in flight (`emitLive`). They go to the run's `onEvent`, to its
 * `loop.stream`, and to every `followRun` of the run in this process (through {@link watchLiveRun}).
 */
/**
 * How many appended entries wait unfolded while nothing listens (see `RunEventEmitter.appended`):
 * past it they are folded, so a long run nobody watches keeps a bounded list.
 */
const MAX_UNFOLDED = 4096;

export class RunEventEmitter {
  private fold: RunEventState | undefined;
  /** Appends made while nothing listened, in order: folded when a listener is there (or too many wait). */
  private unfolded: AppendedEntries[] = [];
  /** How many entries {@link unfolded} holds. */
  private unfoldedCount = 0;
  private readonly listeners = new Set<(event: RunEvent) => void>();
  /** Listeners of the journaled events only (telemetry): they do not ask for the model's deltas. */
  private readonly journaledOnly = new Set<(event: RunEvent) => void>();
  /** Listeners of the appended entries as the journal keeps them (telemetry), told before their events. */
  private readonly entryListeners = new Set<(entries: readonly JournalEntry[]) => void>();

  constructor(
    private readonly store: EventStore,
    readonly runId: string,
    onEvent?: (event: RunEvent) => void,
  ) {
    if (onEvent !== undefined) this.listeners.add(onEvent);
  }

  /**
   * Folds what `appender` appends from now on into events. Its state is the run's journal folded
   * so far (a resumed run), which the fold goes on from.
   */
  attach(appender: Appender): void {
    this.fold = initialRunEventState({}, appender.state);
    this.unfolded = [];
    this.unfoldedCount = 0;
    appender.onAppended = (entries) => this.appended(entries);
  }

  /**
   * Emits a live event (a delta of the model call in flight, or a `reset`): to the run's
   * listeners and this process's followers of the run. Never journaled, never waited on.
   *
   * @example
   * ```ts
   * session.events.emitLive({ type: "text-delta", runId, stepId, attempt: 1, delta: "Hel" });
   * ```
   */
  emitLive(event: LiveRunEvent): void {
    this.emit(event);
  }

  /**
   * Whether anything watches the run's events now: a listener (`onEvent`, `loop.stream`,
   * telemetry) or a `followRun` of the run in this process. Deltas are made only then.
   */
  watched(): boolean {
    return this.listeners.size > this.journaledOnly.size || (live.get(this.store)?.get(this.runId)?.size ?? 0) > 0;
  }

  /**
   * Tells the run's listeners (`onEvent`, `loop.stream`; not telemetry's) an event of one of its
   * sub-agents' runs (`agentTool`), as that run gave it: its `runId` is the child's. Followers are
   * not told: `followRun` follows the child run itself.
   */
  emitNested(event: RunEvent): void {
    for (const listener of this.listeners) {
      if (this.journaledOnly.has(listener)) continue;
      try {
        listener(event);
      } catch {
        // A listener's failure is its own.
      }
    }
  }

  /** Adds a listener of the journaled events only (no deltas, and none are made for it); returns its removal. */
  observe(listener: (event: RunEvent) => void): () => void {
    this.listeners.add(listener);
    this.journaledOnly.add(listener);
    return () => {
      this.listeners.delete(listener);
      this.journaledOnly.delete(listener);
    };
  }

  /**
   * Adds a listener of each append's entries as a read of the journal hands them back (redacted
   * where a redaction changed them), told before the events folded from them; returns its removal.
   */
  observeEntries(listener: (entries: readonly JournalEntry[]) => void): () => void {
    this.entryListeners.add(listener);
    return () => this.entryListeners.delete(listener);
  }

  /** Adds a listener (a stream's buffer); returns its removal. */
  listen(listener: (event: RunEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private appended(appended: AppendedEntries): void {
    const fold = this.fold;
    if (fold === undefined) return;
    if (this.entryListeners.size > 0) {
      const journaled = appended.journaled();
      for (const listener of this.entryListeners) {
        try {
          listener(journaled);
        } catch {
          // A listener's failure is its own.
        }
      }
    }
    const watched = this.listeners.size > 0;
    // Nothing to tell: the fold waits for a listener (a `loop.stream` started mid-run, telemetry).
    if (!watched && this.unfoldedCount + appended.length <= MAX_UNFOLDED) {
      this.unfolded.push(appended);
      this.unfoldedCount += appended.length;
      publish(this.store, this.runId, undefined);
      return;
    }
    if (this.unfolded.length > 0) {
      // Their events went to nobody.
      for (const earlier of this.unfolded) for (const entry of earlier.stored()) evolveRunEvents(fold, entry);
      this.unfolded = [];
      this.unfoldedCount = 0;
    }
    // Loom's own observers (telemetry) only read: the events are frozen for the others.
    const freeze = this.listeners.size > this.journaledOnly.size;
    for (const entry of appended.stored()) {
      const events = evolveRunEvents(fold, entry);
      // The events share the run's own values (an output the model is fed next turn): frozen, so a
      // watcher cannot change what the run does. Only when someone watches: freezing walks the data.
      if (watched) for (const event of events) this.emit(freeze ? deepFreeze(event) : event);
    }
    publish(this.store, this.runId, undefined);
  }

  private emit(event: RunEvent): void {
    const live = !("cursor" in event);
    for (const listener of this.listeners) {
      if (live && this.journaledOnly.has(listener)) continue;
      try {
        listener(event);
      } catch {
        // A listener's failure is its own: the run and the other listeners go on.
      }
    }
    if (live) publish(this.store, this.runId, event);
  }
}

/** What a follower in this process is told: a live event, or (undefined) that entries were appended. */
export type LiveRunListener = (event: LiveRunEvent | undefined) => void;

const live = new WeakMap<EventStore, Map<string, Set<LiveRunListener>>>();

/**
 * Listens to the runs this process runs on `store`: each live delta of run `runId`, and a wake-up
 * (undefined) each time the run appends. Returns the removal.
 *
 * @example
 * ```ts
 * const stop = watchLiveRun(journal.store, "r-1", (event) => event && console.log(event.type));
 * ```
 */
export function watchLiveRun(store: EventStore, runId: string, listener: LiveRunListener): () => void {
  let runs = live.get(store);
  if (runs === undefined) {
    runs = new Map();
    live.set(store, runs);
  }
  let set = runs.get(runId);
  if (set === undefined) {
    set = new Set();
    runs.set(runId, set);
  }
  set.add(listener);
  const all = runs;
  const mine = set;
  return () => {
    mine.delete(listener);
    if (mine.size === 0 && all.get(runId) === mine) all.delete(runId);
  };
}

function publish(store: EventStore, runId: string, event: LiveRunEvent | undefined): void {
  const set = live.get(store)?.get(runId);
  if (set === undefined) return;
  for (const listener of set) {
    try {
      listener(event);
    } catch {
      // as above
    }
  }
}

/** How many events a stream holds for a consumer that is behind before it drops deltas. */
export const DEFAULT_STREAM_BUFFER = 1024;

/**
 * The queue between a run (or a follower) and a consumer that may be slow: never waits, so the
 * run never waits on its watcher. Journaled events are always kept (a run's are bounded by its
 * journal, which the loop holds folded anyway); once `limit` events wait, deltas are dropped, and
 * with them every later delta of the same model attempt, so no text arrives with a hole in it
 * (the attempt's `model-finished` carries its whole content).
 */
export class EventQueue implements AsyncIterable<RunEvent> {
  private readonly items: RunEvent[] = [];
  private head = 0;
  private waiting: (() => void) | undefined;
  private ended = false;
  private failure: { error: unknown } | undefined;
  private readonly gapped = new Set<string>();
  /** Deltas dropped so far (a consumer that fell behind). */
  dropped = 0;

  constructor(private readonly limit: number = DEFAULT_STREAM_BUFFER) {}

  push(event: RunEvent): void {
    if (this.ended) return;
    if (isDelta(event)) {
      const key = `${event.runId}\u0000${event.stepId}\u0000${event.attempt}`; // a sub-agent's steps have ids of their own run
      if (this.gapped.has(key) || this.items.length - this.head >= this.limit) {
        this.gapped.add(key);
        this.dropped++;
        return;
      }
    }
    this.items.push(event);
    this.wake();
  }

  /** No more events; `error` is thrown to the consumer once it has read the rest. */
  end(error?: { error: unknown }): void {
    if (this.ended) return;
    this.ended = true;
    this.failure = error;
    this.wake();
  }

  get length(): number {
    return this.items.length - this.head;
  }

  private wake(): void {
    const w = this.waiting;
    this.waiting = undefined;
    w?.();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<RunEvent> {
    for (;;) {
      if (this.head < this.items.length) {
        const event = this.items[this.head] as RunEvent;
        this.head++;
        if (this.head > 1024 && this.head * 2 > this.items.length) {
          this.items.splice(0, this.head);
          this.head = 0;
        }
        yield event;
        continue;
      }
      if (this.ended) {
        if (this.failure !== undefined) throw this.failure.error;
        return;
      }
      await new Promise<void>((resolve) => {
        this.waiting = resolve;
      });
    }
  }
}

/** A delta of the model call in flight: what a behind consumer can do without. */
export const isDelta = (
  event: RunEvent,
): event is Extract<RunEvent, { type: "text-delta" | "reasoning-delta" | "tool-input-delta" }> =>
  event.type === "text-delta" || event.type === "reasoning-delta" || event.type === "tool-input-delta";

/** Freezes `value` and everything in it (already frozen parts are not walked again). */
function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const key of Object.keys(value)) deepFreeze((value as Record<string, unknown>)[key]);
  }
  return value;
}
