import { createHash } from "node:crypto";
import canonicalize from "canonicalize";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { canonicalBytesOfParsed, withCanonicalBytes } from "../../src/core/canonicalJson.ts";
import { digestOfParsed, digestOfRecorded } from "../../src/core/digest.ts";
import { type CanonicalJsonError, canonicalJson, isCanonicalJsonError } from "../../src/core/index.ts";

// The canonical writer writes UTF-8 bytes straight into a reused buffer: short strings one
// character at a time, long ones (over 256 code units) natively. These tests hold it to the
// RFC 8785 reference (an oracle only) on values built to reach every branch of that writer.

const reference = canonicalize as unknown as (v: unknown) => string;
const sha256 = (text: string) => createHash("sha256").update(text, "utf8").digest("hex");

/** Characters of every width and kind: ASCII, the escaped ones, 2-, 3- and 4-byte UTF-8 (astral as a pair). */
const pieces = [
  "a",
  "Z",
  "0",
  " ",
  "~",
  "\u007f",
  '"',
  "\\",
  "\n",
  "\t",
  "\u0000",
  "\u001f",
  "é",
  "ÿ",
  "€",
  "\u2028",
  "\ufb33",
  "😀",
  "𝄞",
];
const text = (maxPieces: number) =>
  fc.array(fc.constantFrom(...pieces), { maxLength: maxPieces }).map((parts) => parts.join(""));
/** Strings on both sides of the 256-unit line between the per-character and the native path. */
const anyString = fc.oneof(
  text(12),
  fc.tuple(fc.integer({ min: 250, max: 300 }), text(8)).map(([n, tail]) => "x".repeat(n) + tail),
  fc.tuple(text(4), fc.integer({ min: 240, max: 280 })).map(([head, n]) => head + "é".repeat(n)),
);
const name = fc.oneof(fc.constantFrom("", "1", "10", "2", "a", "B", "é", "😀", "\ufb33", "a\nb", '"'), text(6));
const numbers = fc.oneof(
  fc.constantFrom(0, -0, 1e21, 1e-7, 5e-324, -5e-324, 2 ** 53 + 1, 1.7976931348623157e308, 0.1 + 0.2),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.integer(),
);
const json = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.constant(null),
    fc.boolean(),
    numbers,
    anyString,
    fc.array(tie("value"), { maxLength: 5 }),
    fc.dictionary(name, tie("value"), { maxKeys: 6 }),
  ),
})).value;

function refusal(run: () => unknown): CanonicalJsonError {
  try {
    run();
  } catch (e) {
    expect(isCanonicalJsonError(e)).toBe(true);
    return e as CanonicalJsonError;
  }
  throw new Error("expected a CanonicalJsonError");
}

describe("canonical bytes", () => {
  it("are the reference's text as UTF-8, and digest as it does, on 5,000 values of every string width", () => {
    fc.assert(
      fc.property(json, (v) => {
        const expected = reference(v);
        expect(canonicalJson(v)).toBe(expected);
        expect(withCanonicalBytes(v, (b) => Buffer.from(b)).equals(Buffer.from(expected, "utf8"))).toBe(true);
        expect(digestOfRecorded(v)).toEqual({ digest: sha256(expected), bytes: Buffer.byteLength(expected) });
      }),
      { numRuns: 5_000 },
    );
  });

  it("refuse a lone surrogate in a short string, a long one and a member name, saying where", () => {
    for (const lone of ["\ud800", "\udc00", "a\ud83d", "\ude00b", "\ud800\ue000", "\ud83dé", "\udc00\ud800"]) {
      expect(refusal(() => canonicalJson({ a: [1, lone] })).path).toBe("$.a[1]");
      expect(refusal(() => canonicalJson({ a: { long: "x".repeat(300) + lone } })).path).toBe("$.a.long");
      expect(refusal(() => canonicalJson({ a: { [lone]: 1 } })).code).toBe("lone-surrogate");
      expect(digestOfRecorded({ s: lone })).toEqual({ digest: null, bytes: 0 });
    }
    // A member JSON drops is not written, so its name is not refused.
    expect(canonicalJson({ "\ud800": undefined, a: 1 })).toBe('{"a":1}');
  });

  it("drop members JSON drops wherever they stand, names included", () => {
    const v = { a: undefined, b: () => 1, c: 1, d: Symbol("s"), e: { f: undefined }, g: undefined };
    expect(canonicalJson(v)).toBe('{"c":1,"e":{}}');
    expect(canonicalJson({ only: undefined })).toBe("{}");
    expect(canonicalJson([undefined, { toJSON: () => undefined }])).toBe("[null,null]");
  });

  it("grow past the buffer for a large value, and the next small value is written whole", () => {
    const large = { hits: Array.from({ length: 5_000 }, (_, i) => ({ id: `doc-${i}`, text: "é😀".repeat(60) })) };
    expect(canonicalJson(large)).toBe(reference(large));
    expect(canonicalJson({ b: 1, a: "x" })).toBe('{"a":"x","b":1}');
  });

  it("are written right when a toJSON writes canonical JSON itself (the buffer is not shared)", () => {
    const inner = { z: 1, y: "é".repeat(300) };
    const v = { b: { toJSON: () => ({ text: canonicalJson(inner), d: digestOfRecorded(inner).digest }) }, a: 1 };
    const expected = `{"a":1,"b":{"d":"${sha256(reference(inner))}","text":${JSON.stringify(reference(inner))}}}`;
    expect(canonicalJson(v)).toBe(expected);
  });

  it("kept are looked up while some are unused, however often a value was kept (seen through a change they hide)", () => {
    const first = { n: 1 };
    canonicalBytesOfParsed(first);
    canonicalBytesOfParsed(first); // kept again: still one unused
    first.n = 2; // a change nobody should make: the kept bytes still say 1, which shows they were reused
    expect(canonicalJson([first])).toBe('[{"n":1}]');
    expect(canonicalJson([first])).toBe('[{"n":2}]'); // used once
    const second = { m: 1 };
    canonicalBytesOfParsed(second);
    second.m = 2;
    expect(canonicalJson({ second })).toBe('{"second":{"m":1}}');
  });

  it("of a kept parsed value are reused once by the value that holds it, the same bytes", () => {
    fc.assert(
      fc.property(json, json, (output, other) => {
        const parsed = JSON.parse(JSON.stringify(output)) as unknown;
        const bytes = canonicalBytesOfParsed(parsed);
        expect(bytes.toString("utf8")).toBe(reference(output));
        const holder = [{ role: "tool", output: parsed }, other];
        expect(canonicalJson(holder)).toBe(reference(JSON.parse(JSON.stringify(holder))));
        expect(digestOfParsed(parsed).digest).toBe(sha256(reference(output)));
      }),
      { numRuns: 500 },
    );
  });
});
