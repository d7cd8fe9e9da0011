import { DECISION_SOURCES } from "../ids.ts";
import { MODE_PIN_SOURCE } from "../modePin.ts";
import type { ArchivedFrame, ArchiveStore, BlobStore, Journal } from "../spi.ts";
import type { EventStore } from "../store.ts";
import { TOOL_LIST_SOURCE } from "../toolList.ts";
import type { EntryType, JournalEntry, NewEntry } from "../types.ts";
import { type CodecEnvelope, isCodecEnvelope, type PayloadCodec, PayloadCodecError } from "./codec.ts";

/**
 * The codec applied to a journal: an `EventStore` decorator (and the same for blobs and the
 * archive) that encodes the payload fields of each entry's data on the way in and decodes them on
 * the way out. Everything else (ids, digests, types, reasons, times, the claim-check envelope)
 * stays in the clear, so stores index, fence, park and prune as before.
 *
 * An encoded entry lists its encoded fields in `data.encoded` (last in the data). Decoding
 * replaces each in place and drops the mark, so the data reads back with its members in the
 * order they were written; an entry without the mark (a journal written without a codec, or
 * before it was turned on) reads as it always did, and an output that merely looks like an
 * envelope stays plain data.
 */

/**
 * The data fields that carry conversation content, by entry type: what the codec encodes and a
 * redaction scans. Run inputs, frame outputs (model responses, tool outputs, delivered events),
 * settled calls' results, the run's value, decisions' choices (context summaries, approvals'
 * reasons, what a failed tool fed the model, a wait's result), and the errors journaled of failed
 * attempts and runs (their messages quote tools and models). An entry's payload fields are
 * {@link payloadFieldsOf}: a decision of a source in {@link CLEAR_DECISION_SOURCES} has none, and
 * a `model-error` interruption's `detail` (which repeats the error's message) is one too.
 */
export const PAYLOAD_FIELDS: Partial<Record<EntryType, readonly string[]>> = {
  "run.started": ["input"],
  "decision.recorded": ["choice"],
  "frame.completed": ["output"],
  "call.settled": ["result"],
  "run.completed": ["output"],
  "run.interrupted": ["cause"],
  "run.failed": ["error"],
  "attempt.failed": ["error"],
};

/**
 * The decision sources whose choice is the run's own bookkeeping, never conversation text: the
 * tool-call log's mode, an MCP server's tool list, the trace context, the run's deadline and the
 * budget's model id. Their choices stay in the clear (and out of a redaction's reach).
 */
export const CLEAR_DECISION_SOURCES: ReadonlySet<string> = new Set([
  MODE_PIN_SOURCE,
  TOOL_LIST_SOURCE,
  DECISION_SOURCES.traceContext,
  DECISION_SOURCES.deadline,
  DECISION_SOURCES.modelId,
]);

/** A `model-error` interruption's payload fields. */
const MODEL_ERROR_FIELDS: readonly string[] = ["detail", "cause"];

/**
 * The payload fields of one entry: its type's {@link PAYLOAD_FIELDS}, none for a decision of a
 * {@link CLEAR_DECISION_SOURCES} source.
 *
 * @example
 * payloadFieldsOf({ type: "decision.recorded", data: { decisionId: "support#turn:3:context", source: "context-policy", choice } }); // ["choice"]
 * payloadFieldsOf({ type: "decision.recorded", data: { decisionId: "support#toolCallLog", source: "agent-tool-call-log", choice } }); // undefined
 * payloadFieldsOf({ type: "run.interrupted", data: { reason: "model-error", detail, cause } }); // ["detail", "cause"]
 */
