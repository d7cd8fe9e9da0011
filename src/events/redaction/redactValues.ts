/**
 * Value redaction: patterns and literal strings replaced wherever they appear in a payload's
 * strings, whatever the path. A model that repeats a customer's SSN in its answer, or a tool that
 * puts it in free text, is redacted the same as a field named `ssn`.
 */

/** A value to redact: a RegExp (every match, `g` added when missing) or a literal string. */
export type RedactionValue = RegExp | string;

/** Strings a value redaction never rewrites: digests and blob refs the journal needs to verify. */
const DIGEST = /^(?:sha256:)?[0-9a-f]{64}$/;

const literal = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/**
 * The values as global RegExps, checked: an empty literal or a pattern that matches the empty
 * string would put a replacement between every character; `problem` says which.
 */
export function compileValues(values: readonly RedactionValue[]): { patterns: RegExp[]; problem?: string } {
  const patterns: RegExp[] = [];
  for (const [i, v] of values.entries()) {
    if (typeof v === "string") {
      if (v.length === 0) return { patterns, problem: `values[${i}] is an empty string` };
      patterns.push(new RegExp(literal(v), "g"));
    } else if (v instanceof RegExp) {
      const re = new RegExp(v.source, v.flags.includes("g") ? v.flags : `${v.flags}g`);
      if (new RegExp(v.source, v.flags.replace(/[gy]/g, "")).test(""))
        return { patterns, problem: `values[${i}] (${String(v)}) matches the empty string` };
      patterns.push(re);
    } else {
      return { patterns, problem: `values[${i}] is neither a RegExp nor a string` };
    }
  }
  return { patterns };
}

/** `text` with every match replaced, and how many there were. */
function scrub(text: string, patterns: readonly RegExp[], replacement: string): { text: string; count: number } {
  if (DIGEST.test(text)) return { text, count: 0 };
  let count = 0;
  let out = text;
  for (const re of patterns) {
    re.lastIndex = 0;
    out = out.replace(re, () => {
      count++;
      return replacement;
    });
  }
  return { text: out, count };
}

/**
 * `value` (JSON data) with every match replaced in every string, member names included, at any
 * depth; a string that holds JSON text is scanned as text, so what it quotes is reached too.
 * Returns the new value and the number of matches replaced (0: `value` itself is returned).
 */
export function redactValues(
  value: unknown,
  patterns: readonly RegExp[],
  replacement: string,
): { value: unknown; count: number } {
  let count = 0;
  const walk = (v: unknown): unknown => {
    if (typeof v === "string") {
      const done = scrub(v, patterns, replacement);
      count += done.count;
      return done.text;
    }
    if (Array.isArray(v)) return v.map(walk);
    if (typeof v === "object" && v !== null) {
      const out: Record<string, unknown> = {};
      for (const [k, inner] of Object.entries(v)) {
        const key = scrub(k, patterns, replacement);
        count += key.count;
        out[key.text] = walk(inner);
      }
      return out;
    }
    return v;
  };
  if (patterns.length === 0) return { value, count: 0 };
  const out = walk(value);
  return count === 0 ? { value, count: 0 } : { value: out, count };
}
