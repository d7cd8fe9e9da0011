import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { readJournal } from "../../src/events/journal.ts";
import { isAgentInterruptedError } from "../../src/runtime/base/errors.ts";
import { isApprovalRefusedError, listPendingApprovals, recordApproval } from "../../src/runtime/control/operations.ts";
import { inProcess } from "../support/journalFile.ts";
import { refundChain } from "../support/refundChain.ts";

const dir = mkdtempSync(join(tmpdir(), "loom-subagent-approval-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("a sub-agent's pending approval is its parent's", () => {
  it("interrupts the parent approval-pending, lists the child's call, and resumes both once approved (SQLite)", async () => {
    const file = join(dir, "one.db");
    const child = "p/planner#turn:0:tool:0";
    const first = refundChain("one");
    const stopped = await inProcess(file, (journal) =>
      first.planner.run({ runId: "p", journal, input: "refund A-7" }).catch((e) => e),
    );
    expect(isAgentInterruptedError(stopped)).toBe(true);
    expect(stopped.run.reason).toBe("approval-pending");
    expect(stopped.run.pendingApprovals).toEqual([
      { stepId: "refunder#turn:0:tool:0", toolName: "refund", input: { order: "A-7" }, runId: child },
    ]);
    expect(stopped.message).toContain(`refunder#turn:0:tool:0 (in sub-agent run ${child})`);
    expect(first.calls()).toEqual([1, 0, 1]);

    await inProcess(file, async (journal) => {
      // The parent's journal ends approval-pending, its call's frame started and never completed.
      const parentLog = await readJournal(journal, "p");
      expect(parentLog.at(-1)).toMatchObject({
        type: "run.interrupted",
        data: { reason: "approval-pending", detail: { stepIds: ["planner#turn:0:tool:0"] } },
      });
      expect(parentLog.some((e) => e.type === "frame.completed" && e.data.frameId === "planner#turn:0:tool:0")).toBe(
        false,
      );
      const pending = await listPendingApprovals(journal, { runId: "p" });
      expect(pending).toMatchObject([
        {
          runId: child,
          stepId: "refunder#turn:0:tool:0",
          toolName: "refund",
          input: { order: "A-7" },
          parent: { runId: "p", stepId: "planner#turn:0:tool:0" },
          rootRunId: "p",
        },
      ]);
      // Listed once over the whole journal (the child is interrupted too), with its chain.
      expect(await listPendingApprovals(journal)).toEqual(pending);
      // Answered on the child's run, not through the parent.
      const refused = await recordApproval(journal, "p", "refunder#turn:0:tool:0", { approved: true }).catch((e) => e);
      expect(isApprovalRefusedError(refused) && refused.code).toBe("approvalNotPending");
      expect(refused.message).toContain(`waits in the sub-agent run ${child}`);
      await recordApproval(journal, child, "refunder#turn:0:tool:0", {
        approved: true,
        by: "ana",
        inputDigest: pending[0]?.inputDigest ?? undefined,
      });
      expect(await listPendingApprovals(journal)).toEqual([]);
    });

    const second = refundChain("one");
    const out = await inProcess(file, (journal) => second.planner.run({ runId: "p", journal }));
    expect(out.content).toBe('planner: "refunder: {\\"refunded\\":\\"A-7\\"}"');
    expect(second.refunds).toEqual([{ order: "A-7" }]);
    // Only the turns after the approval: the planner's and the refunder's turn 0 were served.
    expect(second.calls()).toEqual([1, 0, 1]);
    const third = refundChain("one");
    expect(await inProcess(file, (journal) => third.planner.run({ runId: "p", journal }))).toEqual(out);
    expect([...third.calls(), third.refunds.length]).toEqual([0, 0, 0, 0]);
  });

  it("carries a grandchild's approval up two levels, and a resume before the answer waits again", async () => {
    const file = join(dir, "two.db");
    const grandchild = "p/planner#turn:0:tool:0/researcher#turn:0:tool:0";
    const first = refundChain("two-deep");
    const stopped = await inProcess(file, (journal) =>
      first.planner.run({ runId: "p", journal, input: "refund A-7" }).catch((e) => e),
    );
    expect(stopped.run?.pendingApprovals).toEqual([
      { stepId: "refunder#turn:0:tool:0", toolName: "refund", input: { order: "A-7" }, runId: grandchild },
    ]);
    expect(first.calls()).toEqual([1, 1, 1]);

    // Resumed with no answer: every level waits again, no model called.
    const idle = refundChain("two-deep");
    const again = await inProcess(file, (journal) => idle.planner.run({ runId: "p", journal }).catch((e) => e));
    expect(again.run?.reason).toBe("approval-pending");
    expect(idle.calls()).toEqual([0, 0, 0]);

    await inProcess(file, async (journal) => {
      const [pending, ...more] = await listPendingApprovals(journal, { runId: "p" });
      expect(more).toEqual([]);
      expect(pending).toMatchObject({
        runId: grandchild,
        parent: { runId: "p/planner#turn:0:tool:0", stepId: "researcher#turn:0:tool:0" },
        rootRunId: "p",
      });
      await recordApproval(journal, grandchild, "refunder#turn:0:tool:0", { approved: false, reason: "not today" });
    });
    const second = refundChain("two-deep");
    const out = await inProcess(file, (journal) => second.planner.run({ runId: "p", journal }));
    expect(second.refunds).toEqual([]);
    expect(out.content).toContain("planner: ");
    expect(out.content).toContain("declined");
    expect(second.calls()).toEqual([1, 1, 1]);
  });
});
