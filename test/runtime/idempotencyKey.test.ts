import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { idempotencyKey, toolStepId } from "../../src/events/ids.ts";
import { openSqliteJournal } from "../../src/events/journal.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { agentTool } from "../../src/runtime/run/agentTool.ts";
import { jsonJournal } from "../support/loop.ts";
import { startWorker } from "../support/processes.ts";
import { refundLoop } from "../support/refundKeys.ts";

const dir = mkdtempSync(join(tmpdir(), "loom-idempotency-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("ToolContext.idempotencyKey: one key per run and step", () => {
  it("gives the same step of two runs of one loop two keys (a payment API must not answer one with the other)", async () => {
    const seen: { key: string; stepId: string }[] = [];
    const loop = refundLoop((key, stepId) => {
      seen.push({ key, stepId });
      return { refunded: true };
    });
    const journal = jsonJournal();
    await loop.run({ runId: "order-1042", journal, input: "Please refund order A-17" });
    await loop.run({ runId: "order-1043", journal, input: "Please refund order A-17" });
    expect(seen.map((s) => s.stepId)).toEqual(["support#turn:0:tool:0", "support#turn:0:tool:0"]);
    const [first, second] = seen.map((s) => s.key);
    expect(first).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(first).not.toBe(second);
    expect([first, second]).toEqual([
      idempotencyKey("order-1042", "support#turn:0:tool:0"),
      idempotencyKey("order-1043", "support#turn:0:tool:0"),
    ]);
  });

  it("gives a call run again after a SIGKILL, by a fresh process and journal handle, the key its first attempt had", async () => {
    const db = join(dir, "refunds.db");
    const first = startWorker("test/runtime/workers/refundProcess.ts", [db, "order-1042"]);
    const line = await first.waitFor((l) => l.startsWith("key "), "the refund to start");
    first.child.kill("SIGKILL");
    expect((await first.exited).signal).toBe("SIGKILL");
    const [, killedKey, killedStep] = line.split(" ");

    const resumedWith: string[] = [];
    const journal = openSqliteJournal(db); // a handle of this process: nothing of the first is shared
    try {
      const loop = refundLoop((key) => {
        resumedWith.push(key);
        return { refunded: true };
      });
      const out = await loop.run({ runId: "order-1042", journal });
      expect(out.content).toBe("Refunded.");
    } finally {
      await journal.close();
    }
    expect(killedStep).toBe("support#turn:0:tool:0");
    expect(resumedWith).toEqual([killedKey]);
    expect(killedKey).toBe(idempotencyKey("order-1042", "support#turn:0:tool:0"));
  });

  it("keys a sub-agent's calls by its child run, so the same child step of two parent runs differs too", async () => {
    const keys: string[] = [];
    const refunder = refundLoop((key) => {
      keys.push(key);
      return { refunded: true };
    });
    const planner = agentLoop$({
      id: "planner",
      model: scriptedModel(({ turn }) =>
        turn === 0
          ? { toolCalls: [{ id: "p1", name: "refunds", input: { prompt: "refund A-17" } }] }
          : { content: "done", toolCalls: [] },
      ),
      tools: { refunds: agentTool(refunder, { description: "handles refunds" }) },
    });
    const journal = jsonJournal();
    await planner.run({ runId: "p-1", journal, input: "go" });
    await planner.run({ runId: "p-2", journal, input: "go" });
    const child = (parent: string) => `${parent}/${toolStepId("planner", 0, 0)}`;
    expect(keys).toEqual([
      idempotencyKey(child("p-1"), "support#turn:0:tool:0"),
      idempotencyKey(child("p-2"), "support#turn:0:tool:0"),
    ]);
    expect(keys[0]).not.toBe(keys[1]);
  });
});
