import { JournalFormatError } from "../core/errors.ts";
import { type CodecEnvelope, PayloadCodecError } from "./codec/codec.ts";
import { isModePinDecision, readModePin } from "./modePin.ts";
import { Bad, checkData, type Data, kind, TYPES } from "./schema.ts";
import {
  type DecisionRecordedData,
  type EntryType,
  type JournalEntry,
  type NewEntry,
  SCHEMA_VERSION,
} from "./types.ts";

/**
 * The journal's validator: every entry a store hands back passes here before anything folds it
 * (`readJournal` calls it), and every entry a store is asked to append passes `checkNewEntries`.
 *
 * Rules, per entry: `runId` is the run asked for; `seq` is an integer above the previous one;
 * `type` is one of the schema's; `meta.v` is an integer from 1 to {@link SCHEMA_VERSION} (a newer
 * version is refused: the run was written by a newer Loom); `meta.at` is a string; `data` has
 * each field of its type, of the right kind. Across entries: a `frame.completed` follows a
 * `frame.started` of the same frame (checked when the read starts at seq 1), and a frame is
 * completed once.
 *
 * Seq gaps: compaction removes entries, so a gap is legal only when it is accounted for. A
 * `frames.archived` marker lists the seqs it removed (`seqs`); every missing seq must be listed
 * by a marker of the stream (markers always come after what they removed). A marker written
 * without `seqs` (by a store that predates the field) excuses every gap before it, since it
 * cannot say which entries it removed. Missing entries after the last one are undetectable.
 *
 * The checks are field tests with no allocation on the happy path, so validating costs a small
 * fraction of parsing the same JSON (bench/journal.ts measures it).
 */

const DAMAGED = "the journal is damaged or was written by other software; restore it from a backup or remove the run";

/**
 * Checks entries read from a store (see the rules above) and narrows them to `JournalEntry[]`.
 * Throws `JournalFormatError` naming the run, the seq and the field at the first bad entry.
 * `from` is the seq the read started at (default 1).
 *
 * @example
 * const entries = await store.read(runId);
 * validateEntries(runId, entries); // entries: JournalEntry[] from here on
 */
export function validateEntries(
  runId: string,
  entries: readonly unknown[],
  options?: { readonly from?: number },
): asserts entries is JournalEntry[] {
  const from = options?.from ?? 1;
  let prev = from - 1;
  let seq: number | undefined;
  let gaps: number[] | undefined; // pairs: first and last missing seq
  let removed: Set<number> | undefined;
  let lenientUpTo = 0; // gaps before this seq are excused by a marker without `seqs`
  // frame id -> 1 started, 2 completed; tracked only when the read starts at seq 1.
  const frames = from <= 1 ? new Map<string, number>() : undefined;
  // Reported after the gaps: a missing entry explains an orphan completion better than the reverse.
  let frameError: JournalFormatError | undefined;
  try {
    for (let i = 0; i < entries.length; i++) {
      seq = undefined;
      const e = entries[i] as Data | null;
      if (typeof e !== "object" || e === null) throw new Bad("entry", `must be an object, found ${kind(e)}`);
      const s = e.seq;
      if (!Number.isInteger(s)) throw new Bad("seq", `must be an integer, found ${kind(s)}`);
      seq = s as number;
      if (seq <= prev) throw new Bad("seq", `must be above the previous seq ${prev}`);
      if (seq !== prev + 1) (gaps ??= []).push(prev + 1, seq - 1);
      prev = seq;
      if (e.runId !== runId) throw new Bad("runId", `belongs to run ${JSON.stringify(e.runId)}`);
      const type = e.type;
      if (typeof type !== "string" || TYPES[type as EntryType] !== true) {
        throw new Bad(
          "type",
          `unknown entry type ${JSON.stringify(type) ?? "(none)"}; if a newer Loom wrote it, upgrade Loom`,
        );
      }
      const meta = e.meta as Data | undefined;
      if (typeof meta !== "object" || meta === null) throw new Bad("meta", `must be an object, found ${kind(meta)}`);
      const v = meta.v;
      if (!Number.isInteger(v) || (v as number) < 1)
        throw new Bad("meta.v", `must be a schema version, found ${kind(v)}`);
      if ((v as number) > SCHEMA_VERSION) {
        throw new Bad(
          "meta.v",
          `schema version ${v} is newer than this Loom reads (${SCHEMA_VERSION}); upgrade Loom to read this run`,
        );
      }
      if (typeof meta.at !== "string") throw new Bad("meta.at", `must be a string, found ${kind(meta.at)}`);
      checkData(type as EntryType, e.data, seq);
      if ((e.data as Data).encoded !== undefined) codecRequired(runId, seq, e.data as Data);
      if (type === "decision.recorded") checkPin(runId, e.data as DecisionRecordedData, seq);
      if (frames !== undefined && frameError === undefined) {
        const problem = trackFrame(frames, type, e.data as Data);
        if (problem !== undefined)
          frameError = new JournalFormatError(runId, seq, "data.frameId", `${problem}; ${DAMAGED}`);
      }
      if (type === "frames.archived") {
        const seqs = (e.data as Data).seqs as number[] | undefined;
        if (seqs === undefined) lenientUpTo = seq;
        else for (const r of seqs) (removed ??= new Set()).add(r);
      }
    }
  } catch (err) {
    if (err instanceof Bad) throw new JournalFormatError(runId, seq, err.field, `${err.message}; ${DAMAGED}`);
    throw err;
  }
  if (gaps !== undefined) checkGaps(runId, gaps, removed, lenientUpTo);
  if (frameError !== undefined) throw frameError;
}

