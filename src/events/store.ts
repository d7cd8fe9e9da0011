import type { RunHolderInfo } from "../core/errors.ts";
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

/** What `EventStore.listRuns` lists. */
export interface ListRunsOptions {
  /**
   * Only runs whose id starts with this, e.g. `"<runId>/"` for a run's sub-agent runs (what
   * `cancelRun` looks for): a hint a store may honour (see `listRuns`).
   */
  readonly prefix?: string;
}

/** How `EventStore.append` guards against a concurrent writer. */
export interface AppendOptions {
  /** The stream's version (last seq, 0 for a new run) the caller last saw. */
  readonly expectedVersion: number;
  /**
   * The fencing token of the caller's lease (`RunLease.token`): the store appends only if that
   * lease still owns the run, checked in the same transaction as the append, and otherwise throws
   * `OwnershipLostError` and appends nothing. Without it the append is not fenced.
   */
  readonly fence?: number;
  /**
   * The append makes the run one a worker can take further (an approval recorded from another
   * process): a store that queues runs for workers (PostgreSQL) queues it for the workers of
   * `loopId`, in the same transaction, and announces it. Other stores ignore it.
   */
  readonly wake?: {
    readonly loopId: string;
    /**
     * The run to queue instead of the one appended to (`loopId` is its loop): a sub-agent's
     * approval wakes the top-level run of its chain, whose resume resumes the sub-agent. It is
     * queued though its own journal still says it waits.
     */
    readonly runId?: string;
  };
  /**
   * `"written"`: the caller needs the entries written (in order, visible to readers, kept if this
   * process crashes) before it goes on, not yet flushed to disk. The store may then return before
   * they would survive a power loss, provided they are flushed soon by themselves and are durable
   * by the time any later append without this option returns. Loom asks it for a model call's
   * `frame.started`: a model call changes nothing outside the run, and everything that does (a
   * tool's call, the run's result) waits on an append that is durable, and so is everything
   * before it. The SQLite store opened at `synchronous: "full"` honours it (sqliteSync.ts), and
   * the PostgreSQL store (its transaction commits with `synchronous_commit` off); stores whose
   * appends are durable anyway ignore it.
   */
  readonly durability?: "written";
}

/** A run's ownership, held by one writer at a time (see `EventStore.acquire`). */
export interface RunLease extends RunHolderInfo {
  readonly runId: string;
  /**
   * Set when someone asked to cancel the run (`EventStore.requestCancel`): the reason. The holder
   * stops and appends `run.cancelled`; its other fenced appends are refused (`RunCancelledError`).
   */
  readonly cancelRequested?: string;
}

