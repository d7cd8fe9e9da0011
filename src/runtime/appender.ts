import { isConcurrencyError, isOwnershipLostError, type OwnershipLostError } from "../core/errors.ts";
import type { EventStore } from "../events/store.ts";
import { type JournalEntry, type NewEntry, SCHEMA_VERSION } from "../events/types.ts";
import { validateEntries } from "../events/validate.ts";
import { type RunState, runStateProjection } from "../projections/runState.ts";

/**
 * Appends one run's entries in order (tool calls run concurrently, the stream is one line) and
 * keeps the run's folded state current by evolving each appended entry into `state`.
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
  private tail: Promise<unknown> = Promise.resolve();
  private closedBecause: string | undefined;
  private lostTo: OwnershipLostError | undefined;

  constructor(
    private readonly store: EventStore,
    readonly runId: string,
    readonly state: RunState,
    private readonly fence?: Fence,
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
      if (this.lostTo !== undefined) throw this.lostTo;
      if (this.closedBecause !== undefined && !final) throw new AppendAfterCloseError(this.runId, this.closedBecause);
      const expectedVersion = await this.write(entries);
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

  /** Appends at the state's version (after folding any compaction marker in); returns that version. */
  private async write(entries: NewEntry[]): Promise<number> {
    for (;;) {
      const expectedVersion = this.state.version;
      try {
        await this.store.append(this.runId, entries, {
          expectedVersion,
          ...(this.fence === undefined ? {} : { fence: this.fence.token }),
        });
        return expectedVersion;
      } catch (e) {
        if (isOwnershipLostError(e)) this.lost(e);
        if (!isConcurrencyError(e) || !(await this.foldCompaction(expectedVersion))) throw e;
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
    return true;
  }

  /** The lease is gone: nothing more is appended, and the run's error is this one. */
  lost(error: OwnershipLostError): void {
    if (this.lostTo !== undefined) return;
    this.lostTo = error;
    this.closedBecause ??= "ownership lost";
    this.fence?.onLost(error);
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

/** The run's lease as its appends use it: the token, and whom to tell once it is refused. */
export interface Fence {
  readonly token: number;
  /** Called once, when the store first refuses an append (the run stops its effects in flight). */
  onLost(error: OwnershipLostError): void;
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
