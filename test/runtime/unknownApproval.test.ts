import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  isApprovalRefusedError,
  type OpenJournal,
  openSqliteJournal,
  readJournal,
  recordApproval,
} from "../../src/index.ts";
import { cancelRun, forkRun } from "../../src/runtime/control/operations.ts";
import { startViewer } from "../../src/viewer/server.ts";
import { loom, tempDir } from "../cli/support.ts";
import { supportLoop, waitingRun } from "../viewer/support.ts";

const REFUND = "support#turn:1:tool:0"; // the call that waits
const TYPO = "support#turn:1:tool:7"; // no such call
const dir = tempDir("loom-unknown-approval-");
const db = join(dir, "approvals.db");
let journal: OpenJournal;
beforeAll(async () => {
  journal = openSqliteJournal(db);
  for (const runId of ["api-1", "run-1", "cli-1", "view-1"]) await waitingRun(journal, runId);
});
afterAll(() => journal?.close());

const refusal = async (p: Promise<unknown>) => {
  const e = await p.then(
    () => undefined,
    (error: unknown) => error,
  );
  expect(isApprovalRefusedError(e), String(e)).toBe(true);
  return e as Error & { code: string; runId: string; stepId: string };
};
const version = async (runId: string) => (await readJournal(journal, runId)).length;

describe("an approval for a step id no call has", () => {
  it("recordApproval refuses it by name (approvalUnknownStep), and still tells a call that does not wait apart", async () => {
    const before = await version("api-1");
    const e = await refusal(recordApproval(journal, "api-1", TYPO, { approved: true }));
    expect(e).toMatchObject({ code: "approvalUnknownStep", runId: "api-1", stepId: TYPO });
    expect(e.message).toContain(`run api-1 has no call ${TYPO}`);
    const notWaiting = await refusal(recordApproval(journal, "api-1", "support#turn:0:tool:0", { approved: true }));
    expect(notWaiting.code).toBe("approvalNotPending"); // lookup ran: a call, but it never waited
    expect(await version("api-1")).toBe(before);
  });

  it("loop.run({ approvals }) refuses an answer keyed by no waiting call before journaling anything, instead of stopping again", async () => {
    const before = await version("run-1");
    const e = await refusal(supportLoop().run({ runId: "run-1", journal, approvals: { [TYPO]: true } }));
    expect(e).toMatchObject({ code: "approvalUnknownStep", runId: "run-1", stepId: TYPO });
    expect(e.message).toContain(`waiting: ${REFUND}`);
    expect(await version("run-1")).toBe(before);
    // The right key runs the call; giving the same answers again later is harmless.
    const out = await supportLoop().run({ runId: "run-1", journal, approvals: { [REFUND]: true } });
    expect(out.content).toBe("refunded");
    await supportLoop().run({ runId: "run-1", journal, approvals: { [REFUND]: true } });
  });

  it("loom approve and loom deny exit 1 naming the error", async () => {
    for (const command of [
      ["approve", TYPO, "--run", "cli-1"],
      ["deny", TYPO, "--run", "cli-1", "--reason", "no"],
    ]) {
      const { code, stderr } = await loom(dir, [...command, "--db", db]);
      expect(code).toBe(1);
      expect(stderr).toContain(`run cli-1 has no call ${TYPO}`);
    }
  });

  it("the viewer answers 409 with the refusal, not a server error", async () => {
    const viewer = await startViewer({ journal, actions: { recordApproval, cancelRun, forkRun } });
    try {
      const res = await fetch(`${viewer.url}/runs/view-1/actions`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", origin: viewer.url },
        body: `action=approve&stepId=${encodeURIComponent(TYPO)}&confirmed=yes`,
        redirect: "manual",
      });
      expect(res.status).toBe(409);
      const page = await res.text();
      expect(page).toContain("Cannot do that");
      expect(page).toContain(`approvalUnknownStep: run view-1 has no call ${TYPO}`);
    } finally {
      await viewer.stop();
    }
  });
});
