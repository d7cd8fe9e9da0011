import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { errorGuard, LoomError } from "../../core/errors.ts";
import { isCodecEnvelope, type PayloadCodec } from "../codec/codec.ts";
import type { DataKeyStore } from "../dataKeys.ts";
import type { ArchivedFrame, ArchiveStore, Journal } from "../spi.ts";
import type { EventStore } from "../store.ts";
import type { JournalEntry, NewEntry } from "../types.ts";
import { blobOriginalOf, type RedactionRecord, redactedFields } from "./redactionRecords.ts";

/**
 * The originals of redacted payloads, kept sealed so that a redacted run can still be resumed
 * (`withRedaction(journal, r, { keepOriginals: { codec } })`). Each run gets a random data key of
 * its own, stored wrapped by the journal's codec in the journal's data key store
 * (`journal.dataKeys`), never among the entries. Each redacted field's original is sealed under
 * it (AES-256-GCM) beside the redacted entry, in `data.originals`:
 *
 *   `{ …, output: { email: "[redacted]" }, redacted: [ … ], originals: { key: "r-1", fields: { output: "<base64>" } } }`
 *
 * Readers (the CLI, the viewer, rebuilt logs, streams, archives) read the entries as stored:
 * redacted. Only a resume opens the originals, to feed the model what it was fed live. Deleting
 * the run's key (`forgetRedactedOriginals`) makes them unrecoverable, whoever holds the journal,
 * its backups or the codec's keys; the run is then one whose originals were never kept.
 */

/** The mark an entry's data carries when it keeps the originals of its redacted fields. */
export const ORIGINALS_MARK = "originals";

/** The sealed originals of an entry's redacted fields. */
export interface SealedOriginals {
  /** The run whose data key sealed them (the entry's own, or the run a fork copied it from). */
  readonly key: string;
  /** By field: base64 of IV (12 bytes), tag (16 bytes) and the ciphertext of the original's JSON text. */
  readonly fields: Readonly<Record<string, string>>;
}

/** What `withRedaction` is told to keep the originals with. */
export interface KeepOriginalsOptions {
  /** The journal's codec: it must encrypt (its key wraps each run's data key). */
  readonly codec: PayloadCodec;
  /** Where the data keys live; default the journal's own (`journal.dataKeys`: SQLite and PostgreSQL journals have one). */
  readonly keys?: DataKeyStore;
}

/** Why originals cannot be kept. */
export type RedactedOriginalsErrorCode = "originalsNeedEncryption" | "originalsNeedKeyStore";

/**
 * `keepOriginals` was asked of a journal that cannot keep them safely: the codec does not encrypt
 * (`originalsNeedEncryption`), or the journal has no data key store (`originalsNeedKeyStore`).
 */
export class RedactedOriginalsError extends LoomError {
  declare readonly code: RedactedOriginalsErrorCode;
}

/**
 * True when `e` is a {@link RedactedOriginalsError}.
 *
 * @example
 * try {
 *   withRedaction(journal, r, { keepOriginals: { codec: payloadCodec({ compress: "gzip" }) } });
 * } catch (e) {
 *   if (isRedactedOriginalsError(e)) console.error(e.code); // "originalsNeedEncryption"
 * }
 */
export const isRedactedOriginalsError = errorGuard(RedactedOriginalsError);

/** How a journal keeps originals: its codec (to wrap keys) and its data key store. */
export interface Keeper {
  readonly codec: PayloadCodec;
  readonly keys: DataKeyStore;
  /** Unwrapped keys of the runs this process sealed for (a run's appends seal under one key). */
  readonly cache: Map<string, Buffer>;
}

/** Where a journal made by `withRedaction` says how it keeps originals, and that it redacts. */
const KEEPER: unique symbol = Symbol("loom.redactedOriginals");
const REDACTS: unique symbol = Symbol("loom.redacts");

type Marked = { [KEEPER]?: Keeper; [REDACTS]?: true };

/** The keeper of `options` for `journal`; throws when it cannot keep originals safely. */
export function originalsKeeper(journal: Journal, options: KeepOriginalsOptions): Keeper {
  if (options.codec.options.encrypt === undefined) {
    throw new RedactedOriginalsError(
      "originalsNeedEncryption",
      "withRedaction: keepOriginals needs a codec that encrypts (payloadCodec({ encrypt: { keys } })): its key wraps each run's data key",
    );
  }
  const keys = options.keys ?? journal.dataKeys;
  if (keys === undefined) {
    throw new RedactedOriginalsError(
      "originalsNeedKeyStore",
      "withRedaction: keepOriginals needs a data key store: open the journal with openSqliteJournal or openPostgresJournal, or pass createJournal({ dataKeys }) or keepOriginals.keys",
    );
  }
  return { codec: options.codec, keys, cache: new Map() };
}

