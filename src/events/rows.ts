import { JournalFormatError } from "../core/errors.ts";
import type { EntryMeta, EntryType, JournalEntry, NewEntry } from "./types.ts";
import { checkNewEntries, dataText } from "./validate.ts";

/** A stored entry as SQL stores keep it: seq, type, data text, meta text. */
export type EntryRow = readonly [seq: number, type: string, data: string, meta: string];

/**
 * Decodes stored rows into entries, appending to `out`. The entries of one append share one
 * meta text: it is parsed once and shared, frozen. Text that is not JSON raises
 * `JournalFormatError` naming the run, the seq and the column; `where` names the store for the fix.
 */
export function decodeRows(runId: string, rows: readonly EntryRow[], out: JournalEntry[], where: string): void {
  let metaText = "";
  let meta: EntryMeta | undefined;
  let i = 0;
  let field = "data";
  try {
    for (; i < rows.length; i++) {
      const row = rows[i] as EntryRow;
      field = "data";
      const data = JSON.parse(row[2]);
      if (row[3] !== metaText) {
        field = "meta";
        meta = Object.freeze(JSON.parse(row[3]));
        metaText = row[3];
      }
      out.push({ runId, seq: row[0], type: row[1], data, meta } as JournalEntry);
    }
  } catch (cause) {
    throw new JournalFormatError(
      runId,
      rows[i]?.[0],
      field,
      `the stored text is not JSON (${String(cause)}); the row in ${where} is damaged: restore it from a backup or remove the run`,
    );
  }
}

/**
 * Checks entries about to be appended after `expectedVersion` and serializes their data, before
 * any transaction starts: a bad entry or a value with no JSON form fails with nothing written.
 */
export function encodeEntries(
  runId: string,
  entries: readonly NewEntry[],
  expectedVersion: number,
): { types: EntryType[]; texts: string[] } {
  checkNewEntries(runId, entries, expectedVersion);
  const types: EntryType[] = new Array(entries.length);
  const texts: string[] = new Array(entries.length);
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i] as NewEntry;
    types[i] = e.type;
    texts[i] = dataText(runId, e, expectedVersion + i + 1);
  }
  return { types, texts };
}
