import { existsSync, readFileSync } from "node:fs";
import type Database from "better-sqlite3";
import { errorGuard, isLoomError, LoomError } from "../../core/errors.ts";

/**
 * Opening a SQLite journal file without changing it (readers: `loom runs`, `log`, `show`…), and
 * the errors a journal file gives when it cannot be used, each naming the file and the fix.
 */

/** Why a journal file cannot be used. */
export type JournalFileErrorCode =
  /** Not SQLite, or SQLite without Loom's tables (another application's database). */
  | "notAJournal"
  /** Loom's tables, at a schema version this Loom cannot read as it is. */
  | "journalVersion"
  /** The file (or its folder) cannot be opened: missing, a directory, no permission. */
  | "journalUnreadable"
  /** Opened to write, but the file or its folder is read-only. */
  | "journalReadOnly"
  /** Flushing the file to disk failed: its latest appends may not survive a power loss. */
  | "journalNotDurable"
  /** The disk under the file is full: the write that found it so took nothing; free space and resume. */
  | "diskFull";

/** A file given as a journal that cannot be used as one. `path` is the file; the message says what to do. */
export class JournalFileError extends LoomError {
  declare readonly code: JournalFileErrorCode;
  readonly path: string;
  constructor(code: JournalFileErrorCode, path: string, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.path = path;
  }
}

/** Is `e` a `JournalFileError` (a file that is not a Loom journal, or cannot be opened as asked)? */
export const isJournalFileError = errorGuard(JournalFileError);

const sqliteCode = (e: unknown): string =>
  typeof (e as { code?: unknown })?.code === "string" ? (e as { code: string }).code : "";

/**
 * The driver's error for `path` as a `JournalFileError` when it is about the file (cannot open,
 * not a database, read-only); any other error as it is.
 */
export function journalFileError(path: string, e: unknown): unknown {
  if (isLoomError(e)) return e;
  const code = sqliteCode(e);
  const why = (e as Error)?.message ?? String(e);
  if (isDiskFull(e)) {
    return new JournalFileError(
      "diskFull",
      path,
      `cannot write to the journal file ${path}: the disk is full (${why}); free space on that disk (or move the file to a bigger one) and try again`,
      { cause: e },
    );
  }
  if (code === "SQLITE_NOTADB") {
    return new JournalFileError(
      "notAJournal",
      path,
      `${path} is not a Loom journal (not a SQLite database: ${why}); pass the SQLite file your program journals to`,
      { cause: e },
    );
  }
  // better-sqlite3 checks the folder itself, with a TypeError that does not name the file.
  const cannotOpen = code === "SQLITE_CANTOPEN" || code.startsWith("SQLITE_IOERR");
  if (cannotOpen || (e instanceof TypeError && /directory does not exist/.test(why))) {
    return new JournalFileError(
      "journalUnreadable",
      path,
      `cannot open the journal file ${path} (${why}): check that the path names a file in an existing folder and that you may read it`,
      { cause: e },
    );
  }
  if (code.startsWith("SQLITE_READONLY") || code === "SQLITE_PERM" || code === "SQLITE_AUTH") {
    return new JournalFileError(
      "journalReadOnly",
      path,
      `cannot write to the journal file ${path} (${why}): writing needs write access to the file and its folder (SQLite keeps -wal and -shm files beside it); to read it, open it with { readonly: true }`,
      { cause: e },
    );
  }
  return e;
}

/** The driver's or the OS's "no space left": SQLite's SQLITE_FULL, or ENOSPC from a write or a flush. */
const isDiskFull = (e: unknown): boolean => {
  const code = sqliteCode(e);
  return code === "SQLITE_FULL" || code === "ENOSPC";
};

/**
 * Runs `write` (one write to the journal file at `path`, for run `runId`), turning a full disk
 * into a `JournalFileError` (code `diskFull`) that names the run and what to do. A write that
 * finds the disk full takes nothing: SQLite rolls its transaction back, so every entry written
 * before it is kept. @internal
 */
export function writeOrFull<T>(path: string, runId: string, what: string, write: () => T): T {
  try {
    return write();
  } catch (e) {
    if (!isDiskFull(e)) throw e;
    throw new JournalFileError(
      "diskFull",
      path,
      `run ${runId}: ${what} to the journal file ${path} failed because the disk is full; nothing of it was written and every entry journaled before it is kept. Free space on that disk (or move the file to a bigger one), then run ${runId} again to resume it`,
      { cause: e },
    );
  }
}

/** Loom's schema version recorded in the file, or undefined when it holds no Loom tables. @internal */
export function recordedSchemaVersion(db: Database.Database, path: string): number | undefined {
  try {
    const meta = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'loom_meta'").get();
    if (meta === undefined) return undefined;
    const value = db.prepare("SELECT value FROM loom_meta WHERE key = 'schema_version'").pluck().get();
    return value === undefined ? undefined : Number(value);
  } catch (e) {
    throw journalFileError(path, e);
  }
}

/** Refuses a file without Loom's tables (another application's database, an empty file). */
export function notAJournal(path: string): JournalFileError {
  return new JournalFileError(
    "notAJournal",
    path,
    `${path} is not a Loom journal (a SQLite database without Loom's tables); nothing was written to it. Pass the SQLite file your program journals to`,
  );
}

/**
 * Opens `path` read-only. A journal in WAL mode needs its -shm file, which SQLite cannot create
 * in a read-only folder: then the file is read whole into memory (a snapshot, WAL flag cleared in
 * the copy's header) and opened from there. Nothing on disk is changed either way.
 * @internal
 */
export function openReadonly(
  Driver: typeof Database,
  path: string,
  options: { readonly busyTimeoutMs?: number },
): Database.Database {
  const db = new Driver(path, { readonly: true, fileMustExist: true, timeout: options.busyTimeoutMs ?? 10_000 });
  try {
    db.prepare("SELECT count(*) FROM sqlite_master").get(); // reads the header and the WAL index now
    return db;
  } catch (e) {
    db.close();
    const code = sqliteCode(e);
    if (!(code === "SQLITE_CANTOPEN" || code.startsWith("SQLITE_READONLY")) || !existsSync(path)) throw e;
  }
  const bytes = readFileSync(path);
  // Bytes 18 and 19 of the header: file format write/read versions, 2 = WAL, 1 = legacy.
  if (bytes.length >= 20 && bytes[18] === 2 && bytes[19] === 2) bytes.fill(1, 18, 20);
  return new Driver(bytes, { readonly: true });
}
