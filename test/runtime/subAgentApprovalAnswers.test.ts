import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { readJournal } from "../../src/events/journal.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { isAgentInterruptedError } from "../../src/runtime/base/errors.ts";
import { isAmbiguousApprovalError } from "../../src/runtime/control/approvalAnswers.ts";
import { listPendingApprovals } from "../../src/runtime/control/operations.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { approvalKey } from "../../src/runtime/subruns/subRunApprovals.ts";
import { inProcess } from "../support/journalFile.ts";
import { refundChain } from "../support/refundChain.ts";

const dir = mkdtempSync(join(tmpdir(), "loom-subagent-answers-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const STEP = "refunder#turn:0:tool:0";

/** Starts the chain in one process: it stops approval-pending. */
async function stopped(file: string, shape: "one" | "two-deep" | "fan-out") {
  const first = refundChain(shape);
  const e = await inProcess(file, (journal) => first.planner.run({ runId: "p", journal, input: "go" }).catch((x) => x));
  expect(isAgentInterruptedError(e) && e.run.reason).toBe("approval-pending");
  return e.run.pendingApprovals as readonly { runId?: string; stepId: string }[];
}

const approvalsOf = async (file: string, runId: string) =>
  inProcess(file, async (journal) =>
    (await readJournal(journal, runId)).filter((e) => e.type === "decision.recorded").map((e) => e.data),
  );

describe("run({ approvals }) on a parent answers its sub-agents' calls", () => {
  it("passes an answer keyed by the child's step id down to the child, recorded on the child's run (SQLite)", async () => {
    const file = join(dir, "one.db");
    const child = "p/planner#turn:0:tool:0";
    expect(await stopped(file, "one")).toEqual([expect.objectContaining({ runId: child, stepId: STEP })]);

    const second = refundChain("one");
    const out = await inProcess(file, (journal) =>
      second.planner.run({ runId: "p", journal, approvals: { [STEP]: true } }),
    );
    expect(out.content).toBe('planner: "refunder: {\\"refunded\\":\\"A-7\\"}"');
    expect(second.refunds).toEqual([{ order: "A-7" }]);
    expect(second.calls()).toEqual([1, 0, 1]); // only the turns after the approval
    // Journaled on the child's run, bound to its input; the parent's run has no approval of its own.
    expect(await approvalsOf(file, child)).toMatchObject([
      { decisionId: `${STEP}:approval`, choice: { approved: true } },
    ]);
    expect((await approvalsOf(file, "p")).filter((d) => String(d.decisionId).endsWith(":approval"))).toEqual([]);
  });

  it("reaches a grandchild two levels down, keyed by approvalKey(runId, stepId)", async () => {
    const file = join(dir, "two.db");
    const grandchild = "p/planner#turn:0:tool:0/researcher#turn:0:tool:0";
    const [pending] = await stopped(file, "two-deep");
    expect(pending).toMatchObject({ runId: grandchild, stepId: STEP });

    const second = refundChain("two-deep");
    const key = approvalKey(pending?.runId ?? "", STEP);
    expect(key).toBe(`${grandchild}/${STEP}`);
    const out = await inProcess(file, (journal) =>
      second.planner.run({ runId: "p", journal, approvals: { [key]: false } }),
    );
    expect(second.refunds).toEqual([]);
    expect(out.content).toContain("declined");
    expect(second.calls()).toEqual([1, 1, 1]);
    expect(await approvalsOf(file, grandchild)).toMatchObject([{ choice: { approved: false } }]);
  });

  it("refuses a step id waiting in two sub-agents (ambiguousApproval), journaling nothing; keyed by run it answers each", async () => {
    const file = join(dir, "fan.db");
    const children = ["p/planner#turn:0:tool:0", "p/planner#turn:0:tool:1"];
    const pending = await stopped(file, "fan-out");
    expect(pending.map((p) => p.runId).sort()).toEqual(children);

    const refused = refundChain("fan-out");
    const e = await inProcess(file, (journal) =>
      refused.planner.run({ runId: "p", journal, approvals: { [STEP]: true } }).catch((x) => x),
    );
    expect(isAmbiguousApprovalError(e) && e.code).toBe("ambiguousApproval");
    expect([...e.runIds].sort()).toEqual(children);
    expect(e.message).toContain(`"${children[0]}/${STEP}"`);
    expect([...refused.calls(), refused.refunds.length]).toEqual([0, 0, 0, 0]);
    expect(await inProcess(file, (journal) => listPendingApprovals(journal, { runId: "p" }))).toHaveLength(2);

    const second = refundChain("fan-out");
    const approvals = { [approvalKey(children[0] ?? "", STEP)]: true, [approvalKey(children[1] ?? "", STEP)]: false };
    const out = await inProcess(file, (journal) => second.planner.run({ runId: "p", journal, approvals }));
    expect(second.refunds).toEqual([{ order: "A-7" }]);
    expect(out.content).toContain("refunded");
    expect(out.content).toContain("declined");
  });

  it("still answers the parent's own call by its plain step id, or keyed by its run", async () => {
    const file = join(dir, "own.db");
    const refunds: unknown[] = [];
    const make = () =>
      agentLoop$({
        id: "solo",
        model: scriptedModel(({ turn }) =>
          turn === 0
            ? { toolCalls: [{ id: "r", name: "refund", input: { order: "B-1" } }] }
            : { content: "ok", toolCalls: [] },
        ),
        tools: { refund: { description: "refunds", requiresApproval: true, execute: (i: unknown) => refunds.push(i) } },
      });
    const e = await inProcess(file, (journal) =>
      make()
        .run({ runId: "s", journal, input: "go" })
        .catch((x) => x),
    );
    expect(e.run.pendingApprovals).toEqual([expect.objectContaining({ stepId: "solo#turn:0:tool:0" })]);
    const out = await inProcess(file, (journal) =>
      make().run({ runId: "s", journal, approvals: { "solo#turn:0:tool:0": true } }),
    );
    expect(out.content).toBe("ok");
    expect(refunds).toEqual([{ order: "B-1" }]);
    // Keyed by approvalKey too: the run's own call, named by its run.
    await inProcess(file, (journal) =>
      make()
        .run({ runId: "t", journal, input: "go" })
        .catch((x) => x),
    );
    const keyed = await inProcess(file, (journal) =>
      make().run({ runId: "t", journal, approvals: { [approvalKey("t", "solo#turn:0:tool:0")]: true } }),
    );
    expect(keyed.content).toBe("ok");
    expect(refunds).toHaveLength(2);
  });
});
