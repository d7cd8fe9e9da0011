/**
 * Run id prefixes (`EventStore.listRuns({ prefix })`), for the stores that look them up in an
 * index of run ids as a range: `prefix <= runId < prefixEnd(prefix)`.
 */

/** The surrogates: no code point of well-formed text, so never the next one. */
const SURROGATES_FIRST = 0xd800;
const SURROGATES_END = 0xe000;
const MAX_CODE_POINT = 0x10ffff;

/**
 * The least string above every string that starts with `prefix`, in code point order (the order
 * of UTF-8 bytes: SQLite's BINARY and PostgreSQL's "C" collations); undefined when there is none
 * (an empty prefix, or one of U+10FFFF only): then the range has no upper end.
 *
 * @example
 * prefixEnd("trip/"); // "trip0": every sub-agent run of "trip" sorts between "trip/" and it
 */
export function prefixEnd(prefix: string): string | undefined {
  const points = Array.from(prefix, (c) => c.codePointAt(0) as number);
  while (points.length > 0 && points[points.length - 1] === MAX_CODE_POINT) points.pop();
  const last = points.pop();
  if (last === undefined) return undefined;
  points.push(last + 1 === SURROGATES_FIRST ? SURROGATES_END : last + 1);
  return String.fromCodePoint(...points);
}
