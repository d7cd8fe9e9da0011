import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { quickstart } from "../../examples/quickstart.ts";
import { openSqliteJournal, readJournal } from "../../src/index.ts";
import { foldRun, resolveStep } from "../../src/journal.ts";

const dir = mkdtempSync(join(tmpdir(), "loom-quickstart-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("examples/quickstart.ts", () => {
  it("stops mid-tool, resumes from the journal, and returns the lean log", async () => {
    const file = join(dir, "quickstart.db");
    const lines: unknown[][] = [];
    const result = await quickstart(file, (...args) => lines.push(args));
    expect(lines[0]).toEqual(["stopped: aborted"]);
    expect(result.content).toBe("Clear and 21 °C in Lisbon.");
    // The tool's first attempt was cut off (outcome unknown), so the resume ran it again; the model
    // was called once per turn: its first answer was served from the journal on resume.
    expect(result.attempts).toBe(2);
    expect(result.modelCalls).toBe(2);
    const [entry] = result.toolCallLog;
    expect(entry).toMatchObject({ iteration: 0, toolName: "weather", status: "ok", stepId: "assistant#turn:0:tool:0" });

    const journal = openSqliteJournal(file);
    try {
      const [run] = await journal.store.listRuns();
      expect((await foldRun(journal, run?.runId ?? "")).status).toBe("completed");
      expect((await readJournal(journal, run?.runId ?? "")).map((e) => e.type)).toContain("run.interrupted");
      const step = await resolveStep(journal, "assistant#turn:0:tool:0");
      expect(step.output).toEqual({ city: "Lisbon", sky: "clear", celsius: 21 });
      expect(step.digest).toBe(entry && "digest" in entry ? entry.digest : undefined);
    } finally {
      await journal.close();
    }
  });
});
