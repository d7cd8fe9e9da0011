import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ask } from "../../examples/approvals.ts";
import { approveAll, resume, retryFrom, stop } from "../../examples/operating.ts";
import { isRunCancelledError, listPendingApprovals } from "../../src/index.ts";
import { foldRun } from "../../src/journal.ts";
import { inProcess } from "../support/journalFile.ts";

const dir = mkdtempSync(join(tmpdir(), "loom-operating-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("examples/operating.ts", () => {
  it("approves from an operator's process, resumes, forks; cancels another run for good", async () => {
    const file = join(dir, "ops.db");
    await inProcess(file, (j) => ask(j, "r1"));
    await inProcess(file, (j) => ask(j, "r2"));
    await inProcess(file, (j) => approveAll(j, "ana"));
    expect(await inProcess(file, (j) => listPendingApprovals(j))).toEqual([]);
    const refunded: string[] = [];
    const out = await inProcess(file, (j) => resume(j, "r1", refunded));
    expect(out.content).toBe("I have answered your refund request.");
    expect(refunded).toEqual(["A-17"]);

    const fork = await inProcess(file, (j) => retryFrom(j, "r1"));
    expect(fork).toMatchObject({ runId: "r1-retry", forkedFrom: { runId: "r1", stepId: "support#turn:1:model" } });
    const again: string[] = [];
    expect((await inProcess(file, (j) => resume(j, "r1-retry", again))).content).toBe(out.content);
    expect(again).toEqual([]); // the refund is in the fork's history: served, not run again

    expect(await inProcess(file, (j) => stop(j, "r2"))).toEqual({ status: "cancelled" });
    expect((await inProcess(file, (j) => foldRun(j, "r2"))).status).toBe("cancelled");
    const e = await inProcess(file, (j) => resume(j, "r2")).catch((x: unknown) => x);
    expect(isRunCancelledError(e)).toBe(true);
  });
});