/** What `acquire` asks for: who wants the run, and for how long before the lease runs out. */
export interface AcquireOptions {
  /** Names the owner in `RunBusyError` and `OwnershipLostError` messages. */
  readonly owner: string;
  /** How long the lease lasts unless renewed, in ms. */
  readonly leaseMs: number;
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

/** What `pruneRuns` asks a store to remove (see src/events/prune.ts). */
export interface PruneRequest {
  /** Runs whose last entry is older than this (ms since the epoch) go. */
  readonly completedBefore: number;
  /** Runs removed per transaction. */
  readonly batchSize: number;
  /** Count what would go, remove nothing. */
  readonly dryRun: boolean;
}

/** What a prune removed (or, dry, would remove). */
export interface PruneResult {
  readonly runs: number;
  readonly entries: number;
  /** Blobs no remaining run names. */
  readonly blobs: number;
  /** Archived batches of compacted frames. */
  readonly archives: number;
}

/**
 * A run's folded state as a store keeps it (`EventStore.writeSnapshot`): opaque to the store,
 * which only keeps the latest per run. Made and checked by `src/projections/runSnapshot.ts`.
 */
export interface StoredSnapshot {
  /** The seq of the last entry the state folded. */
  readonly seq: number;
  /** sha256 hex of `body`: a body that does not match is never trusted. */
  readonly digest: string;
  /** The snapshot as JSON text. */
  readonly body: string;
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
   * data as JSON text exactly as `JSON.stringify` writes it. Returns the new version, and
   * `stored` when a decorator changed the entries before they reached the store (redaction): the
   * entries as stored, one for each appended, in order, so the run's listeners see what readers see.
   */
  append(
    runId: string,
    entries: readonly NewEntry[],
    options: AppendOptions,
  ): Promise<{ version: number; stored?: readonly NewEntry[] }>;
  /** Entries of a run in seq order, from seq `from` (default 1). Unvalidated: the journal validates. */
  read(runId: string, options?: { from?: number }): Promise<JournalEntry[]>;
  /**
   * Every run of the store, with its version and last entry type, in run id order. With
   * `options.prefix`, the store may list only the runs whose id starts with it, looked up as a
   * range of its index of run ids (memory, SQLite and PostgreSQL do); a store that ignores the
   * option lists every run, so a caller filters by the prefix itself.
   */
  listRuns(options?: ListRunsOptions): Promise<RunSummary[]>;
  /**
   * Makes the caller the run's one owner until `leaseMs` from now, with a fencing token one above
   * the run's last (tokens never go back, even after a release). Throws `RunBusyError` when a
   * live owner holds it: one whose lease has not run out, and which is not a process of this
   * host that no longer exists (a crashed owner on this host is taken over at once). The store
   * records the caller's host and pid beside the owner name.
   */
  acquire(runId: string, options: AcquireOptions): Promise<RunLease>;
  /** Extends the lease to `leaseMs` from now; `OwnershipLostError` once another token holds the run. */
  renew(lease: RunLease, leaseMs: number): Promise<RunLease>;
  /** Gives the run up (nothing happens if the lease was already taken over); its token stays used. */
  release(lease: RunLease): Promise<void>;
  /**
   * Records a request to cancel the run, beside its ownership, where the owner's fenced appends
   * and renewals look: from then on a fenced append is refused with `RunCancelledError` unless it
   * ends with `run.cancelled`, and `acquire` and `renew` return the lease with `cancelRequested`.
   * The first request's reason is kept. Resolves to the run's live holder, if any (none: the
   * caller may acquire the run and append `run.cancelled` itself).
   */
  requestCancel(runId: string, reason: string): Promise<{ readonly holder: RunHolderInfo | undefined }>;
  /**
   * Optional (memory, SQLite and PostgreSQL have it): the run's live holder, the one `acquire`
   * would refuse the run for, by the store's clock; undefined when nobody holds it (never owned,
   * released, its lease ran out, or its process is gone from this host). Reads only: what
   * `runActivity` tells a running run from a stalled one by. A store without it cannot tell them
   * apart.
   */
  holder?(runId: string): Promise<RunHolderInfo | undefined>;
  /** Removes `removeSeqs` and appends `marker`, atomically; `ConcurrencyError` if the stream moved. */
  compact(runId: string, request: CompactRequest): Promise<{ version: number }>;
  /**
   * Optional: removes finished runs (completed, failed or cancelled) older than the cutoff, with the blobs
   * and archive batches in the store's own database that no remaining run names (`pruneRuns`).
   */
  prune?(request: PruneRequest): Promise<PruneResult>;
  /**
   * Optional: calls `onAppend` (soon, not necessarily at once) after entries are appended to run
   * `runId`, by this process or, where the store can tell, by another; returns the removal. It
   * says only "read again": a watcher reads from its own cursor, so a spurious or merged wake-up
   * is harmless. `followRun` uses it, and polls a store without it.
   */
  watch?(runId: string, onAppend: () => void): () => void;
  /**
   * Optional (memory, SQLite and PostgreSQL have it): keeps `snapshot` as the run's latest, unless
   * the store holds one at a higher seq already. Never changes the entries. A store without it
   * (or without `latestSnapshot`) is read in full on every resume.
   */
  writeSnapshot?(runId: string, snapshot: StoredSnapshot): Promise<void>;
  /** Optional, with `writeSnapshot`: the run's latest snapshot as written, unchecked (the reader checks it). */
  latestSnapshot?(runId: string): Promise<StoredSnapshot | undefined>;
  /** Releases the connection or file (a database handed in by the caller stays open). */
  close(): Promise<void>;
}