/** Marks a journal made by `withRedaction`: it redacts, and keeps originals when `keeper` is given. */
export function markRedacting<J extends Journal>(journal: J, keeper: Keeper | undefined): J {
  const marked = journal as J & Marked;
  marked[REDACTS] = true;
  if (keeper !== undefined) marked[KEEPER] = keeper;
  return journal;
}

/** How `journal` keeps originals, when it was made by `withRedaction` with `keepOriginals`. */
export const keeperOf = (journal: Journal): Keeper | undefined => (journal as Marked)[KEEPER];

/** Whether `journal` redacts what is appended (it was made by `withRedaction`). */
export const redactsJournal = (journal: Journal): boolean => (journal as Marked)[REDACTS] === true;

const AES = "aes-256-gcm";

/** The AES-GCM associated data of a sealed original: where it belongs, so it cannot be moved unseen. */
const aad = (key: string, type: string, field: string, stepId: string | undefined) =>
  Buffer.from(JSON.stringify(["loom-original", key, type, field, stepId ?? ""]));

const stepOf = (data: Record<string, unknown>): string | undefined =>
  typeof data.frameId === "string" ? data.frameId : typeof data.stepId === "string" ? data.stepId : undefined;

/** The run's data key, unwrapped; made (and stored wrapped) when `make` and the run has none. */
async function dataKey(keeper: Keeper, runId: string, make: boolean): Promise<Buffer | undefined> {
  let wrapped = await keeper.keys.get(runId);
  if (wrapped === undefined) {
    if (!make) return undefined;
    const envelope = await keeper.codec.encode(randomBytes(32).toString("base64"));
    wrapped = await keeper.keys.put(runId, JSON.stringify(envelope));
  }
  let envelope: unknown;
  try {
    envelope = JSON.parse(wrapped);
  } catch {
    return undefined;
  }
  if (!isCodecEnvelope(envelope)) return undefined;
  const key = Buffer.from(String(await keeper.codec.decode(envelope, `the data key of run ${runId}`)), "base64");
  return key.byteLength === 32 ? key : undefined;
}

/**
 * `redacted` (what redaction made of `original`) with the originals of its redacted fields
 * sealed under the run's data key, in `data.originals`. A claim-checked output's original (the
 * value its redacted blob was made from, in this process) is sealed as its `output`; a restored
 * entry then holds it inline.
 */
export async function sealOriginals(journal: Journal, runId: string, original: NewEntry, redacted: NewEntry) {
  const keeper = (journal as Marked)[KEEPER];
  if (keeper === undefined || redacted === original) return redacted;
  // A claim-checked output's original is the value its redacted blob was made from.
  const originalOf = (r: RedactionRecord) =>
    r.blob === undefined ? (original.data as Record<string, unknown>)[r.field] : blobOriginalOf(r);
  const records = redactedFields(redacted.data).filter((r) => originalOf(r) !== undefined);
  if (records.length === 0) return redacted;
  let key = keeper.cache.get(runId);
  if (key === undefined) {
    key = await dataKey(keeper, runId, true);
    if (key === undefined) return redacted; // a stored key this codec does not open: keep none
    keeper.cache.set(runId, key);
  }
  const source = original.data as Record<string, unknown>;
  const stepId = stepOf(source);
  const fields: Record<string, string> = {};
  for (const record of records) {
    const text = JSON.stringify(originalOf(record));
    if (text === undefined) continue;
    const iv = randomBytes(12);
    const cipher = createCipheriv(AES, key, iv);
    cipher.setAAD(aad(runId, redacted.type, record.field, stepId));
    const sealed = Buffer.concat([cipher.update(text, "utf8"), cipher.final()]);
    fields[record.field] = Buffer.concat([iv, cipher.getAuthTag(), sealed]).toString("base64");
  }
  const sealed: SealedOriginals = { key: runId, fields };
  return { ...redacted, data: { ...(redacted.data as object), [ORIGINALS_MARK]: sealed } } as unknown as NewEntry;
}

/** The sealed originals an entry's data carries, when they cover every field it redacted. */
export function keptOriginalsOf(data: unknown): SealedOriginals | undefined {
  const records = redactedFields(data);
  if (records.length === 0) return undefined;
  const kept = (data as Record<string, unknown>)[ORIGINALS_MARK] as SealedOriginals | undefined;
  if (typeof kept !== "object" || kept === null || typeof kept.key !== "string") return undefined;
  if (typeof kept.fields !== "object" || kept.fields === null) return undefined;
  return records.every((r: RedactionRecord) => typeof kept.fields[r.field] === "string") ? kept : undefined;
}

