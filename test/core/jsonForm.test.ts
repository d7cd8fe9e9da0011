import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { jsonRoundTrip, MAX_PLAIN_DEPTH, NOT_PLAIN, plainJsonCopy } from "../../src/core/jsonForm.ts";

/** What a JSON store hands back. */
const roundTrip = (v: unknown) => {
  const text = JSON.stringify(v);
  return text === undefined ? undefined : JSON.parse(text);
};

const anyValue = fc.anything({ withSparseArray: true, withNullPrototype: true, withBoxedValues: true });
const THREW = Symbol("threw");

/** What the round trip through text gives, or THREW once `subject` was seen to throw as it throws. */
function roundTripOrThrows(v: unknown, subject: (v: unknown) => unknown): { value: unknown } | typeof THREW {
  try {
    return { value: roundTrip(v) };
  } catch (e) {
    expect(() => subject(v)).toThrow((e as Error).message);
    return THREW;
  }
}

/** Same values, same member order, same kinds (toStrictEqual alone ignores member order). */
function expectSameJsonForm(actual: unknown, expected: unknown) {
  expect(actual).toStrictEqual(expected);
  expect(JSON.stringify(actual)).toBe(JSON.stringify(expected));
  expect(Object.is(actual, -0)).toBe(false);
}

const isFrozenThroughout = (v: unknown): boolean =>
  typeof v !== "object" || v === null || (Object.isFrozen(v) && Object.values(v).every(isFrozenThroughout));

describe("jsonRoundTrip", () => {
  it("gives what JSON.parse(JSON.stringify(v)) gives, for any value", () => {
    fc.assert(
      fc.property(anyValue, (v) => {
        const expected = roundTripOrThrows(v, jsonRoundTrip);
        if (expected !== THREW) expectSameJsonForm(jsonRoundTrip(v), expected.value);
      }),
      { numRuns: 500 },
    );
  });

  it("keeps member order, integer-like names first as JSON.parse does, and -0 as 0", () => {
    const v = { b: 1, 10: "x", a: [-0, Number.NaN, undefined, () => 1, Symbol("s")], 2: { z: undefined, y: null } };
    const copy = jsonRoundTrip(v);
    expectSameJsonForm(copy, roundTrip(v));
    expect(Object.keys(copy as object)).toEqual(["2", "10", "b", "a"]);
  });

  it("makes plain objects (Object.prototype, members in order, nothing else own) of any size", () => {
    for (let n = 0; n <= 20; n++) {
      const value: Record<string, unknown> = {};
      for (let i = n; i > 0; i--) value[`m${i}`] = i % 3 === 0 ? undefined : { i, s: "x".repeat(i) };
      const copy = jsonRoundTrip(value) as Record<string, unknown>;
      expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
      expect(copy.constructor).toBe(Object);
      expect(Reflect.ownKeys(copy)).toEqual(Object.keys(JSON.parse(JSON.stringify(value))));
      expect(copy).toStrictEqual(JSON.parse(JSON.stringify(value)));
    }
  });

  it("leaves what is not plain data to JSON.stringify: toJSON, Dates, boxed values, class instances", () => {
    class Point {
      constructor(
        readonly x: number,
        readonly y: number,
      ) {}
    }
    const v = {
      at: new Date(0),
      own: { toJSON: () => ({ replaced: true }) },
      boxed: [new Number(3), new String("s"), new Boolean(false)],
      point: new Point(1, 2),
      map: new Map([[1, 2]]),
      nested: [{ deep: { at: new Date(1) } }],
    };
    expect(plainJsonCopy(v)).toBe(NOT_PLAIN);
    expectSameJsonForm(jsonRoundTrip(v), roundTrip(v));
  });

  it("makes a `__proto__` member a member, never the copy's prototype", () => {
    const v = JSON.parse('{"__proto__": {"polluted": true}, "a": 1}');
    const copy = jsonRoundTrip(v) as Record<string, unknown>;
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
    expect(Object.keys(copy)).toEqual(["__proto__", "a"]);
    expect((copy as { polluted?: unknown }).polluted).toBeUndefined();
  });

  it("throws what JSON.stringify throws: a cycle, a BigInt, a throwing getter", () => {
    const cycle: Record<string, unknown> = { a: 1 };
    cycle.self = { back: cycle };
    const getter = {
      get bad() {
        throw new Error("no reading me");
      },
    };
    for (const v of [cycle, { n: 1n }, getter]) {
      let message = "";
      try {
        JSON.stringify(v);
      } catch (e) {
        message = (e as Error).message;
      }
      expect(message).not.toBe("");
      expect(() => jsonRoundTrip(v)).toThrow(message);
    }
  });

  it("copies data nested past the walk's depth through JSON text", () => {
    let deep: unknown = "leaf";
    for (let i = 0; i < MAX_PLAIN_DEPTH + 5; i++) deep = i % 2 ? { k: deep } : [deep];
    expect(plainJsonCopy(deep)).toBe(NOT_PLAIN);
    expectSameJsonForm(jsonRoundTrip(deep), roundTrip(deep));
  });

  it("gives undefined where JSON.stringify gives nothing", () => {
    for (const v of [undefined, () => 1, Symbol("s"), { toJSON: () => undefined }]) {
      expect(jsonRoundTrip(v)).toBeUndefined();
    }
  });
});

describe("plainJsonCopy", () => {
  it("copies: the copy shares no object with the value", () => {
    const v = { a: { b: [1, { c: "d" }] } };
    const copy = plainJsonCopy(v) as typeof v;
    expect(copy).toStrictEqual(v);
    expect(copy.a).not.toBe(v.a);
    expect(copy.a.b[1]).not.toBe(v.a.b[1]);
  });

  it("freezes the copy throughout when asked, and leaves the value alone", () => {
    const v = { a: { b: [1, { c: "d" }] }, e: [] };
    const copy = plainJsonCopy(v, true);
    expect(isFrozenThroughout(copy)).toBe(true);
    expect(Object.isFrozen(v) || Object.isFrozen(v.a)).toBe(false);
  });
});
