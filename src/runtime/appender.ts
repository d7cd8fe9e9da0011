import type { EventStore } from "../events/store.ts";
import { type JournalEntry, type NewEntry, SCHEMA_VERSION } from "../events/types.ts";
import { type RunState, runStateProjection } from "../projections/runState.ts";

/**
 * Appends one run's entries in order (tool calls run concurrently, the stream is one line) and
 * keeps the run's folded state current by evolving each appended entry into `state`.
 *
 * Entries must already be in their JSON form (what a JSON store hands back: the runtime round-
 * trips user values where they enter: the input, tool outputs, model responses), so the state
 * of a live run equals the state of a resumed one without a second round trip here.
 */
export class Appender {
  private tail: Promise<unknown> = Promise.resolve();
  private closedBecause: string | undefined;

  constructor(
    private readonly store: EventStore,
    readonly runId: string,
    readonly state: RunState,
  ) {}

  /** Appends atomically after everything queued before. Resolves once the entries are durable. */
  append(...entries: NewEntry[]): Promise<void> {
    return this.enqueue(entries, false);
  }

  /** The run's last entry (`run.interrupted` after an abort): accepted even once closed. */
  appendFinal(entry: NewEntry): Promise<void> {
    return this.enqueue([entry], true);
  }

  private enqueue(entries: NewEntry[], final: boolean): Promise<void> {
    const next = this.tail.then(async () => {
      if (this.closedBecause !== undefined && !final) throw new AppendAfterCloseError(this.runId, this.closedBecause);
      const expectedVersion = this.state.version;
      await this.store.append(this.runId, entries, { expectedVersion });
      const at = new Date().toISOString();
      entries.forEach((entry, i) => {
        const recorded = {
          runId: this.runId,
          seq: expectedVersion + i + 1,
          type: entry.type,
          data: entry.data,
          meta: { v: SCHEMA_VERSION, at },
        } as JournalEntry;
        runStateProjection.evolve(this.state, recorded);
      });
    });
    this.tail = next.catch(() => {});
    return next;
  }

  /** No append is accepted after this (an abort): work still in flight must not write. */
  close(reason: string): void {
    this.closedBecause ??= reason;
  }

  get closed(): boolean {
    return this.closedBecause !== undefined;
  }
}

/** Internal: an effect finished after its run stopped; its result is not journaled (outcome unknown). */
export class AppendAfterCloseError extends Error {
  constructor(
    readonly runId: string,
    readonly reason: string,
  ) {
    super(`run ${runId}: not journaled, the run stopped (${reason})`);
  }
}
