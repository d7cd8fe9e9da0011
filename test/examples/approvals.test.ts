import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { answer, ask } from "../../examples/approvals.ts";
import { rebuildToolCallLog } from "../../src/index.ts";
import { foldRun, idempotencyKey } from "../../src/journal.ts";
import { inProcess } from "../support/journalFile.ts";

const dir = mkdtempSync(join(tmpdir(), "loom-approvals-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("examples/approvals.ts", () => {
  it("waits in the journal for a yes, then runs the refund once", async () => {
    const file = join(dir, "approve.db");
    const pending = await inProcess(file, (j) => ask(j, "r1"));
    expect(pending).toEqual([
      { stepId: "support#turn:0:tool:0", toolName: "refund", input: { order: "A-17", euros: 40 } },
    ]);
    expect((await inProcess(file, (j) => foldRun(j, "r1"))).status).toBe("interrupted");

    const refunded: string[] = [];
    const out = await inProcess(file, (j) => answer(j, "r1", { "support#turn:0:tool:0": true }, refunded));
    expect(refunded).toEqual(["A-17"]);
    expect(out.toolCallLog).toMatchObject([{ toolName: "refund", status: "ok", stepId: "support#turn:0:tool:0" }]);
    const [full] = await inProcess(file, (j) => rebuildToolCallLog(j, "r1", "full"));
    expect(full?.toolOutput).toMatchObject({ idempotencyKey: idempotencyKey("r1", "support#turn:0:tool:0") });

    // The answer is journaled: a later call with another answer changes nothing and runs nothing.
    const again = await inProcess(file, (j) => answer(j, "r1", { "support#turn:0:tool:0": false }, refunded));
    expect(again).toEqual(out);
    expect(refunded).toEqual(["A-17"]);
  });

  it("a declined refund never runs and is fed back to the model as an error", async () => {
    const file = join(dir, "decline.db");
    const [call] = await inProcess(file, (j) => ask(j, "r2"));
    const refunded: string[] = [];
    const out = await inProcess(file, (j) => answer(j, "r2", { [call?.stepId ?? ""]: false }, refunded));
    expect(refunded).toEqual([]);
    expect(out.toolCallLog[0]?.status).toBe("error");
  });

  it("without an answer the run stays waiting", async () => {
    const file = join(dir, "wait.db");
    await inProcess(file, (j) => ask(j, "r3"));
    const again = await inProcess(file, (j) => answer(j, "r3", {}).catch((e) => e));
    expect(again.run.reason).toBe("approval-pending");
  });
});
