import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { openSqliteJournal, readJournal, recordApproval } from "../../src/index.ts";
import { approvalLoop, REFUND_STEP } from "../runtime/workers/approvalLoop.ts";
import { loom, tempDir } from "./support.ts";

const dir = tempDir("loom-cli-control-");
let files = 0;

/** A journal file with two runs waiting for approval of the refund (`order-1`, `order-2`). */
async function waitingJournal(): Promise<string> {
  const db = join(dir, `control-${files++}.db`);
  const journal = openSqliteJournal(db);
  try {
    const { loop } = approvalLoop({ approvalTimeoutMs: 3_600_000 });
    for (const runId of ["order-1", "order-2"]) await loop.run({ runId, journal, input: "refund" }).catch(() => {});
  } finally {
    await journal.close();
  }
  return db;
}

const lastOf = async (db: string, runId: string) => {
  const journal = openSqliteJournal(db);
  try {
    return (await readJournal(journal, runId)).at(-1);
  } finally {
    await journal.close();
  }
};

describe("loom approvals / approve / deny", () => {
  it("lists what waits, as a table and as JSON", async () => {
    const db = await waitingJournal();
    const text = await loom(dir, ["approvals", "--db", db]);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain(REFUND_STEP);
    expect(text.stdout).toContain("order-2");
    const json = await loom(dir, ["approvals", "--db", db, "--run", "order-1", "--json"]);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual([
      expect.objectContaining({
        runId: "order-1",
        stepId: REFUND_STEP,
        toolName: "refund",
        expiresAt: expect.any(String),
      }),
    ]);
  });

  it("approves with --run, asks for it when the step waits in several runs, denies with a reason", async () => {
    const db = await waitingJournal();
    const ambiguous = await loom(dir, ["approve", REFUND_STEP, "--db", db]);
    expect(ambiguous.code).toBe(1);
    expect(ambiguous.stderr).toContain("pass --run <runId>");
    const ok = await loom(dir, ["approve", REFUND_STEP, "--run", "order-1", "--by", "ana", "--db", db, "--json"]);
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.stdout)).toMatchObject({ runId: "order-1", approved: true });
    expect(await lastOf(db, "order-1")).toMatchObject({
      type: "decision.recorded",
      data: { choice: { approved: true, by: "ana" } },
    });
    // Now only order-2 waits: no --run needed.
    const denied = await loom(dir, ["deny", REFUND_STEP, "--reason", "duplicate", "--db", db]);
    expect(denied.code).toBe(0);
    expect(denied.stdout).toContain("declined refund");
    expect(await lastOf(db, "order-2")).toMatchObject({ type: "call.settled", data: { reason: "approval-declined" } });
    const again = await loom(dir, ["approve", REFUND_STEP, "--run", "order-1", "--db", db, "--json"]);
    expect(again.code).toBe(1);
    expect(JSON.parse(again.stdout)).toMatchObject({ error: { code: "approvalDecided" } });
    const none = await loom(dir, ["approvals", "--db", db]);
    expect(none.stdout).toContain("no tool call waits for approval");
  });

  it("denies without a reason (issue 30): the model is told the call was declined", async () => {
    const db = await waitingJournal();
    const denied = await loom(dir, ["deny", REFUND_STEP, "--run", "order-1", "--db", db]);
    expect(denied.code, denied.stderr).toBe(0);
    expect(denied.stdout).toContain("declined refund");
    expect(await lastOf(db, "order-1")).toMatchObject({
      type: "call.settled",
      data: {
        reason: "approval-declined",
        result: { error: "approval-declined", message: "the call to refund was declined" },
      },
    });
    const help = await loom(dir, ["deny", "--help"]);
    expect(help.stdout).toMatch(/--reason <text> +why, optional/);
  });
});

