import { sqliteArchiveOn } from "./archive.ts";
import { sqliteBlobStoreOn } from "./blobs.ts";
import { type DataKeyStore, sqliteDataKeysOn } from "./dataKeys.ts";
import type { ArchiveStore, BlobStore, Journal } from "./spi.ts";
import { sqliteStoreOn } from "./sqlite/sqlite.ts";
import { openSqliteFile, type SqliteOptions } from "./sqlite/sqliteFile.ts";
import type { EventStore } from "./store.ts";
import type { JournalEntry } from "./types.ts";
import { validateEntries } from "./validate.ts";

/** A journal that owns its parts: `close()` closes the store, the blobs and the archive. */
export interface OpenJournal extends Journal {
  /** Closes the store, the blobs and the archive (a shared SQLite file once, after the last). */
  close(): Promise<void>;
}

/**
 * Puts a store and, optionally, a blob store (claim-check) and an archive (compaction) together
 * as the `Journal` a loop runs against.
 *
 * @example
 * const journal = createJournal({ store: memoryStore({ json: true }), blobs: memoryBlobStore(), archive: memoryArchive() });
 */
export function createJournal(parts: {
  readonly store: EventStore;
  readonly blobs?: BlobStore;
  readonly archive?: ArchiveStore;
  readonly dataKeys?: DataKeyStore;
}): OpenJournal {
  const { store, blobs, archive, dataKeys } = parts;
  return {
    store,
    ...(blobs === undefined ? {} : { blobs }),
    ...(archive === undefined ? {} : { archive }),
    ...(dataKeys === undefined ? {} : { dataKeys }),
    async close() {
      await store.close();
      await blobs?.close();
      await archive?.close();
    },
  };
}

/**
 * The embedded default: entries, blobs and archive in one SQLite file (created if absent), so a
 * compaction is one transaction. `{ readonly: true }` reads an existing journal without changing
 * anything (a read-only file works); `{ create: false }` writes only to an existing journal. Both
 * refuse a file that is not a Loom journal with `JournalFileError`, naming it.
 *
 * @example
 * const journal = openSqliteJournal("./loom.db");
 * const reader = openSqliteJournal("./loom.db", { readonly: true }); // e.g. a dashboard
 * try {
 *   await loop.run({ runId, journal, input: "hello" });
 * } finally {
 *   await journal.close();
 * }
 */
export function openSqliteJournal(path: string, options?: SqliteOptions): OpenJournal {
  const file = openSqliteFile(path, options);
  return createJournal({
    store: sqliteStoreOn(file),
    blobs: sqliteBlobStoreOn(file),
    archive: sqliteArchiveOn(file),
    dataKeys: sqliteDataKeysOn(file),
  });
}

/**
 * Reads a run's entries, in seq order from `from` (default 1), and validates them: the one way
 * to read a journal. A damaged or foreign entry raises `JournalFormatError` naming the run, the
 * seq and the field; nothing damaged is ever returned to be folded.
 *
 * @example
 * const entries = await readJournal(journal, "run-1");
 * const state = foldEntries(entries);
 */
export async function readJournal(
  journal: Journal,
  runId: string,
  options?: { readonly from?: number },
): Promise<JournalEntry[]> {
  const from = options?.from ?? 1;
  const entries = await journal.store.read(runId, { from });
  validateEntries(runId, entries, { from });
  return entries;
}
