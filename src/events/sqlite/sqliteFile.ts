import type Database from "better-sqlite3";
import { LoomError } from "../../core/errors.ts";
import { loadOptional } from "../../core/optional.ts";
import { JournalFileError, journalFileError, notAJournal, openReadonly, recordedSchemaVersion } from "./sqliteOpen.ts";
import { INSERT_ENTRY, SQL_DATA_TEXT, SQL_META_TEXT, TYPE_CODES, v1RowColumns } from "./sqliteRows.ts";

/**
 * The SQLite file the embedded journal lives in: one file holds the entries, the blobs and the
 * archive, so a compaction can move frames and write its marker in one transaction. The store,
 * the blob store and the archive each hold the file; it closes when the last of them closes.
 */

/**
 * The version of the tables below, recorded in `loom_meta`. Version 1 kept every entry as text
 * columns (run id, type, data, meta); version 2 keeps the same entries in less room (see
 * sqliteRows.ts); version 3 adds `loom_runs.removed` and the trigger that keeps it (see
 * `REMOVED_TRIGGER`): a Loom at version 2 would delete rows without keeping it right (its
 * compaction removes before it appends its marker), so it must refuse the file, as it does a
 * newer version. An older file is migrated when it is opened to write; read-only, this Loom reads
 * versions 2 and 3 as they are (a version 2 file's entries counted, as before).
 *
 * What an older Loom at the same version reads and writes correctly is added when a file is
 * opened to write, without a new version: the owner and cancel tables and `loom_snapshots`. A
 * file opened read-only that predates one of them is read without it.
 */
export const SQLITE_SCHEMA_VERSION = 3;

/** The oldest version a read-only open reads as it is (no table of version 3 is needed to read). */
const OLDEST_READABLE = 2;

/** How Loom opens a SQLite file (ignored for a `Database` handed in: its settings are the caller's). */
export interface SqliteOptions {
  /**
   * `"full"` (default): an append that returned survives a power loss, except one asked only to be
   * written (`AppendOptions.durability`, a model call's start) and the lease's own commits, which
   * are flushed by the next durable commit or in the background 2 ms later (sqliteSync.ts).
   * `"normal"`: commits survive a crash of the process but the last ones may be lost on a power
   * loss (WAL keeps the file consistent either way); a few times faster per append.
   */
  readonly synchronous?: "full" | "normal";
  /**
   * Where the write-ahead log is copied back into the file (a checkpoint), at `synchronous:
   * "normal"`: `"background"` (default) on a worker thread, so no append waits for it (the
   * appending connection still checkpoints at 4,000 pages if the worker finds no pause);
   * `"inline"` inside the commit that takes the WAL past 1,000 pages, as SQLite does by default.
   * At `"full"` checkpoints are always inline.
   *
   * @example
   * ```ts
   * const journal = openSqliteJournal("./loom.db", { synchronous: "normal" }); // checkpoints on a worker thread
   * const inline = openSqliteJournal("./other.db", { synchronous: "normal", checkpoints: "inline" });
   * ```
   */
  readonly checkpoints?: "background" | "inline";
  /** How long a writer waits for another process's transaction, in ms (default 10,000). */
  readonly busyTimeoutMs?: number;
  /**
   * Open an existing journal to read it only: nothing in the file or its folder is changed (no
   * WAL switch, no tables), a read-only file or folder works, and a file that is not a Loom
   * journal at a schema version this Loom reads as it is (2 and 3) is refused with
   * `JournalFileError`. Appends fail.
   */
  readonly readonly?: boolean;
  /**
   * `false`: open only a file that already holds a Loom journal (`JournalFileError` otherwise),
   * never create the file, nor Loom's tables in another application's database. Default `true`.
   */
  readonly create?: boolean;
}

/**
 * An open better-sqlite3 `Database`, as Loom's SQLite adapters accept it: the part of its type
 * they rely on, declared here so the shipped `.d.ts` files need no `@types/better-sqlite3`
 * (a better-sqlite3 `Database` fits it; Loom uses it through better-sqlite3's own API).
 *
 * @example
 * ```ts
 * import Database from "better-sqlite3";
 * import { sqliteStore } from "loom-agent";
 *
 * const db = new Database("./app.db"); // the application's own file, shared with Loom
 * const store = sqliteStore(db); // Loom will not close it
 * ```
 */
export interface SqliteDatabase {
  /** The file's path (`:memory:` for an in-memory database). */
  readonly name: string;
  /** False once closed. */
  readonly open: boolean;
  /** Compiles a statement. */
  prepare(source: string): unknown;
  /** Runs SQL text. */
  exec(source: string): unknown;
  /** Reads or sets a pragma. */
  pragma(source: string, options?: { simple?: boolean }): unknown;
  /** Wraps a function in a transaction. */
  transaction(fn: (...args: never[]) => unknown): unknown;
  /** Closes the database. */
  close(): unknown;
}