describe("loom show, loom cancel, loom fork", () => {
  it("show <runId> tells the run's story; show <stepId> of a waiting step says it waits", async () => {
    const db = await waitingJournal();
    const story = await loom(dir, ["show", "order-1", "--db", db]);
    expect(story.code).toBe(0);
    expect(story.stdout).toMatch(/turn 0 {2}model completed/);
    expect(story.stdout).toContain(`tool refund ${REFUND_STEP}: waiting for approval`);
    expect(story.stdout).toContain("stopped interrupted: approval-pending");
    const json = await loom(dir, ["show", "order-1", "--db", db, "--json"]);
    const parsed = JSON.parse(json.stdout);
    expect(parsed.story.turns[0].tools[0]).toMatchObject({ toolName: "refund", status: "waiting-for-approval" });
    expect(parsed.story.ended).toMatchObject({ type: "interrupted", reason: "approval-pending" });
    const step = await loom(dir, ["show", REFUND_STEP, "--run", "order-1", "--db", db]);
    expect(step.code).toBe(0);
    expect(step.stdout).toContain("waiting for approval since");
    const stepJson = await loom(dir, ["show", REFUND_STEP, "--run", "order-1", "--db", db, "--json"]);
    expect(JSON.parse(stepJson.stdout)).toMatchObject({ status: "waiting-for-approval", input: { cents: 500 } });
  });

  it("show <runId> says an approval was given with an edited input, beside the model's, and for the rest of the run", async () => {
    const db = await waitingJournal();
    const journal = openSqliteJournal(db);
    try {
      await recordApproval(journal, "order-1", REFUND_STEP, {
        approved: true,
        by: "ana",
        input: { orderId: "o-1", cents: 250 },
        scope: "run",
      });
      const { loop, ran } = approvalLoop({ approvalTimeoutMs: 3_600_000 });
      await loop.run({ runId: "order-1", journal });
      expect(ran).toEqual([{ orderId: "o-1", cents: 250 }]);
    } finally {
      await journal.close();
    }
    const story = await loom(dir, ["show", "order-1", "--db", db]);
    expect(story.stdout).toContain(
      'approved by ana with an edited input {"orderId":"o-1","cents":250} (the model asked {"orderId":"o-1","cents":500}) for the rest of the run',
    );
    const json = JSON.parse((await loom(dir, ["show", "order-1", "--db", db, "--json"])).stdout);
    expect(json.story.turns[0].tools[0].approval).toMatchObject({
      by: "ana",
      editedInput: { cents: 250 },
      scope: "run",
    });
  });

  it("cancels a run, then refuses a finished one; forks a run, and refuses a bad fork point", async () => {
    const db = await waitingJournal();
    const cancelled = await loom(dir, ["cancel", "order-1", "--reason", "not needed", "--db", db, "--json"]);
    expect(cancelled.code).toBe(0);
    expect(JSON.parse(cancelled.stdout)).toEqual({ runId: "order-1", status: "cancelled" });
    expect(await lastOf(db, "order-1")).toMatchObject({ type: "run.cancelled", data: { reason: "not needed" } });
    const shown = await loom(dir, ["show", "order-1", "--db", db]);
    expect(shown.stdout).toContain("stopped cancelled: not needed");
    expect((await loom(dir, ["runs", "--db", db])).stdout).toMatch(/order-1 .* cancelled .* cancelled: not needed/);
    const runs = await loom(dir, ["runs", "--db", db, "--json"]);
    expect(JSON.parse(runs.stdout).find((r: { runId: string }) => r.runId === "order-1").status).toBe("cancelled");
    const unknown = await loom(dir, ["cancel", "nope", "--db", db]);
    expect(unknown.code).toBe(1);

    const forked = await loom(dir, ["fork", "order-1", "--at", REFUND_STEP, "--as", "order-1b", "--db", db]);
    expect(forked.code, forked.stderr).toBe(1); // nothing of that step was journaled: it never ran
    const bySeq = await loom(dir, ["fork", "order-2", "--at", "2", "--as", "order-2b", "--db", db, "--json"]);
    expect(bySeq.code).toBe(0);
    expect(JSON.parse(bySeq.stdout)).toMatchObject({ runId: "order-2b", forkedFrom: { runId: "order-2", seq: 2 } });
    const resumed = approvalLoop();
    const journal = openSqliteJournal(db);
    try {
      await expect(resumed.loop.run({ runId: "order-2b", journal })).rejects.toMatchObject({
        code: "agentInterrupted",
      });
    } finally {
      await journal.close();
    }
    const missing = await loom(dir, ["fork", "order-2", "--db", db]);
    expect(missing.code).toBe(2);
  });

  it("has --help for each command", async () => {
    for (const command of ["approvals", "approve", "deny", "cancel", "fork"]) {
      const help = await loom(dir, [command, "--help"]);
      expect(help.code).toBe(0);
      expect(help.stdout).toContain(`Usage: loom ${command}`);
    }
  });
});
