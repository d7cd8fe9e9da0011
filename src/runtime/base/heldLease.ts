import { isOwnershipLostError, OwnershipLostError } from "../../core/errors.ts";
import type { EventStore, RunLease } from "../../events/store.ts";

/** What `holdLease` needs beside the store and the lease. */
export interface HoldLeaseOptions {
  /** The lease's length, in ms: what it was acquired for, and what each renewal asks. */
  readonly leaseMs: number;
  /**
   * When the acquire that gave the lease was sent, by `now`. Left out, it is unknown, and the
   * first effect renews the lease before it starts.
   */
  readonly sentAt?: number;
  /** The monotonic clock, in ms (default `performance.now`): never the wall clock, which can jump. */
  readonly now?: () => number;
  /** Told each lease a renewal returns (its `cancelRequested` says whether someone asked to cancel the run). */
  readonly onRenewed?: (lease: RunLease) => void;
}

/**
 * The part of a lease kept back for safety: an effect starts only while more than this much of
 * the lease is left by the local clock. Renewals come every third of the lease, so a live owner
 * always has two thirds of it left, less a round trip: only a process that stalled (paused, a
 * blocked event loop) or whose renewals fail falls below.
 */
export const LEASE_MARGIN = 0.25;

/**
 * A run's lease as this process knows it: the lease, and until when, by the local monotonic
 * clock, it surely holds. Each successful acquire or renew proves the lease from the moment it
 * was sent (the store extends it from when it runs, which is later) for its length. Before an
 * effect starts, `confirm` checks that clock: while the lease is comfortably valid it costs
 * nothing; once it may have lapsed (the process was paused past it), it renews the lease, fenced
 * with its token, and lets the effect start only if that renewal succeeds. `loop.run` holds one
 * for its run; a caller that acquired the run itself (a worker) passes its own in
 * `ownership.lease` and renews it with `renew`.
 *
 * @example
 * const sentAt = performance.now();
 * const lease = holdLease(journal.store, await journal.store.acquire(runId, { owner, leaseMs: 30_000 }), {
 *   leaseMs: 30_000,
 *   sentAt,
 * });
 * const renewing = setInterval(() => lease.renew().catch(() => {}), 10_000);
 * await loop.run({ runId, journal, ownership: { lease } }).finally(() => clearInterval(renewing));
 */
export class HeldLease {
  private current: RunLease;
  /** When the last successful acquire or renew was sent, by `now` (-Infinity: unknown). */
  private provenAt: number;
  private readonly now: () => number;
  readonly leaseMs: number;

  constructor(
    private readonly store: Pick<EventStore, "renew">,
    lease: RunLease,
    private readonly options: HoldLeaseOptions,
  ) {
    this.current = lease;
    this.leaseMs = options.leaseMs;
    this.now = options.now ?? (() => performance.now());
    this.provenAt = options.sentAt ?? Number.NEGATIVE_INFINITY;
  }

  /** The lease as last acquired or renewed. */
  get lease(): RunLease {
    return this.current;
  }

  /** Its fencing token. */
  get token(): number {
    return this.current.token;
  }

  /** Whether the lease surely holds now, with {@link LEASE_MARGIN} of it to spare. */
  fresh(): boolean {
    return this.now() < this.provenAt + this.leaseMs * (1 - LEASE_MARGIN);
  }

  /**
   * Renews the lease (fenced with its token: `OwnershipLostError` once another holds the run) and
   * records when the renewal was sent.
   */
  async renew(): Promise<RunLease> {
    const sentAt = this.now();
    const renewed = await this.store.renew(this.current, this.leaseMs);
    this.current = renewed;
    if (sentAt > this.provenAt) this.provenAt = sentAt;
    this.options.onRenewed?.(renewed);
    return renewed;
  }

  /**
   * Before an effect of `step`: undefined while the lease is fresh (no round trip); otherwise a
   * promise that resolves once a renewal proves the lease fresh again, or rejects with
   * `OwnershipLostError` (the run was taken over, or the renewal failed: the effect must not start).
   */
  confirm(step: string): Promise<void> | undefined {
    return this.fresh() ? undefined : this.confirmByRenewal(step);
  }

  private async confirmByRenewal(step: string): Promise<void> {
    const staleFor = this.now() - this.provenAt;
    // A renewal that itself stalls past the lease proves too little: renew again, a few times at most.
    for (let tries = 0; tries < 3; tries++) {
      try {
        await this.renew();
      } catch (e) {
        if (isOwnershipLostError(e)) throw e;
        throw this.unconfirmed(step, staleFor, e);
      }
      if (this.fresh()) return;
    }
    throw this.unconfirmed(step, staleFor, new Error("each renewal took longer than the lease allows"));
  }

  private unconfirmed(step: string, staleFor: number, cause: unknown): OwnershipLostError {
    const { runId, token } = this.current;
    return new OwnershipLostError(runId, token, undefined, {
      step,
      staleForMs: staleFor,
      leaseMs: this.leaseMs,
      cause,
    });
  }
}

/**
 * Holds `lease` (from `store.acquire`) for an effect-by-effect check of its time: see {@link HeldLease}.
 *
 * @example
 * const sentAt = performance.now();
 * const lease = holdLease(store, await store.acquire(runId, { owner: "me", leaseMs: 10_000 }), { leaseMs: 10_000, sentAt });
 */
export function holdLease(store: Pick<EventStore, "renew">, lease: RunLease, options: HoldLeaseOptions): HeldLease {
  return new HeldLease(store, lease, options);
}
