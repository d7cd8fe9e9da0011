/** The journal: schema, stores, blobs, archive, compaction, and the one validated read. */
export { memoryArchive, type SqliteArchiveStore, sqliteArchive } from "./archive.ts";
export { dirBlobStore, memoryBlobStore, refDigest, sqliteBlobStore } from "./blobs.ts";
export { type ClaimCheckEnvelope, claimCheckOf, isClaimCheckEnvelope } from "./claimCheck.ts";
export {
  type CodecEnvelope,
  type Compression,
  isCodecEnvelope,
  isPayloadCodecError,
  type KeyProvider,
  type PayloadCodec,
  PayloadCodecError,
  type PayloadCodecErrorCode,
  type PayloadCodecOptions,
  payloadCodec,
  staticKeys,
} from "./codec/codec.ts";
export { codecArchive, codecBlobStore, codecStore, withCodec } from "./codec/codecStore.ts";
export { type CompactOptions, type CompactResult, compact } from "./compact.ts";
export { checkRunId, escapeRunId, MAX_RUN_ID_BYTES, RUN_ID_RULE, runIdProblem } from "./ids.ts";
export { createJournal, type OpenJournal, openSqliteJournal, readJournal } from "./journal.ts";
export { type MemoryStoreOptions, memoryStore } from "./memory.ts";
export { isModePinDecision, MODE_PIN_SOURCE, type PinnedMode, readModePin } from "./modePin.ts";
export {
  isPruneNotSupportedError,
  PruneNotSupportedError,
  type PruneOptions,
  type PruneResult,
  pruneRuns,
} from "./prune.ts";
export { type ReadArchivedOptions, readArchived } from "./readArchived.ts";
export type { ArchivedFrame, ArchiveStore, BlobInfo, BlobRef, BlobStore, Journal } from "./spi.ts";
export { type SqliteEventStore, sqliteStore } from "./sqlite/sqlite.ts";
export { SQLITE_SCHEMA_VERSION, type SqliteDatabase, type SqliteOptions } from "./sqlite/sqliteFile.ts";
export { isJournalFileError, JournalFileError, type JournalFileErrorCode } from "./sqlite/sqliteOpen.ts";
export type {
  AcquireOptions,
  AppendOptions,
  CompactRequest,
  EventStore,
  ListRunsOptions,
  PruneRequest,
  RunLease,
  RunSummary,
  StoredSnapshot,
} from "./store.ts";
export * from "./types.ts";
export { checkNewEntries, validateEntries } from "./validate.ts";
