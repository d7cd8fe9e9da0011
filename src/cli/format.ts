/** Text formatting for the command's human output (`--json` bypasses all of it). */

/** `1234567` → `1,205.6 kB` (kB = 1024 bytes, as the record's figures). */
export const kB = (bytes: number): string =>
  `${(bytes / 1024).toLocaleString("en-US", { minimumFractionDigits: 1, maximumFractionDigits: 1 })} kB`;

export const int = (n: number): string => n.toLocaleString("en-US");

/** The first 12 hex digits of a digest, enough to tell entries apart at a glance. */
export const shortDigest = (digest: string | null): string => (digest === null ? "null" : `${digest.slice(0, 12)}…`);

/** One line of at most `width` characters. */
export function clip(text: string, width: number): string {
  const line = text.replace(/\s+/g, " ");
  return line.length <= width ? line : `${line.slice(0, Math.max(0, width - 1))}…`;
}

/** Compact JSON on one line (`undefined` for a value with no JSON form). */
export function oneLine(value: unknown): string {
  try {
    return JSON.stringify(value) ?? "undefined";
  } catch {
    return String(value);
  }
}

/**
 * Aligns rows under a header. Columns named in `right` are right-aligned (numbers); the last
 * column is never padded, so long text does not leave trailing blanks.
 */
export function table(header: readonly string[], rows: readonly (readonly string[])[], right: readonly number[] = []) {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, i) => {
        if (i === cells.length - 1) return right.includes(i) ? cell.padStart(widths[i] ?? 0) : cell;
        return right.includes(i) ? cell.padStart(widths[i] ?? 0) : cell.padEnd(widths[i] ?? 0);
      })
      .join("  ");
  return [line(header), ...rows.map(line)].join("\n");
}

/** `1 tool call`, `2 tool calls`: the count (grouped) and the noun, plural when it is not 1. */
export const count = (n: number, noun: string, plural = `${noun}s`): string => `${int(n)} ${n === 1 ? noun : plural}`;

/** What `printable` escapes: control characters (Cc: C0, DEL, C1) and bidirectional controls. */
const UNPRINTABLE = /[\p{Cc}\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/gu;

/**
 * An id from a journal (run id, step id, loop or tool name) made safe to print in text mode:
 * control characters and the bidirectional controls that could rewrite or disguise the terminal
 * line are shown as escapes (`\n`, `\x1b`, `\u202e`); everything else as it is.
 */
export function printable(id: string): string {
  return id.replace(UNPRINTABLE, (c) => {
    if (c === "\n") return "\\n";
    if (c === "\r") return "\\r";
    if (c === "\t") return "\\t";
    const code = c.charCodeAt(0);
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
  });
}