export function payloadFieldsOf(entry: {
  readonly type: string;
  readonly data: unknown;
}): readonly string[] | undefined {
  const fields = PAYLOAD_FIELDS[entry.type as EntryType];
  if (entry.type === "run.interrupted") {
    // A model error's detail repeats the error's message (as Loom 0.1.0 wrote it): a payload too.
    return (entry.data as { reason?: unknown } | null)?.reason === "model-error" ? MODEL_ERROR_FIELDS : fields;
  }
  if (fields === undefined || entry.type !== "decision.recorded") return fields;
  const source = (entry.data as { source?: unknown } | null)?.source;
  return typeof source === "string" && CLEAR_DECISION_SOURCES.has(source) ? undefined : fields;
}

/** The mark an encoded entry's data carries: the fields it encoded. */
export const ENCODED_MARK = "encoded";

type Data = Record<string, unknown>;

/** The entry with its payload fields encoded (itself when the codec leaves them all as they are). */
export async function encodeEntry<E extends { type: string; data: unknown }>(
  codec: PayloadCodec,
  entry: E,
): Promise<E> {
  const fields = payloadFieldsOf(entry);
  const data = entry.data as Data;
  if (fields === undefined || typeof data !== "object" || data === null) return entry;
  // A claim-checked output is an envelope naming a blob: its bytes go through the blob store's codec.
  if (entry.type === "frame.completed" && data.claimChecked === true) return entry;
  let out: Data | undefined;
  const encoded: string[] = [];
  for (const field of fields) {
    if (data[field] === undefined) continue;
    const envelope = await codec.encode(data[field]);
    if (envelope === undefined) continue;
    out ??= { ...data };
    out[field] = envelope;
    encoded.push(field);
  }
  if (out === undefined) return entry;
  out[ENCODED_MARK] = encoded;
  return { ...entry, data: out };
}

/** The entry with the fields its mark lists decoded; `where` names it in errors. */
export async function decodeEntry<E extends { type: string; data: unknown }>(
  codec: PayloadCodec,
  entry: E,
  where: string,
): Promise<E> {
  const data = entry.data as Data;
  const mark = typeof data === "object" && data !== null ? data[ENCODED_MARK] : undefined;
  if (mark === undefined) return entry;
  if (!Array.isArray(mark)) throw new PayloadCodecError("malformed", `${where}: data.encoded must list fields`);
  const out: Data = {};
  for (const key of Object.keys(data)) {
    if (key === ENCODED_MARK) continue;
    const value = data[key];
    if (!mark.includes(key)) {
      out[key] = value;
      continue;
    }
    if (!isCodecEnvelope(value)) {
      throw new PayloadCodecError("malformed", `${where} (${key}): marked encoded but holds no codec envelope`);
    }
    out[key] = await codec.decode(value, `${where} (${key})`);
  }
  return { ...entry, data: out };
}

/**
 * The store with the codec applied: entries are encoded before they are appended (a key that is
 * missing or invalid throws `PayloadCodecError` naming it, and nothing is written) and decoded
 * as they are read. The wrapped store's optional methods (`holder`, `prune`, `watch`) pass through.
 *
 * @example
 * const store = codecStore(sqliteStore("./loom.db"), payloadCodec({ compress: "brotli" }));
 */
export function codecStore(store: EventStore, codec: PayloadCodec): EventStore {
  const wrapped: EventStore = {
    async append(runId, entries, options) {
      const encoded: NewEntry[] = [];
      for (const e of entries) encoded.push(await encodeEntry(codec, e));
      return store.append(runId, encoded, options);
    },
    async read(runId, options) {
      const entries = await store.read(runId, options);
      const out: JournalEntry[] = [];
      for (const e of entries) out.push(await decodeEntry(codec, e, `run ${runId} seq ${e.seq}`));
      return out;
    },
    listRuns: (options) => store.listRuns(options),
    acquire: (runId, options) => store.acquire(runId, options),
    renew: (lease, leaseMs) => store.renew(lease, leaseMs),
    release: (lease) => store.release(lease),
    requestCancel: (runId, reason) => store.requestCancel(runId, reason),
    compact: (runId, request) => store.compact(runId, request), // the marker holds no payload
    close: () => store.close(),
  };
  if (store.holder) wrapped.holder = store.holder.bind(store);
  if (store.prune) wrapped.prune = store.prune.bind(store);
  if (store.watch) wrapped.watch = store.watch.bind(store);
  return wrapped;
}

