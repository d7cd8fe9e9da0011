/** Text formatting for the command's human output (`--json` bypasses all of it). */
import { int } from "../read/format.ts";

export { clip, int, kB, printable } from "../read/format.ts";

/** The first 12 hex digits of a digest, enough to tell entries apart at a glance. */
export const shortDigest = (digest: string | null): string => (digest === null ? "null" : `${digest.slice(0, 12)}…`);

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
