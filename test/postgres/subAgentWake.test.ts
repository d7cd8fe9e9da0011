import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type OpenJournal, readJournal } from "../../src/events/journal.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { openPostgresJournal, POSTGRES_SCHEMA_VERSION, startWorker, submitRun } from "../../src/postgres.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { listPendingApprovals, recordApproval } from "../../src/runtime/control/operations.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { agentTool } from "../../src/runtime/run/agentTool.ts";
import { refundChain } from "../support/refundChain.ts";
import { dropSchema, freshSchema, PG_URL, sleep, sql, until } from "./pg.ts";

// Skipped without LOOM_PG_URL (store.test.ts prints the one line saying so).
describe.skipIf(PG_URL === undefined)("a sub-agent's approval wakes its top-level run on PostgreSQL", () => {
  const schema = freshSchema("subwake");
  let journal: OpenJournal; // the workers'
  let operator: OpenJournal; // another process's handle: the person answering
  const last = async (runId: string) => (await readJournal(journal, runId)).at(-1)?.type;
  const queued = async (runId: string) =>
    sql<{ woken: boolean }>(`SELECT woken FROM "${schema}".loom_leases WHERE run_id = $1`, [runId]);

  beforeAll(() => {
    journal = openPostgresJournal(PG_URL as string, { schema });
    operator = openPostgresJournal(PG_URL as string, { schema });
  });
  afterAll(async () => {
    await journal.close();
    await operator.close();
    await dropSchema(schema);
  });

  for (const shape of ["one", "two-deep"] as const) {
    it(`a worker that knows only the parent's loop completes the chain (${shape}), no model call repeated`, async () => {
      const chain = refundChain(shape);
      const runId = `chain-${shape}`;
      // A long poll: only the announcement of the approval can make the worker look again in time.
      const worker = startWorker({
        journal,
        loops: { planner: chain.planner },
        pollMs: 60_000,
        leaseMs: 2_000,
        onError: () => {},
      });
      try {
        await submitRun(journal, { runId, loop: chain.planner, input: "refund A-7" });
        await until("the approval to be pending", async () => (await listPendingApprovals(operator)).length === 1);
        await until("the worker to let the run go", async () => (await queued(runId)).length === 0);
        const [pending] = await listPendingApprovals(operator, { runId });
        expect(pending?.rootRunId).toBe(runId);
        expect(pending?.runId).not.toBe(runId);
        const before = chain.calls();
        await recordApproval(operator, pending!.runId, pending!.stepId, { approved: true, by: "ops" });
        await until("the top-level run to complete", async () => (await last(runId)) === "run.completed", 10_000);
        expect(await last(pending!.runId)).toBe("run.completed");
        expect(chain.refunds).toEqual([{ order: "A-7" }]);
        // Each model answered each turn once: turn 0 before the approval, the last turn after it.
        expect(before).toEqual(shape === "one" ? [1, 0, 1] : [1, 1, 1]);
        expect(chain.calls()).toEqual(shape === "one" ? [2, 0, 2] : [2, 2, 2]);
        // Nothing stays queued: neither the sub-agent's run nor a woken top-level run that is done.
        await until(
          "the queue to empty",
          async () => (await sql(`SELECT 1 FROM "${schema}".loom_leases`)).length === 0,
        );
      } finally {
        await worker.stop();
      }
    }, 60_000);
  }

  it("a woken run that still waits (another sub-agent's approval) stops again once, then the last answer completes it", async () => {
    const chain = refundChain("fan-out");
    const runId = "fan";
    const worker = startWorker({ journal, loops: { planner: chain.planner }, pollMs: 60_000, onError: () => {} });
    const interruptions = async () =>
      (await readJournal(journal, runId)).filter((e) => e.type === "run.interrupted").length;
    try {
      await submitRun(journal, { runId, loop: chain.planner, input: "refund A-7 twice" });
      await until("both approvals to be pending", async () => (await listPendingApprovals(operator)).length === 2);
      await until("the worker to let the run go", async () => (await queued(runId)).length === 0);
      const [first, second] = await listPendingApprovals(operator, { runId });
      await recordApproval(operator, first!.runId, first!.stepId, { approved: true });
      await until("one refund", async () => chain.refunds.length === 1);
      await until("the run to stop again", async () => (await interruptions()) === 2);
      await until("the queue to empty", async () => (await queued(runId)).length === 0);
      await sleep(300); // nothing claims it again: the flag went with the claim
      expect(await interruptions()).toBe(2);
      expect(await last(runId)).toBe("run.interrupted");
      expect(await listPendingApprovals(operator, { runId })).toMatchObject([{ runId: second!.runId }]);
      await recordApproval(operator, second!.runId, second!.stepId, { approved: true });
      await until("the run to complete", async () => (await last(runId)) === "run.completed");
      expect(chain.refunds).toHaveLength(2);
      expect(chain.calls()).toEqual([2, 0, 4]); // each refunder's two turns, the planner's two: none again
    } finally {
      await worker.stop();
    }
  }, 60_000);

  // A wrapped store takes the worker's one-by-one path (finishAndRelease / waitForApproval), Loom's own the fast one.
  for (const path of ["own store", "wrapped store"] as const)
    it(`an approval recorded while the worker still runs the parent (a sibling call going) is not lost (${path})`, async () => {
      let release: () => void = () => {};
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      let slowStarted = false;
      const slow: Tool = {
        description: "takes its time",
        execute: async () => {
          slowStarted = true;
          await held;
          return "slow done";
        },
      };
      const refunds: unknown[] = [];
      const refunder = agentLoop$({
        id: "refunder",
        model: scriptedModel(({ turn }) =>
          turn === 0
            ? { toolCalls: [{ id: "r", name: "refund", input: { order: "B-2" } }] }
            : { content: "refunded", toolCalls: [] },
        ),
        tools: {
          refund: {
            description: "refunds an order",
            requiresApproval: true,
            execute: (input) => {
              refunds.push(input);
              return "ok";
            },
          },
        },
      });
      const planner = agentLoop$({
        id: "planner",
        model: scriptedModel(({ turn }) =>
          turn === 0
            ? {
                toolCalls: [
                  { id: "d", name: "delegate", input: { prompt: "B-2" } },
                  { id: "s", name: "slow", input: {} },
                ],
              }
            : { content: "all done", toolCalls: [] },
        ),
        tools: { delegate: agentTool(refunder, { description: "refunds" }), slow },
      });
      const runId = `sibling-${path === "own store" ? "own" : "wrapped"}`;
      const workerJournal = path === "own store" ? journal : { ...journal, store: Object.create(journal.store) };
      const worker = startWorker({
        journal: workerJournal,
        loops: { planner },
        pollMs: 60_000,
        leaseMs: 2_000,
        onError: () => {},
      });
      try {
        await submitRun(journal, { runId, loop: planner, input: "refund B-2" });
        const child = `${runId}/planner#turn:0:tool:0`;
        await until(
          "the sub-agent to wait",
          async () => (await listPendingApprovals(operator, { runId: child })).length > 0,
        );
        await until("the slow call to start", async () => slowStarted);
        // The worker still runs the parent (its slow call): the answer marks the row it holds.
        await recordApproval(operator, child, "refunder#turn:0:tool:0", { approved: true });
        expect(await queued(runId)).toEqual([{ woken: true }]);
        expect(await last(runId)).not.toBe("run.interrupted");
        release();
        await until("the top-level run to complete", async () => (await last(runId)) === "run.completed", 10_000);
        expect(refunds).toEqual([{ order: "B-2" }]);
        const entries = await readJournal(journal, runId);
        // It stopped once for the approval it no longer waited for, then was resumed and finished.
        expect(entries.filter((e) => e.type === "run.interrupted").map((e) => e.data.reason)).toEqual([
          "approval-pending",
        ]);
        await until("the queue to empty", async () => (await queued(runId)).length === 0);
      } finally {
        release();
        await worker.stop();
      }
    }, 60_000);

  it("migrates a version 3 database to version 4 in place (the queue's woken column, the run ids' C index), and wakes a run parked under 3", async () => {
    const v3 = freshSchema("subwake_v3");
    const url = PG_URL as string;
    const chain = refundChain("one");
    const runId = "parked";
    try {
      const old = openPostgresJournal(url, { schema: v3 });
      const first = startWorker({ journal: old, loops: { planner: chain.planner }, pollMs: 50, onError: () => {} });
      try {
        await submitRun(old, { runId, loop: chain.planner, input: "refund A-7" });
        await until("the approval to be pending", async () => (await listPendingApprovals(old)).length === 1);
        await until("the worker to let the run go", async () => first.active.length === 0);
      } finally {
        await first.stop();
        await old.close();
      }
      // Version 3's tables: version 4's without the column, a run queued for later in them.
      await sql(
        `INSERT INTO "${v3}".loom_leases (run_id, loop_id, expires_at) VALUES ('later', 'x', now() + interval '1 hour')`,
      );
      await sql(`ALTER TABLE "${v3}".loom_leases DROP COLUMN woken`);
      await sql(`DROP INDEX "${v3}".loom_runs_id_c`);
      await sql(`UPDATE "${v3}".loom_meta SET value = '3' WHERE key = 'schema_version'`);
      // Two processes open it at once: one migrates, the other waits for it (the schema lock).
      const reopened = openPostgresJournal(url, { schema: v3 });
      const answering = openPostgresJournal(url, { schema: v3 });
      try {
        const [pending] = await listPendingApprovals(answering, { runId });
        await listPendingApprovals(reopened);
        expect(await sql(`SELECT value FROM "${v3}".loom_meta WHERE key = 'schema_version'`)).toEqual([
          { value: String(POSTGRES_SCHEMA_VERSION) },
        ]);
        expect(await sql(`SELECT run_id, woken FROM "${v3}".loom_leases`)).toEqual([{ run_id: "later", woken: false }]);
        const index = `SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = 'loom_runs_id_c'`;
        expect((await sql(index, [v3]))[0]?.indexdef).toContain('(run_id COLLATE "C")');
        // The sub-agent runs of the parked run are found by prefix, through that index.
        expect((await reopened.store.listRuns({ prefix: `${runId}/` })).map((r) => r.runId)).toEqual([pending!.runId]);
        const worker = startWorker({
          journal: reopened,
          loops: { planner: chain.planner },
          pollMs: 60_000,
          onError: () => {},
        });
        try {
          await recordApproval(answering, pending!.runId, pending!.stepId, { approved: true });
          await until(
            "the run to complete",
            async () => (await readJournal(reopened, runId)).at(-1)?.type === "run.completed",
          );
          expect(chain.calls()).toEqual([2, 0, 2]);
        } finally {
          await worker.stop();
        }
      } finally {
        await reopened.close();
        await answering.close();
      }
    } finally {
      await dropSchema(v3);
    }
  }, 60_000);
});
