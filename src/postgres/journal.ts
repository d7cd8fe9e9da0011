import type pg from "pg";
import { createJournal, type OpenJournal } from "../events/journal.ts";
import { postgresArchiveOn } from "./archive.ts";
import { postgresBlobStoreOn } from "./blobs.ts";
import { openPgDatabase, type PostgresOptions } from "./database.ts";
import { postgresDataKeysOn } from "./dataKeys.ts";
import { postgresStoreOn } from "./store.ts";

/**
 * Entries, blobs and archive in one PostgreSQL database over one pool: the journal for many
 * worker processes on many machines (see `startWorker`). `close()` ends the pool when Loom
 * created it from a URL.
 *
 * @example
 * import { openPostgresJournal } from "loom-agent/postgres";
 * const journal = openPostgresJournal(process.env.DATABASE_URL!);
 * try {
 *   await loop.run({ runId, journal, input: "hello" });
 * } finally {
 *   await journal.close();
 * }
 */
export function openPostgresJournal(target: string | pg.Pool, options?: PostgresOptions): OpenJournal {
  const db = openPgDatabase(target, options);
  return createJournal({
    store: postgresStoreOn(db),
    blobs: postgresBlobStoreOn(db),
    archive: postgresArchiveOn(db),
    dataKeys: postgresDataKeysOn(db),
  });
}
