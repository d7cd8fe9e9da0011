import { sha256Hex } from "../core/digest.ts";
import { IntegrityError } from "../core/errors.ts";
import { refDigest } from "./blobs.ts";
import type { ArchivedFrame, ArchiveStore } from "./spi.ts";
import {
  openSqliteFile,
  type SqliteDatabase,
  type SqliteFile,
  type SqliteOptions,
  sqliteFileOf,
} from "./sqlite/sqliteFile.ts";

/**
 * Archive stores keep each compaction's frames as one JSON text under `sha256:<hash of the
 * text>`: a retried compaction of the same frames writes the same ref (idempotent), and `get`
 * checks the text against its ref before parsing it (`IntegrityError` when it was altered).
 */

/** A SQLite archive also tells which file it lives in, and writes synchronously inside a caller's transaction. */
export interface SqliteArchiveStore extends ArchiveStore {
  /** @internal The file it lives in, for one-transaction compaction. */
  readonly [sqliteFileOf]: SqliteFile;
  /** `put` without its own transaction, inside the caller's (compaction's). */
  putSync(runId: string, frames: readonly ArchivedFrame[]): { ref: string };
}

function encode(frames: readonly ArchivedFrame[]): { ref: string; body: string } {
  const body = JSON.stringify(frames);
  return { ref: `sha256:${sha256Hex(body)}`, body };
}

function decode(ref: string, body: string | undefined, where: string): readonly ArchivedFrame[] {
  if (body === undefined) {
    throw new IntegrityError(
      `archive batch ${ref} is not in ${where}; a frames.archived marker points at frames that were lost`,
      "archiveMissing",
    );
  }
  if (sha256Hex(body) !== refDigest(ref)) {
    throw new IntegrityError(
      `archive batch ${ref} in ${where} does not match its hash; it was altered: restore it from a backup`,
    );
  }
  return JSON.parse(body) as ArchivedFrame[];
}

/**
 * Archived frames in memory, for tests.
 *
 * @example
 * const journal = createJournal({ store: memoryStore(), archive: memoryArchive() });
 */
export function memoryArchive(): ArchiveStore {
  const kept = new Map<string, string>();
  return {
    async put(_runId, frames) {
      const { ref, body } = encode(frames);
      if (!kept.has(ref)) kept.set(ref, body);
      return { ref };
    },
    async get(ref) {
      refDigest(ref);
      return decode(ref, kept.get(ref), "the memory archive");
    },
    async close() {},
  };
}

/**
 * Archived frames in the `loom_archive` table of a SQLite file. When it is the journal's own file
 * (`openSqliteJournal`, or the same `Database` given to `sqliteStore`), `compact` moves frames
 * and writes the marker in one transaction.
 *
 * @example
 * const archive = sqliteArchive("./loom.db");
 */
export function sqliteArchive(target: string | SqliteDatabase, options?: SqliteOptions): SqliteArchiveStore {
  return sqliteArchiveOn(openSqliteFile(target, options));
}

/** The archive on an already opened file. */
export function sqliteArchiveOn(shared: SqliteFile): SqliteArchiveStore {
  const file = shared.acquire();
  const insert = file.db.prepare("INSERT OR IGNORE INTO loom_archive (ref, run_id, body) VALUES (?, ?, ?)");
  const select = file.db.prepare("SELECT body FROM loom_archive WHERE ref = ?").pluck();
  const where = `the archive of ${file.db.name}`;
  const putSync = (runId: string, frames: readonly ArchivedFrame[]) => {
    const { ref, body } = encode(frames);
    insert.run(ref, runId, body);
    return { ref };
  };
  return {
    [sqliteFileOf]: file,
    putSync,
    async put(runId, frames) {
      return putSync(runId, frames);
    },
    async get(ref) {
      refDigest(ref);
      return decode(ref, select.get(ref) as string | undefined, where);
    },
    async close() {
      file.release();
    },
  };
}
