import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { canonicalJson, digestOf, sha256Hex } from "../../src/core/index.ts";

const of = (v: unknown) => {
  const text = canonicalJson(v);
  return { digest: sha256Hex(text), bytes: Buffer.byteLength(text) };
};

describe("sha256Hex", () => {
  it("gives lowercase hex of text as UTF-8 and of bytes", () => {
    expect(sha256Hex("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    expect(sha256Hex(new TextEncoder().encode("é"))).toBe(sha256Hex("é"));
  });
});

describe("digestOf", () => {
  it("digests what a JSON store records: a Date as its ISO string", () => {
    const d = new Date("2026-01-02T03:04:05.006Z");
    expect(digestOf(d)).toEqual(of("2026-01-02T03:04:05.006Z"));
    expect(digestOf({ at: d })).toEqual(of({ at: "2026-01-02T03:04:05.006Z" }));
  });

  it("digests a class with toJSON as its JSON, and a Map as {}", () => {
    class Point {
      constructor(
        readonly x: number,
        readonly y: number,
      ) {}
      toJSON() {
        return [this.x, this.y];
      }
    }
    expect(digestOf({ p: new Point(1, 2) })).toEqual(of({ p: [1, 2] }));
    expect(digestOf(new Map([["a", 1]]))).toEqual(of({}));
  });

  it("counts bytes of the canonical text as UTF-8", () => {
    expect(digestOf({ b: "é", a: 1 }).bytes).toBe(Buffer.byteLength('{"a":1,"b":"é"}'));
  });

  it("gives null and 0, never throwing, for values with no JSON form", () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.me = cyclic;
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    const throwingToJson = {
      toJSON: () => {
        throw new Error("boom");
      },
    };
    const throwingGetter = {
      get x() {
        throw new Error("boom");
      },
    };
    for (const v of [
      undefined,
      () => 1,
      Symbol("s"),
      10n,
      { n: 1n },
      cyclic,
      deep,
      "\ud800",
      throwingToJson,
      throwingGetter,
    ]) {
      expect(digestOf(v)).toEqual({ digest: null, bytes: 0 });
    }
  });

  it("drops undefined members and NaN becomes null, as the JSON round trip does", () => {
    expect(digestOf({ a: undefined, b: Number.NaN })).toEqual(of({ b: null }));
  });

  it("gives a value and its JSON round trip the same digest (property)", () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.option(fc.date({ noInvalidDate: true })), (v, d) => {
        const value = { v, d, m: new Map(), u: undefined };
        const recorded = JSON.parse(JSON.stringify(value));
        expect(digestOf(value)).toEqual(digestOf(recorded));
      }),
      { numRuns: 2_000 },
    );
  });
});
