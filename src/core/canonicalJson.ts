import { CanonicalJsonError } from "./errors.ts";

/**
 * How deeply arrays and objects may nest in a value given to {@link canonicalJson}. Deeper
 * input raises `CanonicalJsonError` (code `too-deep`) instead of overflowing the call stack.
 * 512 levels is far beyond any tool output we have seen and well inside Node's default stack.
 */
export const MAX_CANONICAL_DEPTH = 512;

/**
 * Writes `value` as RFC 8785 (JSON Canonicalization Scheme) text: object members sorted by the
 * UTF-16 code units of their names, numbers in ECMAScript form (`-0` is `0`), strings escaped as
 * `JSON.stringify` escapes them, no whitespace. Like `JSON.stringify`, it honours `toJSON`, drops
 * members whose value is `undefined`, a function or a symbol, and writes those as `null` inside
 * arrays.
 *
 * Throws `CanonicalJsonError` for NaN and ±Infinity, a BigInt, a cycle, a lone surrogate (in a
 * string or a member name), nesting deeper than {@link MAX_CANONICAL_DEPTH}, a `toJSON` or a
 * getter that throws, and a top-level value with no JSON form (`undefined`, a function, a symbol).
 * The error's `path` (`$.hits[3].title`) says where.
 *
 * @example
 * canonicalJson({ b: [1, -0, 1e21], a: "é" }); // '{"a":"é","b":[1,0,1e+21]}'
 */
export function canonicalJson(value: unknown): string {
  let out: string | undefined;
  try {
    out = write(value, "", 0, []);
  } catch (e) {
    throw asCanonicalError(e);
  }
  if (out === undefined) {
    const what = typeof value === "function" ? "a function" : typeof value === "symbol" ? "a symbol" : "undefined";
    throw new CanonicalJsonError("no-json-form", "$", `${what} has no JSON form`);
  }
  return out;
}

/**
 * Texts of values parsed from JSON that the runtime will not change (a tool's recorded output),
 * with how deep their objects nest below them: a value holding one (the messages of the next
 * prompt digest) writes its text once more instead of walking it again. Used once, then dropped.
 */
const kept = new WeakMap<object, { readonly text: string; readonly height: number }>();
/** The deepest object depth the current write reached (for {@link kept}'s heights). */
let deepest = 0;

/**
 * {@link canonicalJson} of a value parsed from JSON (no `toJSON`, no getters) that nobody will
 * change: its text is kept, and the next `canonicalJson` of a value that holds it reuses the text
 * (the same text it would write) instead of writing it again.
 *
 * @example
 * const output = JSON.parse(text);
 * const digest = sha256Hex(canonicalJsonOfParsed(output)); // the next prompt digest reuses its text
 */
export function canonicalJsonOfParsed(value: unknown): string {
  deepest = 0;
  const text = canonicalJson(value);
  if (typeof value === "object" && value !== null) kept.set(value, { text, height: deepest });
  return text;
}

// Paths are built only when an error unwinds through the levels: the happy path stays cheap.
class Unwinding {
  constructor(
    readonly cause: unknown,
    readonly segments: string[],
  ) {}
}

function asCanonicalError(e: unknown): CanonicalJsonError {
  const u = e instanceof Unwinding ? e : new Unwinding(e, []);
  const path = `$${u.segments.reverse().join("")}`;
  const c = u.cause;
  if (c instanceof Refusal) return new CanonicalJsonError(c.code, path, c.message, { cause: c.cause });
  // A getter or a proxy trap threw while the value was read.
  return new CanonicalJsonError("read-threw", path, `reading the value threw (${String(c)})`, { cause: c });
}

class Refusal {
  constructor(
    readonly code: CanonicalJsonError["code"],
    readonly message: string,
    readonly cause?: unknown,
  ) {}
}

