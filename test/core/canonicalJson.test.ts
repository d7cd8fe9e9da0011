import canonicalize from "canonicalize";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { canonicalJsonOfParsed } from "../../src/core/canonicalJson.ts";
import {
  type CanonicalJsonError,
  canonicalJson,
  isCanonicalJsonError,
  MAX_CANONICAL_DEPTH,
} from "../../src/core/index.ts";

// The reference implementation of RFC 8785, used only as an oracle.
const reference = canonicalize as unknown as (v: unknown) => string | undefined;

function expectCause(run: () => unknown, code: string): CanonicalJsonError {
  try {
    run();
  } catch (e) {
    expect(isCanonicalJsonError(e)).toBe(true);
    expect((e as CanonicalJsonError).code).toBe(code);
    return e as CanonicalJsonError;
  }
  throw new Error(`expected a CanonicalJsonError ${code}`);
}

function nested(depth: number, leaf: unknown = 1): unknown {
  let v: unknown = leaf;
  for (let i = 0; i < depth; i++) v = i % 2 ? { k: v } : [v];
  return v;
}

const specialNumbers = [
  0,
  -0,
  1,
  -1,
  1e21,
  1e-7,
  1e-6,
  5e-324,
  -5e-324,
  2 ** 53 + 1,
  2 ** 53,
  1.7976931348623157e308,
  333333333.3333333,
  4.5,
  0.002,
  1e-27,
  1e30,
  295147905179352830000,
  9.999999999999999e22,
  0.1 + 0.2,
];
const keyPool = [
  "",
  "a",
  "ab",
  "abc",
  "b",
  "B",
  "é",
  "€",
  "\r",
  "1",
  "10",
  "\u0080",
  "😀",
  "\ufb33",
  "𝄞x",
  "\ud83d\ude00a",
];

const jsonArb = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.constant(null),
    fc.boolean(),
    fc.constantFrom(...specialNumbers),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.integer(),
    fc.string({ unit: "binary", maxLength: 12 }),
    fc.constantFrom(...keyPool),
    fc.array(tie("value"), { maxLength: 5 }),
    fc.dictionary(fc.oneof(fc.constantFrom(...keyPool), fc.string({ unit: "binary", maxLength: 6 })), tie("value"), {
      maxKeys: 6,
    }),
  ),
})).value;

