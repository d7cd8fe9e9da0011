import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { readJournal } from "../../src/events/journal.ts";
import type { ModelResponse } from "../../src/events/types.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { agentLoop$ } from "../../src/runtime/agentLoop.ts";
import { agentTool } from "../../src/runtime/agentTool.ts";
import type { Tool } from "../../src/runtime/config.ts";
import { isApprovalRefusedError, listPendingApprovals, recordApproval } from "../../src/runtime/control.ts";
import { isAgentInterruptedError } from "../../src/runtime/errors.ts";
import { inProcess } from "../support/journalFile.ts";

const dir = mkdtempSync(join(tmpdir(), "loom-subagent-approval-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const ask = (name: string, input: unknown): ModelResponse => ({ toolCalls: [{ id: `${name}-1`, name, input }] });
const lastResult = (messages: readonly { role: string; output?: unknown }[]) =>
  JSON.stringify(messages.filter((m) => m.role === "tool").at(-1)?.output);

/** planner → (researcher →)? refunder, whose refund tool needs an approval; every model call and refund counted. */
function chain(depth: 1 | 2) {
  const refunds: unknown[] = [];
  const refund: Tool = {
    description: "refunds an order",
    requiresApproval: true,
    execute: (input) => {
      refunds.push(input);
      return { refunded: (input as { order: string }).order };
    },
  };
  const models = {
    refunder: scriptedModel(({ turn, messages }) =>
      turn === 0 ? ask("refund", { order: "A-7" }) : { content: `refunder: ${lastResult(messages)}`, toolCalls: [] },
    ),
    researcher: scriptedModel(({ turn, messages }) =>
      turn === 0
        ? ask("refunds", { prompt: "A-7" })
        : { content: `researcher: ${lastResult(messages)}`, toolCalls: [] },
    ),
    planner: scriptedModel(({ turn, messages }) =>
      turn === 0 ? ask("delegate", { prompt: "A-7" }) : { content: `planner: ${lastResult(messages)}`, toolCalls: [] },
    ),
  };
  const refunder = agentLoop$({ id: "refunder", model: models.refunder, tools: { refund } });
  const researcher = agentLoop$({
    id: "researcher",
    model: models.researcher,
    tools: { refunds: agentTool(refunder, { description: "refunds orders" }) },
  });
  const planner = agentLoop$({
    id: "planner",
    model: models.planner,
    tools: { delegate: agentTool(depth === 1 ? refunder : researcher, { description: "does it" }) },
  });
  const calls = () => [models.planner.calls, models.researcher.calls, models.refunder.calls];
  return { planner, calls, refunds };
}

describe("a sub-agent's pending approval is its parent's", () => {
  it("interrupts the parent approval-pending, lists the child's call, and resumes both once approved (SQLite)", async () => {
    const file = join(dir, "one.db");
    const child = "p/planner#turn:0:tool:0";
    const first = chain(1);
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

    const second = chain(1);
    const out = await inProcess(file, (journal) => second.planner.run({ runId: "p", journal }));
    expect(out.content).toBe('planner: "refunder: {\\"refunded\\":\\"A-7\\"}"');
    expect(second.refunds).toEqual([{ order: "A-7" }]);
    // Only the turns after the approval: the planner's and the refunder's turn 0 were served.
    expect(second.calls()).toEqual([1, 0, 1]);
    const third = chain(1);
    expect(await inProcess(file, (journal) => third.planner.run({ runId: "p", journal }))).toEqual(out);
    expect([...third.calls(), third.refunds.length]).toEqual([0, 0, 0, 0]);
  });

  it("carries a grandchild's approval up two levels, and a resume before the answer waits again", async () => {
    const file = join(dir, "two.db");
    const grandchild = "p/planner#turn:0:tool:0/researcher#turn:0:tool:0";
    const first = chain(2);
    const stopped = await inProcess(file, (journal) =>
      first.planner.run({ runId: "p", journal, input: "refund A-7" }).catch((e) => e),
    );
    expect(stopped.run?.pendingApprovals).toEqual([
      { stepId: "refunder#turn:0:tool:0", toolName: "refund", input: { order: "A-7" }, runId: grandchild },
    ]);
    expect(first.calls()).toEqual([1, 1, 1]);

    // Resumed with no answer: every level waits again, no model called.
    const idle = chain(2);
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
    const second = chain(2);
    const out = await inProcess(file, (journal) => second.planner.run({ runId: "p", journal }));
    expect(second.refunds).toEqual([]);
    expect(out.content).toContain("planner: ");
    expect(out.content).toContain("declined");
    expect(second.calls()).toEqual([1, 1, 1]);
  });
});
