import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isRunCancelledError } from "../../src/core/errors.ts";
import { type OpenJournal, readJournal } from "../../src/events/journal.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { openPostgresJournal, startWorker, submitRun } from "../../src/postgres.ts";
import { cancelRun, listPendingApprovals, recordApproval } from "../../src/runtime/control/operations.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { approvalLoop, REFUND_STEP } from "../runtime/workers/approvalLoop.ts";
import { dropSchema, freshSchema, PG_URL, until } from "./pg.ts";

// Skipped without LOOM_PG_URL (store.test.ts prints the one line saying so).
describe.skipIf(PG_URL === undefined)("operating runs on PostgreSQL", () => {
  const schema = freshSchema("control");
  let journal: OpenJournal;
  const last = async (runId: string) => (await readJournal(journal, runId)).at(-1)?.type;

  beforeAll(() => {
    journal = openPostgresJournal(PG_URL as string, { schema });
  });
  afterAll(async () => {
    await journal.close();
    await dropSchema(schema);
  });

  it("a worker resumes an approved run by itself", async () => {
    const { loop, ran } = approvalLoop();
    // A long poll: only the announcement of the approval can make the worker look again in time.
    const worker = startWorker({ journal, loops: { shop: loop }, pollMs: 60_000, leaseMs: 2_000, onError: () => {} });
    try {
      await submitRun(journal, { runId: "pg-order", loop, input: "refund o-1" });
      await until("the approval to be pending", async () => (await listPendingApprovals(journal)).length === 1);
      await until("the worker to let the run go", async () => worker.active.length === 0);
      expect(ran).toEqual([]);
      await recordApproval(journal, "pg-order", REFUND_STEP, { approved: true, by: "ops" });
      await until("the run to complete", async () => (await last("pg-order")) === "run.completed");
      expect(ran).toEqual([{ orderId: "o-1", cents: 500 }]);
    } finally {
      await worker.stop();
    }
  }, 60_000);

  it("cancels a run a worker is running: the tool is aborted and the worker lets it go", async () => {
    let aborted: unknown;
    let started = false;
    const loop = agentLoop$({
      id: "slow",
      model: scriptedModel([{ toolCalls: [{ id: "c", name: "wait", input: {} }] }, { content: "no", toolCalls: [] }]),
      tools: {
        wait: {
          description: "waits until aborted",
          execute: (_input, { signal }) =>
            new Promise((_, reject) => {
              started = true;
              signal.addEventListener("abort", () => {
                aborted = signal.reason;
                reject(signal.reason);
              });
            }),
        },
      },
    });
    const worker = startWorker({ journal, loops: { slow: loop }, pollMs: 50, leaseMs: 600, onError: () => {} });
    try {
      await submitRun(journal, { runId: "pg-slow", loop, input: "go" });
      await until("the tool to start", async () => started);
      const result = await cancelRun(journal, "pg-slow", { reason: "stop", waitMs: 10_000 });
      expect(result.status).toBe("cancelled");
      expect(isRunCancelledError(aborted)).toBe(true);
      expect(await last("pg-slow")).toBe("run.cancelled");
      await until("the worker to let it go", async () => worker.active.length === 0);
    } finally {
      await worker.stop();
    }
  }, 60_000);

  it("a worker declines an approval that expired, by itself", async () => {
    const { loop, ran } = approvalLoop({ approvalTimeoutMs: 400 });
    const worker = startWorker({ journal, loops: { shop: loop }, pollMs: 50, leaseMs: 2_000, onError: () => {} });
    try {
      await submitRun(journal, { runId: "pg-expiring", loop, input: "refund o-1" });
      await until("the approval to be pending", async () => (await listPendingApprovals(journal)).length > 0);
      await until("the run to complete", async () => (await last("pg-expiring")) === "run.completed");
      const entries = await readJournal(journal, "pg-expiring");
      expect(entries.find((e) => e.type === "call.settled")?.data).toMatchObject({ reason: "approval-expired" });
      expect(ran).toEqual([]);
    } finally {
      await worker.stop();
    }
  }, 60_000);
});
