import { hostname } from "node:os";
import { OwnershipLostError, RunBusyError, RunCancelledError, type RunHolderInfo } from "../core/errors.ts";
import type { AcquireOptions, RunLease } from "./store.ts";
import type { NewEntry } from "./types.ts";

/**
 * A run's ownership as every store keeps it: one row per run that was ever owned. `token` only
 * grows (a release clears the owner but keeps the token), so a writer fenced with an older token
 * is refused for ever. The stores differ only in where the row lives and what makes the check
 * and the change one transaction; the decisions are these functions.
 */
export interface OwnerRow {
  readonly token: number;
  /** null once released. */
  readonly owner: string | null;
  readonly host: string | null;
  readonly pid: number | null;
  readonly expiresAt: number;
}

/** This process, as a lease records it. */
export const thisProcess = { host: hostname(), pid: process.pid } as const;

/**
 * A process of this host that no longer exists (signal 0 checks without sending anything). A pid
 * reused since is taken as alive: the lease then has to run out, the safe side.
 */
function goneFromThisHost(host: string | null, pid: number | null): boolean {
  if (host !== thisProcess.host || pid === null || pid === thisProcess.pid) return false;
  try {
    process.kill(pid, 0);
    return false;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "ESRCH";
  }
}

/** The row's holder if it still holds the run at `now` (by the store's clock), else undefined. */
export function liveHolder(row: OwnerRow | undefined, now: number): RunHolderInfo | undefined {
  if (row === undefined || row.owner === null || row.expiresAt <= now) return undefined;
  if (goneFromThisHost(row.host, row.pid)) return undefined;
  return holderInfo(row);
}

function holderInfo(row: OwnerRow): RunHolderInfo | undefined {
  if (row.owner === null) return undefined;
  return { owner: row.owner, host: row.host ?? "?", pid: row.pid ?? 0, token: row.token, expiresAt: row.expiresAt };
}

/** The row an acquisition at `now` writes, or `RunBusyError` when a live holder has the run. */
export function acquisition(runId: string, row: OwnerRow | undefined, options: AcquireOptions, now: number): OwnerRow {
  checkLeaseMs(options.leaseMs);
  const holder = liveHolder(row, now);
  if (holder !== undefined) throw new RunBusyError(runId, holder, holder.expiresAt - now);
  return {
    token: (row?.token ?? 0) + 1,
    owner: options.owner,
    host: thisProcess.host,
    pid: thisProcess.pid,
    expiresAt: now + options.leaseMs,
  };
}

/** Whether `row` is still the lease fenced by `token` (not taken over, not released). */
export const stillOwned = (row: OwnerRow | undefined, token: number): boolean =>
  row !== undefined && row.token === token && row.owner !== null;

/** The refusal of a fenced write or a renewal whose lease is gone. */
export const lost = (runId: string, token: number, row: OwnerRow | undefined) =>
  new OwnershipLostError(runId, token, row === undefined ? undefined : holderInfo(row));

/** The lease a row stands for, with the run's cancel request (its reason) when there is one. */
export const leaseOf = (runId: string, row: OwnerRow, cancel?: string | null): RunLease => ({
  runId,
  ...(holderInfo(row) as RunHolderInfo),
  ...(cancel == null ? {} : { cancelRequested: cancel }),
});

/**
 * The refusal of a fenced append to a run someone asked to cancel: every append but the one that
 * ends the run with `run.cancelled` (see `EventStore.requestCancel`).
 */
export function cancelRefusal(
  runId: string,
  cancel: string | null | undefined,
  entries: readonly NewEntry[],
): RunCancelledError | undefined {
  if (cancel == null || entries.at(-1)?.type === "run.cancelled") return undefined;
  return new RunCancelledError(runId, cancel);
}

export function checkLeaseMs(leaseMs: number): void {
  if (!Number.isFinite(leaseMs) || leaseMs <= 0)
    throw new RangeError(`leaseMs must be a positive number, got ${leaseMs}`);
}
