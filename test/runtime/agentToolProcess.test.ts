import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { openSqliteJournal } from "../../src/index.ts";
import { startWorker } from "../support/processes.ts";

const dir = mkdtempSync(join(tmpdir(), "loom-subagent-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("agentTool across processes", () => {
  it("a parent SIGKILLed mid-grandchild resumes the whole chain in a new process, no model call repeated", async () => {
    const db = join(dir, "trip.db");
    const counts = join(dir, "counts.txt");
    writeFileSync(counts, "");
    const script = "test/fixtures/subAgentProcess.ts";

    const first = startWorker(script, [db, counts, "crash"]);
    await first.waitFor((l) => l === "tool-started", "the grandchild's tool to start");
    first.child.kill("SIGKILL");
    expect((await first.exited).signal).toBe("SIGKILL");
    expect(readFileSync(counts, "utf8").split("\n").filter(Boolean)).toEqual(["planner:0", "researcher:0", "fact:0"]);

    const second = startWorker(script, [db, counts, "resume"]);
    const done = await second.waitFor((l) => l.startsWith("{"), "the parent's answer");
    expect((await second.exited).code, second.stderr()).toBe(0);
    expect(JSON.parse(done)).toEqual({ content: 'plan: "research: \\"fact: \\\\\\"high tide at 6\\\\\\"\\""' });
    // Each loop's turn 0 was served from the journal; only the turns after the cut-off tool ran.
    expect(readFileSync(counts, "utf8").split("\n").filter(Boolean)).toEqual([
      "planner:0",
      "researcher:0",
      "fact:0",
      "fact:1",
      "researcher:1",
      "planner:1",
    ]);
    const journal = openSqliteJournal(db);
    try {
      const runs = (await journal.store.listRuns()).map((r) => r.runId).sort();
      expect(runs).toEqual([
        "trip",
        "trip/planner#turn:0:tool:0",
        "trip/planner#turn:0:tool:0/researcher#turn:0:tool:0",
      ]);
    } finally {
      await journal.close();
    }
  });

  it("a sub-agent's approval across processes: the parent stops, another process approves the child, a third resumes both", async () => {
    const db = join(dir, "evening.db");
    const counts = join(dir, "evening.txt");
    writeFileSync(counts, "");
    const script = "test/fixtures/subAgentApprovalProcess.ts";
    const child = "evening/planner#turn:0:tool:0";
    const step = async (mode: string) => {
      const worker = startWorker(script, [db, counts, mode]);
      const line = await worker.waitFor((l) => l.startsWith("{"), `the ${mode} process's answer`);
      expect((await worker.exited).code, worker.stderr()).toBe(0);
      return JSON.parse(line);
    };
    expect(await step("start")).toEqual({
      reason: "approval-pending",
      pendingApprovals: [{ stepId: "booker#turn:0:tool:0", toolName: "book", input: { seats: 2 }, runId: child }],
    });
    expect(await step("approve")).toMatchObject({ runId: child, stepId: "booker#turn:0:tool:0", rootRunId: "evening" });
    expect(await step("resume")).toEqual({ content: 'plan: "booked: \\"table for 2 at 8\\""' });
    // Each model call once over the three processes; the booking once, after the approval.
    expect(readFileSync(counts, "utf8").split("\n").filter(Boolean)).toEqual([
      "planner:0",
      "booker:0",
      "book",
      "booker:1",
      "planner:1",
    ]);
  });
});
