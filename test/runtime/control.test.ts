import { describe, expect, it } from "vitest";
import { openSqliteJournal, readJournal } from "../../src/events/journal.ts";
import { isAgentInterruptedError } from "../../src/runtime/base/errors.ts";
import { isApprovalRefusedError, listPendingApprovals, recordApproval } from "../../src/runtime/control/operations.ts";
import { tempDir } from "../events/tmp.ts";
import { jsonJournal } from "../support/loop.ts";
import { startWorker } from "../support/processes.ts";
import { approvalLoop, REFUND_STEP } from "./workers/approvalLoop.ts";

const SCRIPT = "test/runtime/workers/approvalProcess.ts";

const rejection = (p: Promise<unknown>) =>
  p.then(
    () => {
      throw new Error("expected a rejection");
    },
    (e: unknown) => e,
  );

/** Runs one step of the approval test in its own process and returns the JSON it printed. */
async function inProcess(args: string[]): Promise<unknown> {
  const child = startWorker(SCRIPT, args);
  const line = await child.waitFor((l) => l.startsWith("{") || l.startsWith("["), `output of ${args[0]}`, 60_000);
  const { code } = await child.exited;
  expect(code, child.stderr()).toBe(0);
  return JSON.parse(line);
}

describe("approvals from anywhere", () => {
  it("lists in one process, approves in another, resumes in a third (SQLite)", async () => {
    const tmp = tempDir("loom-control-");
    const path = tmp.file("loom.db");
    try {
      const journal = openSqliteJournal(path);
      const { loop } = approvalLoop();
      const stopped = await rejection(loop.run({ runId: "order-1", journal, input: "refund o-1" }));
      expect(isAgentInterruptedError(stopped) && stopped.run.reason).toBe("approval-pending");
      await journal.close();

      const listed = (await inProcess(["list", path])) as { runId: string; stepId: string; inputDigest: string }[];
      expect(listed).toEqual([
        expect.objectContaining({
          runId: "order-1",
          stepId: REFUND_STEP,
          toolName: "refund",
          input: { orderId: "o-1", cents: 500 },
          requestedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
        }),
      ]);
      expect(listed[0]?.inputDigest).toMatch(/^[0-9a-f]{64}$/);
      expect(await inProcess(["approve", path, "order-1", REFUND_STEP, "ana"])).toMatchObject({
        approved: true,
        toolName: "refund",
      });
      expect(await inProcess(["resume", path, "order-1"])).toEqual({
        content: 'tool said {"refunded":500}',
        ran: [{ orderId: "o-1", cents: 500 }],
      });

      const after = openSqliteJournal(path);
      const decision = (await readJournal(after, "order-1")).find(
        (e) => e.type === "decision.recorded" && e.data.decisionId === `${REFUND_STEP}:approval`,
      );
      expect(decision?.data).toMatchObject({
        source: "approval",
        choice: { approved: true, inputDigest: listed[0]?.inputDigest, by: "ana" },
      });
      expect(await listPendingApprovals(after)).toEqual([]);
      await after.close();
    } finally {
      tmp.remove();
    }
  }, 120_000);

  it("refuses a second decision, another input and a step that does not wait, and journals nothing", async () => {
    const journal = jsonJournal();
    const { loop, ran } = approvalLoop();
    await rejection(loop.run({ runId: "r", journal, input: "refund" }));
    const before = (await readJournal(journal, "r")).length;
    const mismatch = await rejection(
      recordApproval(journal, "r", REFUND_STEP, { approved: true, inputDigest: "0".repeat(64) }),
    );
    expect(isApprovalRefusedError(mismatch) && mismatch.code).toBe("approvalInputMismatch");
    const unknown = await rejection(recordApproval(journal, "r", "shop#turn:0:tool:7", { approved: true }));
    expect(isApprovalRefusedError(unknown) && unknown.code).toBe("approvalUnknownStep"); // no call 7 (issue 36)
    expect((await readJournal(journal, "r")).length).toBe(before);

    await recordApproval(journal, "r", REFUND_STEP, { approved: false, reason: "too much", by: "bo" });
    const second = await rejection(recordApproval(journal, "r", REFUND_STEP, { approved: true }));
    expect(isApprovalRefusedError(second) && second.code).toBe("approvalDecided");
    expect((second as Error).message).toContain("declined by bo");

    // The decline is what the model is fed on resume; the tool never ran.
    const out = await loop.run({ runId: "r", journal });
    expect(out.content).toBe(
      'tool said {"error":"approval-declined","message":"the call to refund was declined: too much"}',
    );
    expect(ran).toEqual([]);
  });

  it("run({ approvals }) still answers in-process", async () => {
    const journal = jsonJournal();
    const { loop, ran } = approvalLoop();
    await rejection(loop.run({ runId: "r", journal, input: "refund" }));
    await loop.run({ runId: "r", journal, approvals: { [REFUND_STEP]: true } });
    expect(ran).toHaveLength(1);
  });
});