function unwind(e: unknown, segment: string): Unwinding {
  const u = e instanceof Unwinding ? e : new Unwinding(e, []);
  u.segments.push(segment);
  return u;
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point: they must be escaped.
const NEEDS_ESCAPE = /["\\\u0000-\u001f]/;

function quote(s: string): string {
  if (!s.isWellFormed()) {
    throw new Refusal("lone-surrogate", "a string holds a lone UTF-16 surrogate, which has no UTF-8 form");
  }
  return NEEDS_ESCAPE.test(s) ? JSON.stringify(s) : `"${s}"`;
}

// RFC 8785 orders member names by UTF-16 code units, which is what `<` on strings compares.
// Most objects have a handful of keys: an insertion sort beats Array#sort's generic path there.
function sortKeys(keys: string[]): string[] {
  if (keys.length > 24) return keys.sort();
  for (let i = 1; i < keys.length; i++) {
    const k = keys[i] as string;
    let j = i - 1;
    while (j >= 0 && (keys[j] as string) > k) {
      keys[j + 1] = keys[j] as string;
      j--;
    }
    keys[j + 1] = k;
  }
  return keys;
}

// Member names repeat across the objects of a value (and across values): quoting each once pays.
const quotedKeys = new Map<string, string>();
function quoteKey(k: string): string {
  let q = quotedKeys.get(k);
  if (q === undefined) {
    q = `${quote(k)}:`;
    if (quotedKeys.size >= 4096) quotedKeys.clear();
    quotedKeys.set(k, q);
  }
  return q;
}

// Returns undefined where JSON.stringify would omit the value (undefined, functions, symbols).
// `key` is the member name or index, passed to toJSON as JSON.stringify does.
function write(value: unknown, key: string | number, depth: number, ancestors: object[]): string | undefined {
  switch (typeof value) {
    case "string":
      return quote(value);
    case "number":
      if (Number.isFinite(value)) return String(value); // ECMAScript Number::toString is RFC 8785's form; -0 gives "0"
      throw new Refusal("non-finite-number", `${value} is not a JSON number`);
    case "boolean":
      return value ? "true" : "false";
    case "bigint":
      throw new Refusal("bigint", "a BigInt has no JSON form; convert it to a string or a number first");
    case "undefined":
    case "function":
    case "symbol":
      return undefined;
  }
  if (value === null) return "null";
  let obj = value as object;
  const known = kept.get(obj);
  // Nested deeper than the cap here: written again, to refuse it where the walk does.
  if (known !== undefined && depth + known.height < MAX_CANONICAL_DEPTH) {
    kept.delete(obj);
    return known.text;
  }
  const toJSON = (obj as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === "function") {
    let replaced: unknown;
    try {
      replaced = toJSON.call(obj, String(key));
    } catch (cause) {
      throw new Refusal("to-json-threw", "toJSON threw", cause);
    }
    if (typeof replaced !== "object" || replaced === null) return write(replaced, key, depth, ancestors);
    obj = replaced;
  }
  // Boxed primitives serialize as their primitive, as in JSON.stringify.
  if (obj instanceof Number || obj instanceof String || obj instanceof Boolean || obj instanceof BigInt) {
    return write(obj.valueOf(), key, depth, ancestors);
  }
  if (depth >= MAX_CANONICAL_DEPTH) {
    throw new Refusal("too-deep", `nesting deeper than MAX_CANONICAL_DEPTH (${MAX_CANONICAL_DEPTH})`);
  }
  for (let i = 0; i < depth; i++) {
    if (ancestors[i] === obj) throw new Refusal("cycle", "the value contains a cycle");
  }
  ancestors[depth] = obj;
  if (depth > deepest) deepest = depth;
  const inner = depth + 1;
  if (Array.isArray(obj)) {
    let out = "[";
    for (let i = 0; i < obj.length; i++) {
      let item: string | undefined;
      try {
        item = write(obj[i], i, inner, ancestors);
      } catch (e) {
        throw unwind(e, `[${i}]`);
      }
      out += i === 0 ? (item ?? "null") : `,${item ?? "null"}`;
    }
    return `${out}]`;
  }
  const rec = obj as Record<string, unknown>;
  const shape = shapeOf(Object.keys(rec));
  const keys = shape.sorted;
  const quoted = shape.quoted;
  let out = "{";
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i] as string;
    let member: string | undefined;
    try {
      member = write(rec[k], k, inner, ancestors);
    } catch (e) {
      throw unwind(e, `.${k}`);
    }
    if (member === undefined) continue;
    let q = quoted[i];
    if (q === undefined) q = quoted[i] = quoteKey(k);
    out += out.length === 1 ? `${q}${member}` : `,${q}${member}`;
  }
  return `${out}}`;
}

/** An object's member names as `Object.keys` gave them, sorted, and their quoted forms as written. */
interface Shape {
  readonly keys: readonly string[];
  readonly sorted: readonly string[];
  readonly quoted: (string | undefined)[];
}

let lastShape: Shape = { keys: [], sorted: [], quoted: [] };

// The objects of a value often share their names (the hits of a search): the last object's
// sorted names are reused when the next has the same ones in the same order.
function shapeOf(keys: string[]): Shape {
  const last = lastShape;
  if (keys.length === last.keys.length) {
    let i = 0;
    while (i < keys.length && keys[i] === last.keys[i]) i++;
    if (i === keys.length) return last;
  }
  const shape: Shape = { keys, sorted: sortKeys([...keys]), quoted: [] };
  lastShape = shape;
  return shape;
}
