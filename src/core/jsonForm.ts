/**
 * A value's JSON form (what `JSON.parse(JSON.stringify(value))` gives back) built without the
 * text: the runtime takes it of every tool output and model response, and the memory store of
 * every entry, so the round trip through a string was among the loop's largest costs.
 *
 * The walk copies plain data only: strings, booleans, null, numbers (`-0` becomes `0`, NaN and
 * ±Infinity `null`), arrays with Array.prototype and objects with Object.prototype or none,
 * dropping members whose value is undefined, a function or a symbol and writing those as null in
 * arrays, as `JSON.stringify` does. Anything else (a `toJSON`, a Date, a Map, a class instance,
 * a BigInt, a cycle, a `__proto__` member, nesting deeper than {@link MAX_PLAIN_DEPTH}) makes it
 * give up, and the caller takes the round trip through text, which says what JSON makes of it.
 */

/** What {@link plainJsonCopy} gives when the value is not plain data (see the file's comment). */
export const NOT_PLAIN: unique symbol = Symbol("not plain JSON data");

/** How deep the walk goes before it leaves the value to `JSON.stringify`. */
export const MAX_PLAIN_DEPTH = 256;

const objectProto = Object.prototype;
const arrayProto = Array.prototype;

/**
 * The JSON form of plain data, a fresh copy (frozen throughout when `freeze`), or
 * {@link NOT_PLAIN} when the value holds anything else. Undefined, a function or a symbol at the
 * top gives undefined, as `JSON.stringify` does.
 *
 * @example
 * plainJsonCopy({ a: [1, undefined, -0], b: undefined }); // { a: [1, null, 0] }
 * plainJsonCopy({ at: new Date(0) }) === NOT_PLAIN; // true: JSON.stringify calls its toJSON
 */
export function plainJsonCopy(value: unknown, freeze = false): unknown {
  return copy(value, 0, [], freeze);
}

/**
 * `JSON.parse(JSON.stringify(value))`, without the text when the value is plain data. Throws what
 * `JSON.stringify` throws (a BigInt, a cycle, a `toJSON` that throws) and gives undefined where
 * it gives undefined.
 *
 * @example
 * jsonRoundTrip({ at: new Date(0), n: Number.NaN }); // { at: "1970-01-01T00:00:00.000Z", n: null }
 */
export function jsonRoundTrip(value: unknown): unknown {
  let plain: unknown;
  try {
    plain = copy(value, 0, [], false);
  } catch {
    plain = NOT_PLAIN; // a getter or a proxy trap threw: JSON.stringify throws it as it does
  }
  if (plain !== NOT_PLAIN) return plain;
  const text = JSON.stringify(value);
  return text === undefined ? undefined : JSON.parse(text);
}

/**
 * Makes plain objects (prototype Object.prototype, as `{}` and `JSON.parse` make them) with room for
 * n members in the object itself. A `{}` has room for four: a fifth member put in it goes to a
 * second allocation, and a copy (kept as long as its run: a tool output's) cost about a third more
 * memory and collector time. V8 sizes the objects a constructor makes by the members its first
 * ones got, so there is one constructor per count of members.
 */
type Sized = new () => object;
const SIZED: Sized[] = Array.from({ length: 17 }, () => {
  const sized = function (this: object) {} as unknown as Sized;
  sized.prototype = objectProto;
  return sized;
});

function copy(value: unknown, depth: number, ancestors: object[], freeze: boolean): unknown {
  switch (typeof value) {
    case "string":
    case "boolean":
      return value;
    case "number":
      // -0 is written "0"; NaN and ±Infinity are written null.
      return value === 0 ? 0 : Number.isFinite(value) ? value : null;
    case "undefined":
    case "function":
    case "symbol":
      return undefined;
    case "bigint":
      return NOT_PLAIN;
  }
  if (value === null) return null;
  const obj = value as object;
  const proto = Object.getPrototypeOf(obj);
  if (depth >= MAX_PLAIN_DEPTH) return NOT_PLAIN;
  for (let i = 0; i < depth; i++) if (ancestors[i] === obj) return NOT_PLAIN;
  ancestors[depth] = obj;
  const inner = depth + 1;
  if (proto === arrayProto && Array.isArray(obj)) {
    if (typeof (obj as { toJSON?: unknown }).toJSON === "function") return NOT_PLAIN;
    const n = obj.length;
    const out: unknown[] = new Array(n);
    for (let i = 0; i < n; i++) {
      const item = copy(obj[i], inner, ancestors, freeze);
      if (item === NOT_PLAIN) return NOT_PLAIN;
      out[i] = item === undefined ? null : item;
    }
    return freeze ? Object.freeze(out) : out;
  }
  if (proto !== objectProto && proto !== null) return NOT_PLAIN;
  const rec = obj as Record<string, unknown>;
  if (typeof rec.toJSON === "function") return NOT_PLAIN;
  const keys = Object.keys(rec);
  const out = (keys.length < SIZED.length ? new (SIZED[keys.length] as Sized)() : {}) as Record<string, unknown>;
  for (const k of keys) {
    // Assigning `__proto__` would set the copy's prototype where JSON.parse makes a member.
    if (k === "__proto__") return NOT_PLAIN;
    const member = copy(rec[k], inner, ancestors, freeze);
    if (member === NOT_PLAIN) return NOT_PLAIN;
    if (member !== undefined) out[k] = member;
  }
  return freeze ? Object.freeze(out) : out;
}