/** Opens one sealed original; undefined when the key does not open it. */
function unseal(key: Buffer, sealed: string, ad: Buffer): unknown {
  try {
    const bytes = Buffer.from(sealed, "base64");
    const decipher = createDecipheriv(AES, key, bytes.subarray(0, 12));
    decipher.setAAD(ad);
    decipher.setAuthTag(bytes.subarray(12, 28));
    const text = Buffer.concat([decipher.update(bytes.subarray(28)), decipher.final()]).toString("utf8");
    return { value: JSON.parse(text) };
  } catch {
    return undefined;
  }
}

type KeyOf = (run: string) => Promise<Buffer | undefined>;

/** The entry as it was before redaction, when every original it redacted is kept and opens; else as stored. */
async function restored<E extends { type: string; data: unknown }>(entry: E, keyOf: KeyOf): Promise<E> {
  const kept = keptOriginalsOf(entry.data);
  if (kept === undefined) return entry;
  const key = await keyOf(kept.key);
  if (key === undefined) return entry;
  const data = entry.data as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  const stepId = stepOf(data);
  const opened = new Map<string, unknown>();
  let blob = false;
  for (const record of redactedFields(data)) {
    const value = unseal(key, kept.fields[record.field] as string, aad(kept.key, entry.type, record.field, stepId));
    if (value === undefined) return entry;
    opened.set(record.field, (value as { value: unknown }).value);
    if (record.blob !== undefined) blob = true;
  }
  for (const k of Object.keys(data)) {
    if (k === "redacted" || k === ORIGINALS_MARK) continue;
    // A claim-checked output comes back inline: its blob holds the redacted bytes.
    if (blob && k === "claimChecked") continue;
    out[k] = opened.has(k) ? opened.get(k) : data[k];
  }
  return { ...entry, data: out };
}

/** Whether `entry` is a compaction marker that moved redacted outputs to the archive. */
const movedRedacted = (entry: { type: string; data: unknown }): boolean =>
  entry.type === "frames.archived" &&
  Object.values((entry.data as { digests?: Record<string, { original?: unknown }> }).digests ?? {}).some(
    (d) => d.original !== undefined,
  );

/**
 * A `frames.archived` marker as it reads once its frames' originals are restored: each redacted
 * output's digest is the original's (the one its frame recorded).
 */
function restoredMarker<E extends { type: string; data: unknown }>(entry: E): E {
  const data = entry.data as { digests?: Record<string, { original?: unknown }> };
  const digests = data.digests ?? {};
  const out: Record<string, unknown> = {};
  for (const [id, d] of Object.entries(digests)) {
    const { original, ...rest } = d as { original?: { digest: string | null; bytes: number } };
    out[id] = original === undefined ? rest : { ...rest, digest: original.digest, bytes: original.bytes };
  }
  return { ...entry, data: { ...data, digests: out } };
}

/** Unwrapped keys, by run, for one read (absent keys remembered too). */
function keysFor(keeper: Keeper): KeyOf {
  const seen = new Map<string, Promise<Buffer | undefined>>();
  return (run) => {
    let key = seen.get(run);
    if (key === undefined) {
      key = dataKey(keeper, run, false).catch(() => undefined);
      seen.set(run, key);
    }
    return key;
  };
}

/**
 * The journal a resume reads its own history through: its redacted entries (and archived frames)
 * as they were before redaction where their originals are kept and their key is not forgotten;
 * any other entry as stored (still marked redacted: the resume then refuses). The journal itself
 * when it keeps no originals. Appends and every other reader go through the journal as it is.
 */
export function originalsView(journal: Journal): Journal {
  const keeper = (journal as Marked)[KEEPER];
  if (keeper === undefined) return journal;
  const store: EventStore = {
    ...journal.store,
    async read(runId, options) {
      const entries = await journal.store.read(runId, options);
      if (!entries.some((e) => keptOriginalsOf(e.data) !== undefined || movedRedacted(e))) return entries;
      const keyOf = keysFor(keeper);
      const out: JournalEntry[] = [];
      for (const e of entries) out.push(await restored(e, keyOf));
      // Archived outputs are restored (restoringArchive) only when this run's key opens them: their markers too.
      if ((await keyOf(runId)) === undefined) return out;
      return out.map((e) => (movedRedacted(e) ? restoredMarker(e) : e));
    },
  };
  const archive = journal.archive === undefined ? undefined : restoringArchive(journal.archive, keeper);
  return { ...journal, store, ...(archive === undefined ? {} : { archive }) };
}

function restoringArchive(archive: ArchiveStore, keeper: Keeper): ArchiveStore {
  return {
    put: (runId, frames) => archive.put(runId, frames),
    async get(ref) {
      const keyOf = keysFor(keeper);
      const out: ArchivedFrame[] = [];
      for (const f of await archive.get(ref)) out.push({ ...f, completed: await restored(f.completed, keyOf) });
      return out;
    },
    close: () => archive.close(),
  };
}