describe("approvalTimeoutMs", () => {
  it("declines an approval that expired while no process ran, when the run resumes", async () => {
    const journal = jsonJournal();
    const { loop, ran } = approvalLoop({ approvalTimeoutMs: 200 });
    await rejection(loop.run({ runId: "r", journal, input: "refund" }));
    const [pending] = await listPendingApprovals(journal, { runId: "r" });
    expect(pending).toBeDefined();
    const asked = Date.parse(pending?.requestedAt ?? "");
    // The deadline is taken when the approval was asked, requestedAt when its entry was written
    // (later on a loaded machine): 200 ms less that delay.
    expect(Date.parse(pending?.expiresAt ?? "") - asked).toBeGreaterThanOrEqual(150);
    expect(Date.parse(pending?.expiresAt ?? "") - asked).toBeLessThanOrEqual(260);
    // Nobody runs the loop while the deadline passes.
    await new Promise((r) => setTimeout(r, 260));
    const late = await rejection(recordApproval(journal, "r", REFUND_STEP, { approved: true }));
    expect(isApprovalRefusedError(late) && late.code).toBe("approvalExpired");
    // A new process (a fresh loop) resumes it: declined, even with an answer given now.
    const fresh = approvalLoop({ approvalTimeoutMs: 200 });
    const out = await fresh.loop.run({ runId: "r", journal, approvals: { [REFUND_STEP]: true } });
    expect(out.content).toMatch(/^tool said \{"error":"approval-expired","message":"the call to refund was declined/);
    expect(fresh.ran).toEqual([]);
    expect(ran).toEqual([]);
    const entries = await readJournal(journal, "r");
    expect(entries.find((e) => e.type === "call.settled")?.data).toMatchObject({
      stepId: REFUND_STEP,
      reason: "approval-expired",
    });
    expect(
      entries.find((e) => e.type === "decision.recorded" && e.data.decisionId === `${REFUND_STEP}:approval`)?.data,
    ).toMatchObject({ choice: { approved: false, reason: "approval-expired" } });
  });

  it("keeps the first request's time across resumes that leave it pending", async () => {
    const journal = jsonJournal();
    const { loop } = approvalLoop({ approvalTimeoutMs: 60_000 });
    await rejection(loop.run({ runId: "r", journal, input: "refund" }));
    const [first] = await listPendingApprovals(journal);
    await new Promise((r) => setTimeout(r, 20));
    await rejection(loop.run({ runId: "r", journal }));
    const [second] = await listPendingApprovals(journal);
    expect(second?.requestedAt).toBe(first?.requestedAt);
    expect(second?.expiresAt).toBe(first?.expiresAt);
  });

  it("counts the expiry on the run's clock (RunOptions.now), as waits do, not on wall time", async () => {
    const DAY = 86_400_000;
    const T0 = Date.parse("2020-01-01T00:00:00.000Z"); // years before wall time: Date.now() would expire it at once
    const journal = jsonJournal();
    const { loop, ran } = approvalLoop({ approvalTimeoutMs: 3 * DAY });
    await rejection(loop.run({ runId: "r", journal, input: "refund", now: () => T0 }));
    const [pending] = await listPendingApprovals(journal, { runId: "r" });
    expect(pending?.expiresAt).toBe(new Date(T0 + 3 * DAY).toISOString());

    // Two fake days on: not expired, whatever the wall clock says. The run waits on.
    const early = await rejection(loop.run({ runId: "r", journal, now: () => T0 + 2 * DAY }));
    expect(isAgentInterruptedError(early) && early.run.reason).toBe("approval-pending");
    expect(await listPendingApprovals(journal, { runId: "r" })).toHaveLength(1);

    // At the fake expiry: an answer is refused, nothing journaled, and the resume declines the call.
    const before = (await readJournal(journal, "r")).length;
    const late = await rejection(
      recordApproval(journal, "r", REFUND_STEP, { approved: true, now: () => T0 + 3 * DAY }),
    );
    expect(isApprovalRefusedError(late) && late.code).toBe("approvalExpired");
    expect((await readJournal(journal, "r")).length).toBe(before);
    const out = await loop.run({ runId: "r", journal, now: () => T0 + 3 * DAY, approvals: { [REFUND_STEP]: true } });
    expect(out.content).toContain(`no one approved it before ${new Date(T0 + 3 * DAY).toISOString()}`);
    expect(ran).toEqual([]);
  });
});
