/** The journal: schema, stores, blobs, archive, compaction, and the one validated read. */
export { memoryArchive, type SqliteArchiveStore, sqliteArchive } from "./archive.ts";
export { dirBlobStore, memoryBlobStore, refDigest, sqliteBlobStore } from "./blobs.ts";
export { type CompactOptions, type CompactResult, compact } from "./compact.ts";
export { createJournal, type OpenJournal, openSqliteJournal, readJournal } from "./journal.ts";
export { type MemoryStoreOptions, memoryStore } from "./memory.ts";
export {
  isPruneNotSupportedError,
  PruneNotSupportedError,
  type PruneOptions,
  type PruneResult,
  pruneRuns,
} from "./prune.ts";
export { type ReadArchivedOptions, readArchived } from "./readArchived.ts";
export type { ArchivedFrame, ArchiveStore, BlobInfo, BlobRef, BlobStore, Journal } from "./spi.ts";
export { type SqliteEventStore, sqliteStore } from "./sqlite.ts";
export { SQLITE_SCHEMA_VERSION, type SqliteOptions } from "./sqliteFile.ts";
export type { AppendOptions, CompactRequest, EventStore, PruneRequest, RunSummary } from "./store.ts";
export * from "./types.ts";
export { checkNewEntries, validateEntries } from "./validate.ts";
