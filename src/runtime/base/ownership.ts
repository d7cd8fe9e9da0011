import { isOwnershipLostError, isRunBusyError, type OwnershipLostError, RunCancelledError } from "../../core/errors.ts";
import type { EventStore, RunLease } from "../../events/store.ts";
import { HeldLease } from "./heldLease.ts";

/**
 * How a `loop.run` call owns its run (see `RunRequest.ownership`).
 *
 * @example
 * // Another process may be finishing this run: wait up to 30 s for it instead of failing.
 * const out = await loop.run({ runId: "r-1", journal, ownership: { waitMs: 30_000 } });
 */
export interface RunOwnership {
  /**
   * How long the call's ownership lasts unless renewed, in ms (default 10,000). It is renewed
   * every third of that while the run goes on, and released when the call returns. A process
   * that crashes on the same host as the next caller is taken over at once; elsewhere, once this
   * much time has passed.
   */
  readonly leaseMs?: number;
  /**
   * When another live process (or call) owns the run: how long to wait for it to let go, in ms
   * (default 0: `RunBusyError` at once).
   */
  readonly waitMs?: number;
  /** Names this caller in other callers' `RunBusyError` (default `loop.run <loop id>`). */
  readonly owner?: string;
  /**
   * Ownership the caller already holds (a worker that acquired it with `store.acquire`): the run
   * fences its appends with it and does not release it. Give it as a `HeldLease` (`holdLease`),
   * renewed through it, so the run knows when it was last confirmed: before each model or tool
   * call the run checks it by the local clock, and renews it itself only when it may have run out.
   * A plain `RunLease` is renewed (for `leaseMs`) before the run's first effect, as its age is unknown.
   */
  readonly lease?: RunLease | HeldLease;
}

/** A `loop.run` call's lease on its run unless `ownership.leaseMs` says otherwise. */
export const DEFAULT_LEASE_MS = 10_000;

/** The run's ownership for one `loop.run` call: its fence, and how to let it go. */
export interface HeldRun {
  readonly fence: number;
  /** The lease, checked by the local clock before each effect (`HeldLease.confirm`). */
  readonly lease: HeldLease;
  /** Someone asked to cancel the run (`cancelRun`) before this call got it: the reason. */
  readonly cancelRequested: string | undefined;
  /** Stops renewing; releases the lease if this call acquired it. */
  letGo(): Promise<void>;
}

/** Nothing to let go: the caller that gave the lease releases it. */
const keep = async (): Promise<void> => {};

/**
 * The run held with ownership the caller already has (`RunOwnership.lease`): nothing to acquire,
 * renew or release, so no promise to wait for (a worker starts thousands of runs a second this way).
 */
export function holdGiven(store: EventStore, given: RunLease | HeldLease, leaseMs = DEFAULT_LEASE_MS): HeldRun {
  const lease = given instanceof HeldLease ? given : new HeldLease(store, given, { leaseMs });
  return { fence: lease.token, lease, cancelRequested: lease.lease.cancelRequested, letGo: keep };
}

/**
 * Acquires the run (waiting up to `waitMs` for a live owner) and renews it every third of the
 * lease. `onLost` is told once when a renewal finds the run taken over. Failed renewals for any
 * other reason (the database briefly away) are retried at the next tick: the fence keeps a late
 * writer out either way. `onCancelled` is told once when a renewal finds a cancel request.
 */
export async function holdRun(
  store: EventStore,
  runId: string,
  loopId: string,
  ownership: RunOwnership | undefined,
  signal: AbortSignal | undefined,
  onLost: (error: OwnershipLostError) => void,
  onCancelled: (error: RunCancelledError) => void = () => {},
): Promise<HeldRun> {
  const given = ownership?.lease;
  const leaseMs = ownership?.leaseMs ?? DEFAULT_LEASE_MS;
  if (given !== undefined) return holdGiven(store, given, leaseMs);
  const owner = ownership?.owner ?? `loop.run ${loopId}`;
  const deadline = Date.now() + (ownership?.waitMs ?? 0);
  let lost = false;
  let cancelled = false;
  let held: HeldLease;
  for (;;) {
    try {
      const sentAt = performance.now(); // the lease is proved from when the acquire was sent
      const acquired = await store.acquire(runId, { owner, leaseMs });
      cancelled = acquired.cancelRequested !== undefined;
      held = new HeldLease(store, acquired, {
        leaseMs,
        sentAt,
        onRenewed(renewed) {
          if (renewed.cancelRequested === undefined || cancelled) return;
          cancelled = true;
          onCancelled(new RunCancelledError(runId, renewed.cancelRequested));
        },
      });
      break;
    } catch (e) {
      const left = deadline - Date.now();
      if (!isRunBusyError(e) || left <= 0 || signal?.aborted) throw e;
      await new Promise((resolve) => setTimeout(resolve, Math.min(left, 100, Math.max(10, e.retryAfterMs))));
    }
  }
  const renewal = setInterval(() => {
    held.renew().catch((e) => {
      if (!isOwnershipLostError(e) || lost) return;
      lost = true;
      clearInterval(renewal);
      onLost(e);
    });
  }, leaseMs / 3);
  renewal.unref?.();
  return {
    fence: held.token,
    lease: held,
    cancelRequested: held.lease.cancelRequested,
    async letGo() {
      clearInterval(renewal);
      if (!lost) await store.release(held.lease);
    },
  };
}
