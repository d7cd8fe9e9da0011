import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { newDemoRunId } from "../../src/cli/commands/demo.ts";
import { openSqliteJournal, readJournal, rebuildToolCallLog } from "../../src/index.ts";
import { foldRun, resolveStep } from "../../src/journal.ts";
import { loom, tempDir } from "./support.ts";

const dir = tempDir("loom-demo-");

describe("loom demo", () => {
  it("runs the loop in a child process, kills it with SIGKILL mid-run, resumes it, and the log is intact", async () => {
    const { code, stdout, stderr } = await loom(dir, ["demo", "--turns", "12", "--json"]);
    expect(code, stderr).toBe(0);
    const summary = JSON.parse(stdout);
    const runId: string = summary.runId;
    expect(runId).toMatch(/^demo-\d{8}-\d{6}-[0-9a-f]{4}$/);
    expect(summary).toMatchObject({
      db: join(dir, "loom.db"),
      turns: 12,
      crash: { signal: "SIGKILL", stepId: "loom-demo#turn:6:tool:0", status: "running", frame: "started" },
      // The resume ran turn 6's tool again and everything after it; turns 0–5 were served from the journal.
      resume: { modelCalls: 6, toolCalls: 6 },
      status: "completed",
      iterations: 13,
      toolCalls: 12,
      logIntact: true,
    });
    expect(summary.foldedState.lean).toBeLessThan(summary.foldedState.full);
    expect(summary.firstLeanEntries).toHaveLength(3);
    expect(stderr).toContain(
      `✗ killed the worker (pid ${summary.crash.pid}, SIGKILL) while loom-demo#turn:6:tool:0 was running`,
    );

    const journal = openSqliteJournal(join(dir, "loom.db"));
    try {
      const entries = await readJournal(journal, runId); // validated: seqs, schema, order
      expect(entries).toHaveLength(summary.entries);
      const state = await foldRun(journal, runId);
      const lean = await rebuildToolCallLog(journal, runId, "lean");
      expect(state._output).toEqual({ content: expect.any(String), iterations: 13 });
      expect(lean.slice(0, 3)).toEqual(summary.firstLeanEntries);
      for (const entry of lean) {
        const step = await resolveStep(journal, entry.stepId, { runId });
        expect(step.digest).toBe(entry.digest);
        expect(entry.bytes).toBeGreaterThanOrEqual(1500);
        expect(entry.bytes).toBeLessThanOrEqual(4000);
      }
      // The crashed step: started by the killed worker, started again (a fenced attempt) and completed by the resume.
      const crashed = entries.filter((e) => "frameId" in e.data && e.data.frameId === "loom-demo#turn:6:tool:0");
      expect(crashed.map((e) => e.type)).toEqual(["frame.started", "frame.started", "frame.completed"]);
    } finally {
      await journal.close();
    }
  }, 60_000);

  it("gives every run a new id, so nothing earlier is overwritten", () => {
    const now = new Date();
    const ids = new Set(Array.from({ length: 50 }, () => newDemoRunId(now)));
    expect(ids.size).toBeGreaterThan(45); // 16 random bits each
  });

  it("exits 2 for --turns out of range", async () => {
    expect((await loom(dir, ["demo", "--turns", "1"])).code).toBe(2);
    expect((await loom(dir, ["demo", "--turns", "5000"])).code).toBe(2);
  });
});
