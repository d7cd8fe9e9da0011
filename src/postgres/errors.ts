import { errorGuard, LoomError } from "../core/errors.ts";

/** The database's Loom tables are not usable by this Loom (a newer schema version, a bad schema name). */
export class PostgresSchemaError extends LoomError {
  constructor(message: string) {
    super("postgresSchema", message);
  }
}

/** A postgres-only operation (submitRun, startWorker) was given a journal whose store is not postgres. */
export class NotPostgresJournalError extends LoomError {
  constructor(what: string) {
    super(
      "notPostgresJournal",
      `${what} needs a journal whose store is postgresStore (its leases live in the same database); open it with openPostgresJournal(url)`,
    );
  }
}

/**
 * What a worker reports (through `onError`) when its database fails: the first failure at once,
 * then at most one report per interval, counting the failures it did not report, so an outage
 * gives a few lines, not thousands. The worker keeps retrying with a growing delay.
 */
export class WorkerDatabaseError extends LoomError {
  /** Failures since the last report that were not reported one by one (this one excluded). */
  readonly suppressed: number;
  constructor(owner: string, where: string, cause: unknown, suppressed: number, sinceMs: number, retryMs: number) {
    const more =
      suppressed > 0
        ? `; ${suppressed} more database errors in the last ${Math.round(sinceMs / 1000)} s not reported`
        : "";
    super(
      "workerDatabase",
      `worker ${owner}: ${where} failed: ${String((cause as Error)?.message ?? cause)}${more}; it retries (next look in ${Math.round(retryMs)} ms): check that the database is up and reachable`,
      { cause },
    );
    this.suppressed = suppressed;
  }
}

/** Is `e` a `WorkerDatabaseError` (a worker's rate-limited report of a database failure)? */
export const isWorkerDatabaseError = errorGuard(WorkerDatabaseError, { codes: ["workerDatabase"] });

/** True when `e` is a `PostgresSchemaError`. */
export const isPostgresSchemaError = errorGuard(PostgresSchemaError, { codes: ["postgresSchema"] });
/** True when `e` is a `NotPostgresJournalError`. */
export const isNotPostgresJournalError = errorGuard(NotPostgresJournalError, { codes: ["notPostgresJournal"] });

/**
 * `sharedRateLimit` was given a limit it cannot keep: no limit at all, or one that is not above 0.
 *
 * @example
 * try {
 *   sharedRateLimit(model, { journal, key: "openai", requestsPerMinute: 0 });
 * } catch (e) {
 *   if (isRateLimitConfigError(e)) console.error(e.message);
 * }
 */
export class RateLimitConfigError extends LoomError {
  constructor(key: string, problem: string) {
    super("rateLimitConfig", `sharedRateLimit "${key}": ${problem}`);
  }
}

/** Whether `e` is a `RateLimitConfigError`. */
export const isRateLimitConfigError = errorGuard(RateLimitConfigError, { codes: ["rateLimitConfig"] });
