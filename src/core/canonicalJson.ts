import { CanonicalJsonError } from "./errors.ts";
import { LoneSurrogate, quotedName, returnSink, takeSink, type Utf8Sink } from "./utf8Sink.ts";

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
  return withCanonicalBytes(value, (bytes) => bytes.toString("utf8"));
}

/**
 * Calls `use` with the UTF-8 bytes of `canonicalJson(value)`, written once and never made a
 * string: what a digest hashes. The bytes are a view into a buffer the next write reuses: copy
 * them to keep them. Throws what {@link canonicalJson} throws (`use` is not called then).
 *
 * @example
 * const digest = withCanonicalBytes({ b: 1, a: 2 }, (bytes) => sha256Hex(bytes)); // of '{"a":2,"b":1}'
 */
export function withCanonicalBytes<T>(value: unknown, use: (bytes: Buffer) => T): T {
  const sink = takeSink();
  try {
    let written: boolean;
    try {
      written = write(sink, value, "", 0, []);
    } catch (e) {
      throw asCanonicalError(e);
    }
    if (!written) {
      const what = typeof value === "function" ? "a function" : typeof value === "symbol" ? "a symbol" : "undefined";
      throw new CanonicalJsonError("no-json-form", "$", `${what} has no JSON form`);
    }
    return use(sink.view());
  } finally {
    returnSink(sink);
  }
}

/**
 * Canonical bytes of values parsed from JSON that the runtime will not change (a tool's recorded
 * output), with how deep their objects nest below them: a value holding one (the messages of the
 * next prompt digest) copies these bytes once more instead of walking it again. Used once, then dropped.
 */
const kept = new WeakMap<object, { readonly bytes: Uint8Array; readonly height: number }>();
/**
 * Bytes kept and not used yet, as far as this module can tell (an entry whose value was collected
 * unused still counts): none, and a write looks no object up in {@link kept}.
 */
let keptUnused = 0;
/** The deepest object depth the current write reached (for {@link kept}'s heights). */
let deepest = 0;

/**
 * The UTF-8 bytes of {@link canonicalJson} of a value parsed from JSON (no `toJSON`, no getters)
 * that nobody will change, as a buffer of its own: they are kept, and the next canonical write
 * of a value that holds it reuses them (the same bytes it would write) instead of writing them again.
 *
 * @example
 * const output = JSON.parse(text);
 * const digest = sha256Hex(canonicalBytesOfParsed(output)); // the next prompt digest reuses its bytes
 */
export function canonicalBytesOfParsed(value: unknown): Buffer {
  deepest = 0;
  const bytes = withCanonicalBytes(value, (view) => Buffer.from(view));
  if (typeof value === "object" && value !== null) {
    if (!kept.has(value)) keptUnused++;
    kept.set(value, { bytes, height: deepest });
  }
  return bytes;
}

/**
 * {@link canonicalBytesOfParsed} as text.
 *
 * @example
 * const output = JSON.parse(text);
 * canonicalJsonOfParsed(output) === canonicalJson(output); // true, and the bytes are kept
 */
