import type Database from "better-sqlite3";
import { LoomError } from "../core/errors.ts";
import { loadOptional } from "../core/optional.ts";

/**
 * The SQLite file the embedded journal lives in: one file holds the entries, the blobs and the
 * archive, so a compaction can move frames and write its marker in one transaction. The store,
 * the blob store and the archive each hold the file; it closes when the last of them closes.
 */

/** The version of the tables below, recorded in `loom_meta` so a later Loom can migrate. */
export const SQLITE_SCHEMA_VERSION = 1;

export interface SqliteOptions {
  /**
   * `"full"` (default): every commit is fsynced, so an append that returned survives a power
   * loss. `"normal"`: commits survive a crash of the process but the last ones may be lost on
   * a power loss (WAL keeps the file consistent either way); a few times faster per append.
   */
  readonly synchronous?: "full" | "normal";
  /** How long a writer waits for another process's transaction, in ms (default 10,000). */
  readonly busyTimeoutMs?: number;
}

export interface SqliteFile {
  readonly db: Database.Database;
  /** Counts one more holder. */
  acquire(): SqliteFile;
  /** One holder is done; the last one closes the database (unless the caller opened it). */
  release(): void;
}

/** Where a store or an archive says which file it lives in (for one-transaction compaction). */
export const sqliteFileOf: unique symbol = Symbol("loom.sqliteFile");

const SCHEMA = `
CREATE TABLE IF NOT EXISTS loom_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS loom_entries (
  run_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  type TEXT NOT NULL,
  data TEXT NOT NULL,
  meta TEXT NOT NULL,
  UNIQUE (run_id, seq)
);
CREATE TABLE IF NOT EXISTS loom_blobs (digest TEXT PRIMARY KEY, size INTEGER NOT NULL, bytes BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS loom_archive (ref TEXT PRIMARY KEY, run_id TEXT NOT NULL, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS loom_archive_run ON loom_archive (run_id);
`;

/**
 * Opens (or adopts) a SQLite database for Loom: WAL, the synchronous level asked for, a busy
 * timeout so two processes queue instead of failing, and the schema created and its version
 * checked. A database passed in is the caller's: Loom never closes it.
 */
export function openSqliteFile(target: string | Database.Database, options: SqliteOptions = {}): SqliteFile {
  const external = typeof target !== "string";
  const db = external ? target : new (sqliteDriver())(target, { timeout: options.busyTimeoutMs ?? 10_000 });
  try {
    if (!external) {
      db.pragma("journal_mode = WAL");
      db.pragma(`synchronous = ${options.synchronous === "normal" ? "NORMAL" : "FULL"}`);
    }
    ensureSchema(db);
  } catch (e) {
    if (!external) db.close();
    throw e;
  }
  let holders = 0;
  const file: SqliteFile = {
    db,
    acquire() {
      holders++;
      return file;
    },
    release() {
      holders--;
      if (holders === 0 && !external && db.open) db.close();
    },
  };
  return file;
}

function ensureSchema(db: Database.Database): void {
  db.transaction(() => {
    db.exec(SCHEMA);
    const row = db.prepare("SELECT value FROM loom_meta WHERE key = 'schema_version'").get() as
      | { value: string }
      | undefined;
    if (row === undefined) {
      db.prepare("INSERT INTO loom_meta (key, value) VALUES ('schema_version', ?)").run(String(SQLITE_SCHEMA_VERSION));
      return;
    }
    const found = Number(row.value);
    if (!(found <= SQLITE_SCHEMA_VERSION)) {
      throw new LoomError(
        "sqliteSchema",
        `${db.name}: the Loom tables are at schema version ${row.value}, newer than this Loom knows (${SQLITE_SCHEMA_VERSION}); upgrade Loom to open this file`,
      );
    }
  }).immediate();
}

/** better-sqlite3, loaded on first use: it is an optional dependency (the embedded default). */
function sqliteDriver(): typeof Database {
  return loadOptional<typeof Database>("better-sqlite3", "The SQLite journal (openSqliteJournal, sqliteStore)");
}
