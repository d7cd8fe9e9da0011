import type { JournalEntry } from "../events/types.ts";

/**
 * A run parked for durable waits or approvals that expire (docs/waits.md) is claimed when
 * PostgreSQL's clock reaches its first wake, timeout or expiry; whether one has come is judged by
 * the worker's clock (`WorkerOptions.clock`, the resumed run's `RunOptions.now`). When that clock
 * is behind (a host whose clock lags the database's, a test's fake clock), resuming would only
 * stop the run again and journal another interruption, every claim, until it caught up. The
 * worker asks this first (not for a row something woke: that run is resumed at once).
 */

/**
 * When a run whose journal ends with `last` is due, if it stopped for durable waits or approvals:
 * the first time its `waiting` or `approval-pending` interruption journaled (`detail.expiresAt`),
 * as the park reads it. Undefined for any other last entry (an event was delivered or an approval
 * recorded since, the run is not waiting).
 */
export function waitingDueOf(last: JournalEntry | undefined): number | undefined {
  if (last?.type !== "run.interrupted") return undefined;
  if (last.data.reason !== "waiting" && last.data.reason !== "approval-pending") return undefined;
  const expiresAt = (last.data.detail as { expiresAt?: Record<string, unknown> } | null | undefined)?.expiresAt;
  let first: number | undefined;
  for (const at of Object.values(expiresAt ?? {})) {
    const ms = typeof at === "string" ? Date.parse(at) : Number.NaN;
    if (!Number.isNaN(ms) && (first === undefined || ms < first)) first = ms;
  }
  return first;
}

/**
 * How long to leave a claimed run parked before looking again, or undefined to resume it now:
 * `due` (from `waitingDueOf`) not yet reached by `now` (the worker's clock). At most `pollMs`, so a
 * clock that jumps ahead (a test's) is noticed within a poll; the remaining time when it is less,
 * so a run is resumed at its time by this clock, not a poll later.
 */
export function parkedFor(due: number | undefined, now: number, pollMs: number): number | undefined {
  if (due === undefined || now >= due) return undefined;
  return Math.min(due - now, pollMs);
}
