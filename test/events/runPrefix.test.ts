import { describe, expect, it } from "vitest";
import { prefixEnd } from "../../src/events/runPrefix.ts";

/** Code point order, as UTF-8 bytes compare (SQLite BINARY, PostgreSQL "C"). */
const cmp = (a: string, b: string) => Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"));

describe("prefixEnd: the upper end of a run id prefix's range", () => {
  it("is the prefix with its last code point one up", () => {
    expect(prefixEnd("trip/")).toBe("trip0");
    expect(prefixEnd("a/\u{1F600}")).toBe("a/\u{1F601}");
    expect(prefixEnd("a\uD7FF")).toBe("a\uE000"); // over the surrogates, which no text holds
  });

  it("drops trailing U+10FFFF, and has none for an empty prefix or one of U+10FFFF only", () => {
    expect(prefixEnd("ab\u{10FFFF}\u{10FFFF}")).toBe("ac");
    expect(prefixEnd("")).toBeUndefined();
    expect(prefixEnd("\u{10FFFF}")).toBeUndefined();
  });

  it("bounds exactly the strings that start with the prefix, in UTF-8 byte order", () => {
    const prefix = "run/\uFFFF";
    const end = prefixEnd(prefix) as string;
    const inside = [prefix, `${prefix}x`, `${prefix}\u{10FFFF}\u{10FFFF}`, `${prefix}\u{1F600}`];
    const outside = ["run/", "run0", "run/\u{10000}", "run/\uFFFE\u{10FFFF}", end];
    for (const s of inside) expect(cmp(prefix, s) <= 0 && cmp(s, end) < 0).toBe(true);
    for (const s of outside) expect(cmp(prefix, s) <= 0 && cmp(s, end) < 0).toBe(false);
  });
});
