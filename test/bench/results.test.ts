import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { NOT_BENCHMARKS, printResult, printTable } from "../../bench/support.ts";

const dir = join(import.meta.dirname, "../../bench");
const benches = readdirSync(dir).filter((f) => f.endsWith(".ts") && !NOT_BENCHMARKS.has(f));

describe("every benchmark ends with one RESULT line", () => {
  it.each(benches)("bench/%s prints its RESULT line", (file) => {
    const text = readFileSync(join(dir, file), "utf8");
    // Through support.ts's printResult, or written out with the bench's name as its first key.
    expect(/printResult\("|RESULT \$\{JSON\.stringify\(\{\s*bench:/.test(text)).toBe(true);
  });

  it("printResult names the bench, carries its figures and the tables it printed, numbers unformatted", () => {
    const lines: string[] = [];
    const log = console.log;
    console.log = (line: string) => lines.push(line);
    try {
      printTable("t", [{ what: "a", ms: 1234.5678 }]);
      printResult("demo", { ratio: 1.25, met: true });
    } finally {
      console.log = log;
    }
    const last = lines.at(-1) ?? "";
    expect(last.startsWith("RESULT {")).toBe(true);
    const json = JSON.parse(last.slice("RESULT ".length));
    expect(json).toMatchObject({ bench: "demo", ratio: 1.25, met: true });
    expect(json.tables.at(-1)).toEqual({ title: "t", rows: [{ what: "a", ms: 1234.5678 }] });
  });
});