describe("canonicalJson", () => {
  it("equals the RFC 8785 reference byte for byte on 10,000 generated JSON values", () => {
    fc.assert(
      fc.property(jsonArb, (v) => {
        expect(canonicalJson(v)).toBe(reference(v));
      }),
      { numRuns: 10_000 },
    );
  });

  // Hand-written cases of the six kinds the RFC's own test data covers.
  const cases: Record<string, [unknown, string]> = {
    arrays: [[56, { d: true, "10": null, "1": [] }], '[56,{"1":[],"10":null,"d":true}]'],
    french: [
      {
        peach: "This sorting order",
        péché: "is wrong according to French",
        pêche: "but canonicalization MUST",
        sin: "ignore locale",
      },
      '{"peach":"This sorting order","péché":"is wrong according to French","pêche":"but canonicalization MUST","sin":"ignore locale"}',
    ],
    structures: [
      { "1": { f: { f: "hi", F: 5 }, "\n": 56 }, "10": {}, "": "empty", a: {}, "111": [{ e: "yes", E: "no" }], A: {} },
      '{"":"empty","1":{"\\n":56,"f":{"F":5,"f":"hi"}},"10":{},"111":[{"E":"no","e":"yes"}],"A":{},"a":{}}',
    ],
    unicode: [{ "Unnormalized Unicode": "A\u030a" }, '{"Unnormalized Unicode":"A\u030a"}' /* not normalized */],
    values: [
      {
        numbers: [333333333.3333333, 1e30, 4.5, 0.002, 1e-27],
        string: '€$\u000f\nA\'B"\\\\"/',
        literals: [null, true, false],
      },
      '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
    ],
    weird: [
      {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Dalet",
        "1": "One",
        "\ud83d\ude00": "Emoji",
        "\u0080": "Control",
        ö: "o",
      },
      '{"\\r":"Carriage Return","1":"One","\u0080":"Control","ö":"o","€":"Euro Sign","😀":"Emoji","דּ":"Dalet"}',
    ],
  };
  for (const [kind, [input, expected]] of Object.entries(cases)) {
    it(`writes the RFC's ${kind} case exactly`, () => {
      expect(canonicalJson(input)).toBe(expected);
      expect(canonicalJson(input)).toBe(reference(input));
    });
  }

  it("sorts members by UTF-16 code units, so an astral character sorts before U+FB33", () => {
    expect(canonicalJson({ "\ufb33": 1, "\ud83d\ude00": 2 })).toBe('{"😀":2,"דּ":1}');
  });

  it("writes numbers in ECMAScript form", () => {
    expect(canonicalJson([-0, 1e21, 1e-7, 5e-324, 2 ** 53 + 1, 1e20, 0.000001])).toBe(
      "[0,1e+21,1e-7,5e-324,9007199254740992,100000000000000000000,0.000001]",
    );
  });

  it("honours toJSON (with its key) and drops what JSON drops", () => {
    class Money {
      constructor(readonly cents: number) {}
      toJSON(key: string) {
        return { key, eur: this.cents / 100 };
      }
    }
    const v = { z: new Money(250), u: undefined, f: () => 1, s: Symbol("x"), arr: [undefined, () => 1, Symbol("y")] };
    expect(canonicalJson(v)).toBe('{"arr":[null,null,null],"z":{"eur":2.5,"key":"z"}}');
    expect(canonicalJson(new Date(0))).toBe('"1970-01-01T00:00:00.000Z"');
    expect(canonicalJson(new Map([[1, 2]]))).toBe("{}");
    expect(canonicalJson([new Number(3), new String("s"), new Boolean(false)])).toBe('[3,"s",false]');
  });

  it("allows a shared (non-cyclic) reference, as JSON does", () => {
    const shared = { x: 1 };
    expect(canonicalJson({ a: shared, b: shared })).toBe('{"a":{"x":1},"b":{"x":1}}');
  });

  describe("refuses values with no canonical form", () => {
    it("NaN and ±Infinity", () => {
      expectCause(() => canonicalJson(Number.NaN), "non-finite-number");
      expectCause(() => canonicalJson({ a: [Number.POSITIVE_INFINITY] }), "non-finite-number");
      const e = expectCause(() => canonicalJson({ a: [1, Number.NEGATIVE_INFINITY] }), "non-finite-number");
      expect(e.path).toBe("$.a[1]");
    });
    it("BigInt", () => {
      expectCause(() => canonicalJson({ n: 10n }), "bigint");
    });
    it("a cycle", () => {
      const a: Record<string, unknown> = { x: 1 };
      a.self = { back: a };
      expectCause(() => canonicalJson(a), "cycle");
    });
    it("a lone surrogate in a string or in a member name", () => {
      expectCause(() => canonicalJson("ab\ud800"), "lone-surrogate");
      expectCause(() => canonicalJson({ "\udc00": 1 }), "lone-surrogate");
    });
    it("a toJSON or a getter that throws", () => {
      expectCause(
        () =>
          canonicalJson({
            toJSON: () => {
              throw new Error("no");
            },
          }),
        "to-json-threw",
      );
      expectCause(
        () =>
          canonicalJson({
            get bad() {
              throw new Error("no");
            },
          }),
        "read-threw",
      );
    });
    it("a top-level value with no JSON form", () => {
      expectCause(() => canonicalJson(undefined), "no-json-form");
      expectCause(() => canonicalJson(() => 1), "no-json-form");
    });
    it(`nesting deeper than MAX_CANONICAL_DEPTH (${MAX_CANONICAL_DEPTH}), without overflowing the stack at 100,000 levels`, () => {
      expect(() => canonicalJson(nested(MAX_CANONICAL_DEPTH))).not.toThrow();
      expectCause(() => canonicalJson(nested(MAX_CANONICAL_DEPTH + 1)), "too-deep");
      const e = expectCause(() => canonicalJson(nested(100_000)), "too-deep");
      expect(e.message).toContain("MAX_CANONICAL_DEPTH");
    });
  });
});

describe("canonicalJsonOfParsed: a kept text is reused once, as the walk would write it", () => {
  it("a value holding a kept output writes the same text as a fresh walk, at any position", () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.jsonValue(), (output, other) => {
        const parsed = JSON.parse(JSON.stringify(output)) as unknown;
        const text = canonicalJsonOfParsed(parsed);
        expect(text).toBe(canonicalJson(JSON.parse(JSON.stringify(output))));
        const holder = [{ role: "tool", output: parsed, other }, { b: parsed }];
        const fresh = JSON.parse(JSON.stringify(holder)) as unknown;
        expect(canonicalJson(holder)).toBe(canonicalJson(fresh));
        expect(canonicalJson(holder)).toBe(canonicalJson(fresh)); // used once: walked again the same
      }),
    );
  });

  it("a kept value nested past the cap where it is held is still refused, as the walk refuses it", () => {
    const deep = nested(MAX_CANONICAL_DEPTH - 2);
    canonicalJsonOfParsed(deep);
    expectCause(() => canonicalJson([[[deep]]]), "too-deep");
    canonicalJsonOfParsed(deep);
    expect(canonicalJson([deep])).toBe(canonicalJson([nested(MAX_CANONICAL_DEPTH - 2)]));
  });
});
