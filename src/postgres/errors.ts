import { LoomError } from "../core/errors.ts";

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

/** True when `e` is a `PostgresSchemaError`. */
export const isPostgresSchemaError = (e: unknown): e is PostgresSchemaError => e instanceof PostgresSchemaError;
/** True when `e` is a `NotPostgresJournalError`. */
export const isNotPostgresJournalError = (e: unknown): e is NotPostgresJournalError =>
  e instanceof NotPostgresJournalError;