/**
 * Blobs (claim-checked outputs) through the codec. The ref is the hash of the stored (encoded)
 * bytes, which the blob store verifies; the frame's own digest stays over the plaintext. Blobs
 * written without the codec read as they are.
 *
 * @example
 * const blobs = codecBlobStore(dirBlobStore("./blobs"), codec);
 */
export function codecBlobStore(blobs: BlobStore, codec: PayloadCodec): BlobStore {
  const store: BlobStore = {
    put: async (bytes) => blobs.put(await codec.encodeBytes(bytes)),
    get: async (ref) => codec.decodeBytes(await blobs.get(ref), `blob ${ref}`),
    has: (ref) => blobs.has(ref),
    close: () => blobs.close(),
  };
  decodingBlobStores.add(store);
  return store;
}

/** Blob stores made by {@link codecBlobStore}: what they `get` is decoded, not the bytes the ref names. */
const decodingBlobStores = new WeakSet<BlobStore>();

/**
 * Whether `blobs` hands back decoded bytes (a {@link codecBlobStore}): the ref and a claim-check
 * envelope's digest name the encoded bytes, which the store under it verified.
 *
 * @internal
 */
export const decodesBlobs = (blobs: BlobStore): boolean => decodingBlobStores.has(blobs);

/**
 * `wrapper`, which gets its bytes from `inner`, marked as decoding when `inner` decodes.
 *
 * @internal
 */
export function decodingLike<B extends BlobStore>(wrapper: B, inner: BlobStore): B {
  if (decodesBlobs(inner)) decodingBlobStores.add(wrapper);
  return wrapper;
}

const frameWhere = (f: ArchivedFrame, ref: string) => `archived frame ${f.frameId} (batch ${ref})`;

/**
 * The archive through the codec: archived entries are encoded like journal entries.
 *
 * @example
 * const archive = codecArchive(memoryArchive(), codec);
 */
export function codecArchive(archive: ArchiveStore, codec: PayloadCodec): ArchiveStore {
  const map = async (f: ArchivedFrame, op: <E extends JournalEntry>(e: E) => Promise<E>): Promise<ArchivedFrame> => ({
    ...f,
    started: await op(f.started),
    completed: await op(f.completed),
    ...(f.attempts === undefined ? {} : { attempts: await Promise.all(f.attempts.map(op)) }),
  });
  return {
    async put(runId, frames) {
      const out: ArchivedFrame[] = [];
      for (const f of frames) out.push(await map(f, (e) => encodeEntry(codec, e)));
      return archive.put(runId, out);
    },
    async get(ref) {
      const out: ArchivedFrame[] = [];
      for (const f of await archive.get(ref)) out.push(await map(f, (e) => decodeEntry(codec, e, frameWhere(f, ref))));
      return out;
    },
    close: () => archive.close(),
  };
}

/**
 * A journal whose store, blobs and archive all go through `codec` (opt-in per journal). Closing
 * it closes the parts it wraps. With SQLite, a compaction then archives first and compacts
 * second (still safe: idempotent), not in one transaction.
 *
 * @example
 * const codec = payloadCodec({ compress: "gzip", encrypt: { keys: staticKeys({ current: "k1", keys: { k1 } }) } });
 * const journal = withCodec(openSqliteJournal("./loom.db"), codec);
 * await loop.run({ runId, journal, input: "hello" });
 */
export function withCodec<J extends Journal>(journal: J, codec: PayloadCodec): J {
  return {
    ...journal,
    store: codecStore(journal.store, codec),
    ...(journal.blobs === undefined ? {} : { blobs: codecBlobStore(journal.blobs, codec) }),
    ...(journal.archive === undefined ? {} : { archive: codecArchive(journal.archive, codec) }),
  };
}

export type { CodecEnvelope };
