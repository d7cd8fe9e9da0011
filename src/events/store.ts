import type { JournalEntry, NewEntry } from "./types.ts";

/** One run's stream, as `listRuns` reports it. */
export interface RunSummary {
  readonly runId: string;
  /** The seq of the last entry (0 for none). */
  readonly version: number;
  /** The type of the last entry: tells a completed run from an interrupted one at a glance. */
  readonly lastType: string;
  /** Number of entries kept (after compaction, fewer than `version`). */
  readonly entries: number;
}

/** How `EventStore.append` guards against a concurrent writer. */
export interface AppendOptions {
  /** The stream's version (last seq, 0 for a new run) the caller last saw. */
  readonly expectedVersion: number;
}

/** What `EventStore.compact` removes and what it appends in their place (built by `compact`). */
export interface CompactRequest {
  /** The seqs of the entries to remove (frames moved to the archive). */
  readonly removeSeqs: readonly number[];
  /** The `frames.archived` marker appended in their place, at the end of the stream. */
  readonly marker: Extract<NewEntry, { type: "frames.archived" }>;
  /** As for `append`: the stream's version the caller read. */
  readonly expectedVersion: number;
}

/**
 * The event store SPI: small on purpose. Adapters are factories returning plain objects
 * (`memoryStore()`, `sqliteStore(path)`, `postgresStore(url)`); one contract suite
 * (test/events/storeContract.ts) holds every adapter to the same behaviour.
 */
export interface EventStore {
  /**
   * Appends `entries` atomically (all or none) after the entry at `expectedVersion`.
   * Throws `ConcurrencyError` when the stream is not at `expectedVersion`. Stores each entry's
   * data as JSON text exactly as `JSON.stringify` writes it. Returns the new version.
   */
  append(runId: string, entries: readonly NewEntry[], options: AppendOptions): Promise<{ version: number }>;
  /** Entries of a run in seq order, from seq `from` (default 1). Unvalidated: the journal validates. */
  read(runId: string, options?: { from?: number }): Promise<JournalEntry[]>;
  /** Every run of the store, with its version and last entry type. */
  listRuns(): Promise<RunSummary[]>;
  /** Removes `removeSeqs` and appends `marker`, atomically; `ConcurrencyError` if the stream moved. */
  compact(runId: string, request: CompactRequest): Promise<{ version: number }>;
  /** Releases the connection or file (a database handed in by the caller stays open). */
  close(): Promise<void>;
}