export function canonicalJsonOfParsed(value: unknown): string {
  return canonicalBytesOfParsed(value).toString("utf8");
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
  if (c instanceof LoneSurrogate) {
    return new CanonicalJsonError(
      "lone-surrogate",
      path,
      "a string holds a lone UTF-16 surrogate, which has no UTF-8 form",
    );
  }
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

// Member names repeat across the objects of a value (and across values): encoding each once pays.
const quotedKeys = new Map<string, Uint8Array>();
function quoteKey(k: string): Uint8Array {
  let q = quotedKeys.get(k);
  if (q === undefined) {
    q = quotedName(k);
    if (quotedKeys.size >= 4096) quotedKeys.clear();
    quotedKeys.set(k, q);
  }
  return q;
}

const objectProto = Object.prototype;
const arrayProto = Array.prototype;

const NULL = new Uint8Array([0x6e, 0x75, 0x6c, 0x6c]);
const TRUE = new Uint8Array([0x74, 0x72, 0x75, 0x65]);
const FALSE = new Uint8Array([0x66, 0x61, 0x6c, 0x73, 0x65]);

// Writes `value` into the sink; false (nothing written) where JSON.stringify would omit the value
// (undefined, functions, symbols). `key` is the member name or index, passed to toJSON as JSON.stringify does.
function write(sink: Utf8Sink, value: unknown, key: string | number, depth: number, ancestors: object[]): boolean {
  switch (typeof value) {
    case "string":
      sink.string(value);
      return true;
    case "number":
      if (!Number.isFinite(value)) throw new Refusal("non-finite-number", `${value} is not a JSON number`);
      sink.ascii(String(value)); // ECMAScript Number::toString is RFC 8785's form; -0 gives "0"
      return true;
    case "boolean":
      sink.bytes(value ? TRUE : FALSE);
      return true;
    case "bigint":
      throw new Refusal("bigint", "a BigInt has no JSON form; convert it to a string or a number first");
    case "undefined":
    case "function":
    case "symbol":
      return false;
  }
  if (value === null) {
    sink.bytes(NULL);
    return true;
  }
  let obj = value as object;
  const known = keptUnused > 0 ? kept.get(obj) : undefined;
  // Nested deeper than the cap here: written again, to refuse it where the walk does.
  if (known !== undefined && depth + known.height < MAX_CANONICAL_DEPTH) {
    kept.delete(obj);
    keptUnused--;
    sink.bytes(known.bytes);
    return true;
  }
  const toJSON = (obj as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === "function") {
    let replaced: unknown;
    try {
      replaced = toJSON.call(obj, String(key));
    } catch (cause) {
      throw new Refusal("to-json-threw", "toJSON threw", cause);
    }
    if (typeof replaced !== "object" || replaced === null) return write(sink, replaced, key, depth, ancestors);
    obj = replaced;
  }
  // Boxed primitives serialize as their primitive, as in JSON.stringify (a plain object or array is none).
  const proto = Object.getPrototypeOf(obj);
  if (
    proto !== objectProto &&
    proto !== arrayProto &&
    (obj instanceof Number || obj instanceof String || obj instanceof Boolean || obj instanceof BigInt)
  ) {
    return write(sink, obj.valueOf(), key, depth, ancestors);
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
    sink.byte(0x5b);
    for (let i = 0; i < obj.length; i++) {
      if (i > 0) sink.byte(0x2c);
      let written: boolean;
      try {
        written = write(sink, obj[i], i, inner, ancestors);
      } catch (e) {
        throw unwind(e, `[${i}]`);
      }
      if (!written) sink.bytes(NULL);
    }
    sink.byte(0x5d);
    return true;
  }
  const rec = obj as Record<string, unknown>;
  const shape = shapeOf(Object.keys(rec));
  const keys = shape.sorted;
  const quoted = shape.quoted;
  sink.byte(0x7b);
  let first = true;
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i] as string;
    const mark = sink.at;
    if (!first) sink.byte(0x2c);
    let q = quoted[i];
    if (q === undefined) {
      try {
        q = quoted[i] = quoteKey(k);
      } catch (e) {
        // A name with a lone surrogate: refused only if its member is written.
        if (!writeMember(sink, rec, k, inner, ancestors)) {
          sink.at = mark;
          continue;
        }
        throw e;
      }
    }
    sink.bytes(q);
    if (!writeMember(sink, rec, k, inner, ancestors)) {
      sink.at = mark; // an omitted member: its name goes too
      continue;
    }
    first = false;
  }
  sink.byte(0x7d);
  return true;
}

function writeMember(
  sink: Utf8Sink,
  rec: Record<string, unknown>,
  k: string,
  depth: number,
  ancestors: object[],
): boolean {
  try {
    return write(sink, rec[k], k, depth, ancestors);
  } catch (e) {
    throw unwind(e, `.${k}`);
  }
}

/** An object's member names as `Object.keys` gave them, sorted, and their quoted forms as written. */
interface Shape {
  readonly keys: readonly string[];
  readonly sorted: readonly string[];
  readonly quoted: (Uint8Array | undefined)[];
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