/** The file a store, a blob store and an archive share (Loom's own handle; not for applications). */
export interface SqliteFile {
  /** @internal better-sqlite3's own type, kept out of the shipped declarations. */
  readonly db: Database.Database;
  /**
   * @internal The synchronous level Loom set when it opened the file by path; undefined for a
   * database handed in (its settings are the caller's) or opened read-only.
   */
  readonly synchronous: "full" | "normal" | undefined;
  /** @internal Where its WAL is checkpointed (`SqliteOptions.checkpoints`); undefined as for `synchronous`. */
  readonly checkpoints: "background" | "inline" | undefined;
  /** Counts one more holder. */
  acquire(): SqliteFile;
  /** One holder is done; the last one closes the database (unless the caller opened it). */
  release(): void;
}

/**
 * `loom_runs.removed` is the run's last seq minus the entries it keeps (0 for a run never
 * compacted), so `listRuns` tells a run's entries from its last row alone (`seq - removed`)
 * instead of counting them. Appends leave it alone (each adds the seq after the last); this
 * trigger keeps it on every delete, Loom's (compaction, which appends its marker first, so that
 * every row it removes is below the last) or anyone's (a run removed with SQLite's tools, whole or
 * its last entries), per row in the deleting transaction: +1 for a row below the last; for the
 * last row itself, +1 less the seqs between it and the new last (which leaves 0 when the run's
 * last row goes, and the next append starts from the new last).
 */
const REMOVED_TRIGGER = `CREATE TRIGGER IF NOT EXISTS loom_entries_removed AFTER DELETE ON loom_entries BEGIN
  UPDATE loom_runs
     SET removed = removed + 1 - max(0, old.seq - coalesce((SELECT max(seq) FROM loom_entries WHERE run = old.run), 0))
   WHERE run = old.run;
END;`;

/** Sets every run's `removed` from its rows (last seq − entries): once, where the column is new. */
const BACKFILL_REMOVED = `UPDATE loom_runs
   SET removed = coalesce((SELECT max(seq) - count(*) FROM loom_entries e WHERE e.run = loom_runs.run), 0)`;

/** Does the file's `loom_runs` have its `removed` column (read-only: a file that predates it has not)? @internal */
export function hasRemovedColumn(db: Database.Database): boolean {
  return db.prepare("SELECT 1 FROM pragma_table_info('loom_runs') WHERE name = 'removed'").get() !== undefined;
}

/** Where a store or an archive says which file it lives in (for one-transaction compaction). */
export const sqliteFileOf: unique symbol = Symbol("loom.sqliteFile");

const SCHEMA = `
CREATE TABLE IF NOT EXISTS loom_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS loom_runs (
  run INTEGER PRIMARY KEY,
  run_id TEXT NOT NULL UNIQUE,
  removed INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS loom_entry_types (code INTEGER PRIMARY KEY, type TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS loom_entries (
  run INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  type INTEGER NOT NULL,
  at INTEGER NOT NULL,
  v INTEGER NOT NULL,
  frame TEXT,
  effect TEXT,
  digest BLOB,
  data TEXT,
  UNIQUE (run, seq)
);
${REMOVED_TRIGGER}
CREATE VIEW IF NOT EXISTS loom_journal AS
  SELECT r.run_id, e.seq, t.type, ${SQL_DATA_TEXT} AS data, ${SQL_META_TEXT} AS meta
    FROM loom_entries e JOIN loom_runs r ON r.run = e.run LEFT JOIN loom_entry_types t ON t.code = e.type;
CREATE TABLE IF NOT EXISTS loom_blobs (digest TEXT PRIMARY KEY, size INTEGER NOT NULL, bytes BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS loom_archive (ref TEXT PRIMARY KEY, run_id TEXT NOT NULL, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS loom_archive_run ON loom_archive (run_id);
CREATE TABLE IF NOT EXISTS loom_owners (
  run_id TEXT PRIMARY KEY,
  token INTEGER NOT NULL,
  owner TEXT,
  host TEXT,
  pid INTEGER,
  expires_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS loom_cancels (run_id TEXT PRIMARY KEY, reason TEXT NOT NULL, at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS loom_snapshots (run_id TEXT PRIMARY KEY, seq INTEGER NOT NULL, digest TEXT NOT NULL, body TEXT NOT NULL);
`;

/**
 * Opens (or adopts) a SQLite database for Loom: WAL, the synchronous level asked for, a busy
 * timeout so two processes queue instead of failing, and the schema created and its version
 * checked. A database passed in is the caller's: Loom never closes it.
 */
