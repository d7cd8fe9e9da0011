import { isJournalFormatError, JournalFormatError } from "../../core/errors.ts";
import type { EntryMeta, EntryType, JournalEntry } from "../types.ts";

/**
 * How the SQLite store lays an entry out in a row (schema version 2, the same at 3), and back.
 *
 * The data of an entry is the text `JSON.stringify` wrote, and the store hands that text back
 * exactly. What a row spends around it is kept small, because a run's journal is written once a
 * step and kept: the run is an integer key (`loom_runs`), the type an integer code, `meta` two
 * integers (`v`, and `at` in ms since the epoch), and the frame entries, four of every turn, keep
 * their fixed parts in typed columns instead of as JSON text:
 *
 * - `frame.started` text `{"frameId":"F","effect":"E","inputDigest":"<64 hex>"}` → `frame` = F,
 *   `effect` = E (both as they appear between the quotes, escapes included) and `digest` = the
 *   32 bytes; `data` is NULL.
 * - `frame.completed` text `{"frameId":"F","digest":"<64 hex>","bytes":REST}` (a tool frame)
 *   → `frame` = F, `digest` = the 32 bytes, `data` = REST (the byte count, the output's JSON text
 *   and whatever followed it, up to the final `}`; a claim-checked frame's `"claimChecked":true`
 *   mark, between the byte count and the output, stays in REST too).
 * - `frame.completed` text `{"frameId":"F","output":REST}` (a model frame) → `frame` = F,
 *   `data` = REST (the output's JSON text and whatever followed it, up to the final `}`).
 * - Anything else, and any frame text of another form, is kept whole in `data`.
 *
 * Decoding rebuilds the text from the same fixed pieces, so it is the written text byte for byte
 * (a row is split only when the pieces match exactly). The `loom_journal` view rebuilds the same
 * text in SQL, for reading a file with the sqlite3 shell.
 */

/**
 * The stored code of each entry type. Codes are written into files: never change or reuse one;
 * a new type takes the next free code. The two frame types, four rows a turn, take 0 and 1,
 * which SQLite stores in no bytes at all.
 */
export const TYPE_CODES: Readonly<Record<EntryType, number>> = {
  "frame.started": 0,
  "frame.completed": 1,
  "run.started": 2,
  "decision.recorded": 3,
  "call.settled": 4,
  "frames.archived": 5,
  "run.completed": 6,
  "run.interrupted": 7,
  "run.failed": 8,
  "attempt.failed": 9,
  "run.cancelled": 10,
};

/** The entry type of each stored code (undefined for a code this Loom does not know). */
export const TYPE_OF: readonly (EntryType | undefined)[] = (() => {
  const out: (EntryType | undefined)[] = [];
  for (const [type, code] of Object.entries(TYPE_CODES)) out[code] = type as EntryType;
  return out;
})();

/** Inserts one row: run key, seq, then the columns of {@link EntryColumns} in order. */
export const INSERT_ENTRY =
  "INSERT INTO loom_entries (run, seq, type, at, v, frame, effect, digest, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)";

/** The row of one entry, in the column order of `loom_entries` after `run, seq`. */
export interface EntryColumns {
  readonly type: number;
  readonly at: number;
  readonly v: number;
  readonly frame: string | null;
  readonly effect: string | null;
  readonly digest: Buffer | null;
  readonly data: string | null;
}

/** A row as read back: seq, type, at, v, frame, effect, digest, data. */
export type StoredRow = readonly [
  seq: number,
  type: number,
  at: number,
  v: number,
  frame: string | null,
  effect: string | null,
  digest: Uint8Array | null,
  data: string | null,
];

// A JSON string literal's body: any run of characters other than `"` and `\`, or an escape.
// The two alternatives never match the same text, so the pattern cannot backtrack badly.
const BODY = String.raw`((?:[^"\\]|\\.)*)`;
const STARTED = new RegExp(String.raw`^\{"frameId":"${BODY}","effect":"${BODY}","inputDigest":"([0-9a-f]{64})"\}$`);
const COMPLETED = new RegExp(String.raw`^\{"frameId":"${BODY}","output":`);
const DIGESTED = new RegExp(String.raw`^\{"frameId":"${BODY}","digest":"([0-9a-f]{64})","bytes":`);

const STARTED_1 = '{"frameId":"';
const STARTED_2 = '","effect":"';
const STARTED_3 = '","inputDigest":"';
const STARTED_4 = '"}';
const COMPLETED_2 = '","output":';
const DIGESTED_2 = '","digest":"';
const DIGESTED_3 = '","bytes":';

