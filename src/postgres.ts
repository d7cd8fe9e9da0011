/**
 * `loom-agent/postgres`: the journal in PostgreSQL and workers that share its runs across processes
 * and machines. `pg` is an optional peer dependency; only this subpath loads it.
 */
export { postgresArchive } from "./postgres/archive.ts";
export { postgresBlobStore } from "./postgres/blobs.ts";
export type { PostgresOptions } from "./postgres/database.ts";
export {
  isNotPostgresJournalError,
  isPostgresSchemaError,
  isRateLimitConfigError,
  isWorkerDatabaseError,
  NotPostgresJournalError,
  PostgresSchemaError,
  RateLimitConfigError,
  WorkerDatabaseError,
} from "./postgres/errors.ts";
export { openPostgresJournal } from "./postgres/journal.ts";
export { type SharedRateLimitOptions, sharedRateLimit } from "./postgres/rateLimit.ts";
export {
  fireDueOnPostgres,
  type Scheduler,
  type SchedulerOptions,
  startScheduler,
} from "./postgres/scheduler.ts";
export { POSTGRES_SCHEMA_VERSION } from "./postgres/schema.ts";
export { type PostgresEventStore, postgresStore } from "./postgres/store.ts";
export { type SubmitRequest, submitRun } from "./postgres/submit.ts";
export { startWorker, type Worker, type WorkerOptions } from "./postgres/worker.ts";