/** An entry still encoded reached the journal's reader: the store was opened without its codec. */
function codecRequired(runId: string, seq: number, d: Data): never {
  const field = (d.encoded as string[])[0] as string;
  const envelope = d[field] as CodecEnvelope;
  const key = envelope.keyId === undefined ? "" : `, key ${envelope.keyId}`;
  throw new PayloadCodecError(
    "codecRequired",
    `run ${runId} seq ${seq}: its ${field} is encoded (${envelope.codec.join(" + ")}${key}); open the journal with its codec: withCodec(journal, payloadCodec({ … }))`,
    envelope.keyId,
  );
}

/** A mode pin must hold a mode (the one reader raises JournalFormatError naming the decision). */
function checkPin(runId: string, d: DecisionRecordedData, seq: number): void {
  if (isModePinDecision(d)) readModePin(runId, d, seq);
}

/** Follows each frame's life (started, completed); returns what is wrong, if anything. */
function trackFrame(frames: Map<string, number>, type: string, d: Data): string | undefined {
  if (type !== "frame.started" && type !== "frame.completed" && type !== "attempt.failed") return undefined;
  const id = d.frameId as string;
  const state = frames.get(id);
  // Compaction may have removed the attempt's start (it moves a completed frame's entries): only
  // an attempt recorded after its frame completed is wrong.
  if (type === "attempt.failed") return state === 2 ? `frame ${id} has a failed attempt after it completed` : undefined;
  if (type === "frame.started") {
    if (state === 2) return `frame ${id} started again after it completed`;
    frames.set(id, 1);
    return undefined;
  }
  if (state !== 1) return `frame ${id} ${state === 2 ? "completed twice" : "completed but never started"}`;
  frames.set(id, 2);
  return undefined;
}

function checkGaps(runId: string, gaps: number[], removed: Set<number> | undefined, lenientUpTo: number): void {
  for (let i = 0; i < gaps.length; i += 2) {
    const first = gaps[i] as number;
    const last = gaps[i + 1] as number;
    for (let s = first; s <= last; s++) {
      if (s < lenientUpTo || removed?.has(s)) continue;
      throw new JournalFormatError(
        runId,
        s,
        "seq",
        `entries ${first}–${last} are missing (the next entry is ${last + 1}) and no frames.archived marker removed seq ${s}; ${DAMAGED}`,
      );
    }
  }
}

/**
 * Checks what a caller asks a store to append: a known type and data of the right shape. Stores
 * call it before their transaction, so a bad entry appends nothing. `expectedVersion` only
 * serves to name the seq the entry would have taken.
 *
 * @example
 * checkNewEntries(runId, entries, expectedVersion); // throws JournalFormatError on a bad entry
 */
export function checkNewEntries(runId: string, entries: readonly NewEntry[], expectedVersion: number): void {
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i] as { type?: unknown; data?: unknown } | undefined;
    const seq = expectedVersion + i + 1;
    try {
      if (typeof e !== "object" || e === null) throw new Bad("entry", `must be an object, found ${kind(e)}`);
      if (typeof e.type !== "string" || TYPES[e.type as EntryType] !== true) {
        throw new Bad("type", `unknown entry type ${JSON.stringify(e.type) ?? "(none)"}`);
      }
      checkData(e.type as EntryType, e.data, seq);
      if (e.type === "decision.recorded") checkPin(runId, e.data as DecisionRecordedData, seq);
    } catch (err) {
      if (err instanceof Bad) {
        throw new JournalFormatError(
          runId,
          seq,
          err.field,
          `cannot append entry ${i} of ${entries.length}: ${err.message}`,
        );
      }
      throw err;
    }
  }
}

/**
 * `JSON.stringify(data)` for a store, with a `JournalFormatError` naming run, seq and entry when
 * the data has no JSON form (a BigInt, a cycle, a throwing toJSON).
 */
export function dataText(runId: string, entry: NewEntry, seq: number): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(entry.data);
  } catch (cause) {
    throw new JournalFormatError(
      runId,
      seq,
      "data",
      `the ${entry.type} entry has no JSON form (${String(cause)}); convert the value (a BigInt to a string, break the cycle) before it is journaled`,
    );
  }
  if (text === undefined) throw new JournalFormatError(runId, seq, "data", `the ${entry.type} entry has no data`);
  return text;
}