/** Lays out the data text of an entry of `type` appended at `at` (ms) with schema version `v`. */
export function encodeRow(type: EntryType, text: string, at: number, v: number): EntryColumns {
  const code = TYPE_CODES[type];
  if (type === "frame.started") {
    const m = STARTED.exec(text);
    if (m) {
      return { type: code, at, v, frame: m[1]!, effect: m[2]!, digest: Buffer.from(m[3]!, "hex"), data: null };
    }
  } else if (type === "frame.completed" && text.endsWith("}")) {
    const d = DIGESTED.exec(text);
    if (d) {
      const rest = text.slice(d[0].length, -1);
      return { type: code, at, v, frame: d[1]!, effect: null, digest: Buffer.from(d[2]!, "hex"), data: rest };
    }
    const m = COMPLETED.exec(text);
    if (m) return { type: code, at, v, frame: m[1]!, effect: null, digest: null, data: text.slice(m[0].length, -1) };
  }
  return { type: code, at, v, frame: null, effect: null, digest: null, data: text };
}

/**
 * Decodes stored rows into entries, appending to `out`. Rows that share one `at` and `v` (the
 * entries of one append) share one frozen meta object. A row that cannot be decoded (an unknown
 * type code, a missing column, text that is not JSON) raises `JournalFormatError` naming the run,
 * the seq and the column; `where` names the file for the fix.
 */
export function decodeStoredRows(runId: string, rows: readonly StoredRow[], out: JournalEntry[], where: string): void {
  let metaAt = Number.NaN;
  let metaV = Number.NaN;
  let meta: EntryMeta | undefined;
  for (const row of rows) {
    const [seq, code, at, v] = row;
    const type = TYPE_OF[code];
    if (type === undefined) {
      throw new JournalFormatError(
        runId,
        seq,
        "type",
        `unknown entry type code ${String(code)} in ${where}: the row is damaged or was written by a newer Loom; upgrade Loom, or restore the row from a backup`,
      );
    }
    if (at !== metaAt || v !== metaV || meta === undefined) {
      meta = Object.freeze({ v, at: isoOf(runId, seq, at, where) });
      metaAt = at;
      metaV = v;
    }
    let data = frameData(row);
    if (data === undefined) {
      try {
        data = JSON.parse(rowText(runId, row, where));
      } catch (cause) {
        if (isJournalFormatError(cause)) throw cause;
        throw new JournalFormatError(
          runId,
          seq,
          "data",
          `the stored text is not JSON (${String(cause)}); the row in ${where} is damaged: restore it from a backup or remove the run`,
        );
      }
    }
    out.push({ runId, seq, type, data, meta } as JournalEntry);
  }
}

/**
 * The data of a frame row built from its columns without rebuilding its text: only the output's
 * own JSON is parsed (no copy of a long text into a longer one). The object's keys are created in
 * the order of the text, so it equals `JSON.parse(rowText(row))`. Undefined for any row this fast
 * path does not cover (other types, text after the output, a damaged row): the caller then parses
 * the rebuilt text, which also reports the damage.
 */
function frameData(row: StoredRow): unknown {
  const [, , , , frame, effect, digest, data] = row;
  if (frame === null || (digest !== null && digest.length !== 32)) return undefined;
  const frameId = jsonStringBody(frame);
  if (frameId === undefined) return undefined;
  if (effect !== null) {
    const effectText = jsonStringBody(effect);
    if (digest === null || data !== null || effectText === undefined) return undefined;
    return { frameId, effect: effectText, inputDigest: hexOf(digest) };
  }
  if (data === null) return undefined;
  try {
    // JSON.parse throws on anything after the output's value: such rows take the slow path.
    if (digest === null) return { frameId, output: JSON.parse(data) };
    const comma = data.indexOf(",");
    const bytesText = data.slice(0, comma);
    const bytes = Number(bytesText);
    if (comma < 0 || String(bytes) !== bytesText) return undefined;
    if (data.startsWith(OUTPUT_KEY, comma)) {
      return { frameId, digest: hexOf(digest), bytes, output: JSON.parse(data.slice(comma + OUTPUT_KEY.length)) };
    }
    // A claim-checked output: the runtime's mark sits between the byte count and the output.
    if (!data.startsWith(CLAIM_CHECKED_OUTPUT_KEY, comma)) return undefined;
    const output = JSON.parse(data.slice(comma + CLAIM_CHECKED_OUTPUT_KEY.length));
    return { frameId, digest: hexOf(digest), bytes, claimChecked: true, output };
  } catch {
    return undefined; // text after the output, or damage: the caller parses the whole text
  }
}

const OUTPUT_KEY = ',"output":';
const CLAIM_CHECKED_OUTPUT_KEY = ',"claimChecked":true,"output":';
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it looks for
const ESCAPED_OR_CONTROL = /[\\\u0000-\u001f]/;

