import { WorkerDatabaseError } from "./errors.ts";

/**
 * A worker's view of its database's health: how long to wait after a failure (100 ms, doubling,
 * at most 5 s, back to the shortest after a success) and which failures to report. The first
 * failure of an outage is reported at once; later ones at most once per `intervalMs`, as one
 * `WorkerDatabaseError` that counts those left unreported. An outage of a minute gives a handful
 * of lines. An outage is over once statements have succeeded for `intervalMs` (a flapping
 * database stays one outage).
 */
export function databaseHealth(owner: string, label: string, report: (error: unknown) => void, intervalMs: number) {
  let failures = 0;
  let reportedAt = Number.NEGATIVE_INFINITY;
  let suppressed = 0;
  let healthySince = Number.NEGATIVE_INFINITY;
  return {
    /** A statement succeeded: the next failure waits the shortest delay again. */
    ok(): void {
      if (failures > 0 || !Number.isFinite(healthySince)) healthySince = Date.now();
      failures = 0;
    },
    /** `what` failed with `error`: reports it if due, and returns how long to wait before retrying. */
    failed(what: string, error: unknown): number {
      const delay = Math.min(100 * 2 ** failures, 5000);
      failures++;
      const now = Date.now();
      if (Number.isFinite(healthySince) && now - healthySince >= intervalMs) reportedAt = Number.NEGATIVE_INFINITY;
      healthySince = Number.NEGATIVE_INFINITY;
      if (now - reportedAt < intervalMs) {
        suppressed++;
        return delay;
      }
      const since = Number.isFinite(reportedAt) ? now - reportedAt : 0;
      report(new WorkerDatabaseError(owner, `${what} on ${label}`, error, suppressed, since, delay));
      reportedAt = now;
      suppressed = 0;
      return delay;
    },
  };
}