export function openSqliteFile(target: string | SqliteDatabase, options: SqliteOptions = {}): SqliteFile {
  const external = typeof target !== "string";
  const path = external ? target.name : target;
  let db: Database.Database;
  try {
    db = external
      ? (target as Database.Database)
      : options.readonly
        ? openReadonly(sqliteDriver(), target, options)
        : new (sqliteDriver())(target, {
            timeout: options.busyTimeoutMs ?? 10_000,
            fileMustExist: options.create === false,
          });
  } catch (e) {
    throw journalFileError(path, e);
  }
  try {
    if (db.readonly || options.create === false) {
      const version = recordedSchemaVersion(db, path);
      if (version === undefined) throw notAJournal(path);
      if (db.readonly && !(version >= OLDEST_READABLE && version <= SQLITE_SCHEMA_VERSION)) {
        throw new JournalFileError(
          "journalVersion",
          path,
          `${path} holds Loom's tables at schema version ${version}; read-only, this Loom reads versions ${OLDEST_READABLE} to ${SQLITE_SCHEMA_VERSION} only: ${version < SQLITE_SCHEMA_VERSION ? "open it once to write (openSqliteJournal(path)), which migrates it" : "upgrade Loom"}`,
        );
      }
    }
    if (!external && !db.readonly) {
      db.pragma("journal_mode = WAL");
      db.pragma(`synchronous = ${options.synchronous === "normal" ? "NORMAL" : "FULL"}`);
    }
    if (!db.readonly) ensureSchema(db);
  } catch (e) {
    if (!external) db.close();
    throw journalFileError(path, e);
  }
  let holders = 0;
  const file: SqliteFile = {
    db,
    synchronous: external || db.readonly ? undefined : (options.synchronous ?? "full"),
    checkpoints: external || db.readonly ? undefined : (options.checkpoints ?? "background"),
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
    db.exec("CREATE TABLE IF NOT EXISTS loom_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)");
    const row = db.prepare("SELECT value FROM loom_meta WHERE key = 'schema_version'").get() as
      | { value: string }
      | undefined;
    const found = row === undefined ? undefined : Number(row.value);
    if (found !== undefined && !(found <= SQLITE_SCHEMA_VERSION)) {
      throw new LoomError(
        "sqliteSchema",
        `${db.name}: the Loom tables are at schema version ${row?.value}, newer than this Loom knows (${SQLITE_SCHEMA_VERSION}); upgrade Loom to open this file`,
      );
    }
    if (found === 1) db.exec("ALTER TABLE loom_entries RENAME TO loom_entries_v1");
    // Version 2 → 3: the column is added and set from the rows once, here; the trigger keeps it
    // from then on. (Version 1 has no loom_runs: it is created with the column below.)
    const runsTable = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'loom_runs'").get();
    const addRemoved = runsTable !== undefined && !hasRemovedColumn(db);
    if (addRemoved) db.exec("ALTER TABLE loom_runs ADD COLUMN removed INTEGER NOT NULL DEFAULT 0");
    db.exec(SCHEMA);
    const types = db.prepare("INSERT OR IGNORE INTO loom_entry_types (code, type) VALUES (?, ?)");
    for (const [type, code] of Object.entries(TYPE_CODES)) types.run(code, type);
    if (found === 1) migrateFromV1(db);
    // Version 1 runs were compacted by deleting rows too; the migration's inserts fire no trigger.
    if (addRemoved || found === 1) db.exec(BACKFILL_REMOVED);
    if (found !== SQLITE_SCHEMA_VERSION) {
      db.prepare("INSERT OR REPLACE INTO loom_meta (key, value) VALUES ('schema_version', ?)").run(
        String(SQLITE_SCHEMA_VERSION),
      );
    }
  }).immediate();
}

/**
 * Version 1 → 2, inside the opening transaction: every row of the old table is laid out again
 * by the same code that appends (so its data text is kept byte for byte), then the old table goes.
 */
function migrateFromV1(db: Database.Database): void {
  const where = `${db.name} (migrating it from schema version 1)`;
  const fix = "restore the row from a backup or remove the run, then open the file again";
  const addRun = db.prepare("INSERT INTO loom_runs (run_id) VALUES (?)");
  const insert = db.prepare(INSERT_ENTRY);
  // Pages by rowid: better-sqlite3 runs no other statement while an iterator is open.
  const page = db
    .prepare(
      "SELECT rowid, run_id, seq, type, data, meta FROM loom_entries_v1 WHERE rowid > ? ORDER BY rowid LIMIT 512",
    )
    .raw();
  const keys = new Map<string, number | bigint>();
  for (let after = 0; ; ) {
    const rows = page.all(after) as [number, string, number, string, string, string][];
    for (const [, runId, seq, type, data, metaText] of rows) {
      let key = keys.get(runId);
      if (key === undefined) {
        key = addRun.run(runId).lastInsertRowid;
        keys.set(runId, key);
      }
      const c = v1RowColumns(runId, seq, type, data, metaText, where, fix);
      insert.run(key, seq, c.type, c.at, c.v, c.frame, c.effect, c.digest, c.data);
    }
    if (rows.length < 512) break;
    after = rows[rows.length - 1]![0];
  }
  db.exec("DROP TABLE loom_entries_v1");
}

/**
 * better-sqlite3, loaded on first use: it is an optional dependency (the embedded default).
 *
 * @internal its type names better-sqlite3's, which the shipped .d.ts must not import
 */
export function sqliteDriver(): typeof Database {
  return loadOptional<typeof Database>("better-sqlite3", "The SQLite journal (openSqliteJournal, sqliteStore)");
}
