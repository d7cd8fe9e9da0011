import type { DataKeyStore } from "./dataKeys.ts";
import type { EventStore } from "./store.ts";
import type { EntryOf } from "./types.ts";

/** A claim-checked blob's address: `sha256:<64 lowercase hex>`, the hash of its bytes. */
export type BlobRef = `sha256:${string}`;

/** What `BlobStore.put` stored: the blob's address, size and hash. */
export interface BlobInfo {
  readonly ref: BlobRef;
  /** Bytes stored. */
  readonly size: number;
  /** sha256 hex of the bytes (the ref without its prefix). */
  readonly digest: string;
}

/**
 * Content-addressed bytes (the claim-check of large tool outputs). `put` of the same bytes
 * stores them once. `get` verifies the bytes against the ref and throws `IntegrityError` on a
 * mismatch; a malformed ref is refused before any I/O.
 */
export interface BlobStore {
  /** Stores `bytes` (once, whatever the number of puts) and says where. */
  put(bytes: Uint8Array): Promise<BlobInfo>;
  /** The bytes at `ref`, verified against it. */
  get(ref: string): Promise<Uint8Array>;
  /** Whether `ref` is stored. */
  has(ref: string): Promise<boolean>;
  /** Releases what the store holds (a file, a pool it opened). */
  close(): Promise<void>;
}

/** A frame as the archive keeps it: both of its journal entries, verbatim. */
export interface ArchivedFrame {
  readonly frameId: string;
  readonly started: EntryOf<"frame.started">;
  readonly completed: EntryOf<"frame.completed">;
  /** Earlier `frame.started` entries of the same frame (attempts before a retry), oldest first. */
  readonly attempts?: readonly EntryOf<"frame.started">[];
}

/**
 * Where compaction moves frames. `put` stores one batch under a ref derived from its content
 * (idempotent: a retried compaction writes the same ref); `get` returns the batch.
 */
export interface ArchiveStore {
  /** Stores one compaction's frames of run `runId`; the ref goes into the `frames.archived` marker. */
  put(runId: string, frames: readonly ArchivedFrame[]): Promise<{ ref: string }>;
  /** The frames stored under `ref`, checked against it. */
  get(ref: string): Promise<readonly ArchivedFrame[]>;
  /** Releases what the archive holds. */
  close(): Promise<void>;
}

/** What a loop run is given: a store, and optionally blobs (claim-check) and an archive. */
export interface Journal {
  /** The entries of every run. */
  readonly store: EventStore;
  /** Where claim-checked outputs live (`AgentLoopConfig.claimCheck`), for reading them back. */
  readonly blobs?: BlobStore;
  /** Where `compact` moved older frames, for reading them back. */
  readonly archive?: ArchiveStore;
  /** Where the keys sealing redacted payloads' originals live (`withRedaction`'s `keepOriginals`). */
  readonly dataKeys?: DataKeyStore;
}