/** The value of a JSON string literal's body (escapes decoded), or undefined if it is not one. */
function jsonStringBody(body: string): string | undefined {
  if (!ESCAPED_OR_CONTROL.test(body)) return body;
  try {
    return JSON.parse(`"${body}"`) as string;
  } catch {
    return undefined;
  }
}

const hexOf = (bytes: Uint8Array): string =>
  (Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length)).toString("hex");

/** The data text of a stored row, rebuilt from its columns (see the module comment). */
export function rowText(runId: string, row: StoredRow, where: string): string {
  const [seq, , , , frame, effect, digest, data] = row;
  const damaged = (column: string, what: string) =>
    new JournalFormatError(
      runId,
      seq,
      column,
      `${what}; the row in ${where} is damaged: restore it from a backup or remove the run`,
    );
  if (frame === null) {
    if (data === null) throw damaged("data", "the row has no data");
    return data;
  }
  if (digest !== null && digest.length !== 32) throw damaged("digest", `the digest has ${digest.length} bytes, not 32`);
  if (effect !== null) {
    // frame.started: frame, effect and input digest; nothing else.
    if (digest === null) throw damaged("digest", "a frame.started row has no input digest");
    if (data !== null) throw damaged("data", "a frame.started row keeps no data beside its columns");
    return STARTED_1 + frame + STARTED_2 + effect + STARTED_3 + Buffer.from(digest).toString("hex") + STARTED_4;
  }
  if (data === null) throw damaged("data", "a frame.completed row has no output");
  if (digest !== null)
    return `${STARTED_1}${frame}${DIGESTED_2}${Buffer.from(digest).toString("hex")}${DIGESTED_3}${data}}`;
  return `${STARTED_1}${frame}${COMPLETED_2}${data}}`;
}

function isoOf(runId: string, seq: number, at: number, where: string): string {
  const date = new Date(at);
  if (!Number.isInteger(at) || Number.isNaN(date.getTime())) {
    throw new JournalFormatError(
      runId,
      seq,
      "meta.at",
      `the stored time ${String(at)} is not a time in ms; the row in ${where} is damaged: restore it from a backup or remove the run`,
    );
  }
  return date.toISOString();
}

/**
 * The same rebuild in SQL, for the `loom_journal` view (an `e` alias on loom_entries): the
 * entry's data text, and its meta as the JSON `{"v":…,"at":"…"}`.
 */
export const SQL_DATA_TEXT = sqlDataText("lower(hex(e.digest))");

/** The rebuild in another SQL dialect, given its expression for `e.digest` as lowercase hex. */
export function sqlDataText(digestHex: string): string {
  return `CASE
    WHEN e.frame IS NULL THEN e.data
    WHEN e.effect IS NOT NULL THEN '${STARTED_1}' || e.frame || '${STARTED_2}' || e.effect || '${STARTED_3}' || ${digestHex} || '${STARTED_4}'
    WHEN e.digest IS NOT NULL THEN '${STARTED_1}' || e.frame || '${DIGESTED_2}' || ${digestHex} || '${DIGESTED_3}' || e.data || '}'
    ELSE '${STARTED_1}' || e.frame || '${COMPLETED_2}' || e.data || '}'
  END`;
}
export const SQL_META_TEXT = `'{"v":' || e.v || ',"at":"' || strftime('%Y-%m-%dT%H:%M:%S', e.at / 1000, 'unixepoch') || '.' || printf('%03d', e.at % 1000) || 'Z"}'`;

/**
 * A version 1 row (run id, seq, type and meta as text) in the v2 layouts' columns (SQLite's and
 * PostgreSQL's): the type must be a known one, the meta exactly `{ v, at }` as Loom wrote it, or
 * `JournalFormatError` names the row, so a migration never keeps a row it could not hand back
 * byte for byte.
 */
export function v1RowColumns(
  runId: string,
  seq: number,
  type: string,
  data: string,
  metaText: string,
  where: string,
  fix: string,
): EntryColumns {
  if (!Object.hasOwn(TYPE_CODES, type)) {
    throw new JournalFormatError(runId, seq, "type", `unknown entry type ${JSON.stringify(type)} in ${where}; ${fix}`);
  }
  let meta: { v?: unknown; at?: unknown } | undefined;
  try {
    meta = JSON.parse(metaText);
  } catch {
    meta = undefined;
  }
  const at = typeof meta?.at === "string" ? Date.parse(meta.at) : Number.NaN;
  if (!Number.isInteger(meta?.v) || !Number.isFinite(at) || new Date(at).toISOString() !== meta?.at) {
    throw new JournalFormatError(
      runId,
      seq,
      "meta",
      `the stored meta ${metaText} is not {v, at} as Loom writes it, in ${where}; ${fix}`,
    );
  }
  return encodeRow(type as EntryType, data, at, meta?.v as number);
}
