import { isOwnershipLostError, RunCancelledError } from "../core/errors.ts";
import type { EventStore, RunLease } from "../events/store.ts";
import { HeldLease, type HoldLeaseOptions } from "../runtime/base/heldLease.ts";
import type { batchedRenewals } from "./renewals.ts";

/** What every run a worker holds shares: the worker's name, clock, lease length and renewals. */
export interface InHandContext {
  readonly owner: string;
  readonly leaseMs: number;
  readonly now: () => number;
  readonly renewals: ReturnType<typeof batchedRenewals>;
  /** The store's own renewals, or undefined on a store Loom made (renewed with the queue row, in the batch). */
  readonly store: Pick<EventStore, "renew"> | undefined;
  /** Told of a renewal that failed for a reason other than a lost run (the database away). */
  readonly failed: (what: string, e: unknown) => void;
}

/**
 * One run a worker holds: its lease (`held`), renewed at each of the worker's renewal ticks, and
 * its controller, aborted once when the run is lost (the queue row or the ownership moved on) or
 * when a renewal finds a cancel request. Its methods are what the worker's closures a run were
 * (a worker takes thousands of runs a second): the batched renewal the lease renews through, the
 * lease's `onRenewed`, the tick.
 */
export class RunInHand implements HoldLeaseOptions {
  /** Whether the run was lost (another worker holds it now): told once. */
  lost = false;
  readonly held: HeldLease;
  readonly leaseMs: number;
  readonly now: () => number;

  constructor(
    readonly runId: string,
    readonly controller: AbortController,
    private readonly context: InHandContext,
    owned: RunLease,
    /** When the acquire or claim that gave `owned` was sent, by `now`. */
    readonly sentAt: number,
  ) {
    this.leaseMs = context.leaseMs;
    this.now = context.now;
    this.held = new HeldLease(context.store ?? this, owned, this);
  }

  /** Aborts the run: another worker holds it now. */
  lose(why: unknown): void {
    if (this.lost) return;
    this.lost = true;
    this.controller.abort(why);
  }

  private lostQueue(): void {
    this.lose(new Error(`worker ${this.context.owner} lost its lease on run ${this.runId}`));
  }

  /** On a store Loom made, the lease's renewal: the ownership renewed with the queue row, in the worker's batch. */
  async renew(current: RunLease): Promise<RunLease> {
    const renewed = await this.context.renewals.renew(current);
    if (!renewed.queued) this.lostQueue();
    if (renewed.lease instanceof Error) throw renewed.lease;
    return renewed.lease;
  }

  /** cancelRun from any process: the run stops at its next step and ends with run.cancelled. */
  onRenewed(renewed: RunLease): void {
    if (renewed.cancelRequested !== undefined && !this.controller.signal.aborted)
      this.controller.abort(new RunCancelledError(this.runId, renewed.cancelRequested));
  }

  /** The worker's renewal tick: renews the run's lease (and on another store, its queue row in the batch). */
  tick(): void {
    if (this.context.store !== undefined) {
      this.context.renewals.renew(this.held.lease).then(
        (r) => {
          if (!r.queued) this.lostQueue();
        },
        (e) => this.renewalFailed(e),
      );
    }
    this.held.renew().catch((e) => this.renewalFailed(e));
  }

  private renewalFailed(e: unknown): void {
    if (isOwnershipLostError(e)) this.lose(e);
    else this.context.failed(`renewing the lease on run ${this.runId}`, e);
  }
}
