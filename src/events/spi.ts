import type { EventStore } from "./store.ts";
import type { EntryOf } from "./types.ts";

/** A claim-checked blob's address: `sha256:<64 lowercase hex>`, the hash of its bytes. */
export type BlobRef = `sha256:${string}`;

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
  put(bytes: Uint8Array): Promise<BlobInfo>;
  get(ref: string): Promise<Uint8Array>;
  has(ref: string): Promise<boolean>;
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
  put(runId: string, frames: readonly ArchivedFrame[]): Promise<{ ref: string }>;
  get(ref: string): Promise<readonly ArchivedFrame[]>;
  close(): Promise<void>;
}

/** What a loop run is given: a store, and optionally blobs (claim-check) and an archive. */
export interface Journal {
  readonly store: EventStore;
  readonly blobs?: BlobStore;
  readonly archive?: ArchiveStore;
}
