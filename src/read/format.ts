/** Text formatting both the CLI's human output and the viewer's pages use. */

/** `1234567` → `1,205.6 kB` (kB = 1024 bytes, as in the benchmarks' tables). */
export const kB = (bytes: number): string =>
  `${(bytes / 1024).toLocaleString("en-US", { minimumFractionDigits: 1, maximumFractionDigits: 1 })} kB`;

export const int = (n: number): string => n.toLocaleString("en-US");

/** One line of at most `width` characters. */
export function clip(text: string, width: number): string {
  const line = text.replace(/\s+/g, " ");
  return line.length <= width ? line : `${line.slice(0, Math.max(0, width - 1))}…`;
}

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
