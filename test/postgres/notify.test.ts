import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type OpenJournal, readJournal } from "../../src/events/journal.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { openPostgresJournal, startWorker, submitRun } from "../../src/postgres.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { dropSchema, freshSchema, PG_URL, sleep, sql, until } from "./pg.ts";

/** One turn with a tool call that takes `workMs`, then an answer. */
const loopOf = (id: string, workMs = 0) =>
  agentLoop$({
    id,
    model: scriptedModel(({ turn }) =>
      turn === 0 ? { toolCalls: [{ id: "c", name: "work", input: {} }] } : { content: "ok", toolCalls: [] },
    ),
    tools: { work: { description: "works", execute: () => sleep(workMs).then(() => ({ done: true })) } },
  });

// The poll interval is a minute: a run claimed within seconds was claimed on its announcement.
const POLL_MS = 60_000;

// Skipped without LOOM_PG_URL (store.test.ts prints the one line saying so).
describe.skipIf(PG_URL === undefined)("workers wake on NOTIFY", () => {
  const url = PG_URL as string;
  const schema = freshSchema("notify");
  const app = `loom-notify-${randomBytes(4).toString("hex")}`;
  let journal: OpenJournal; // the submitter's
  let workerJournal: OpenJournal; // the workers', its connections named `app`
  const completed = (runId: string) => async () => (await readJournal(journal, runId)).at(-1)?.type === "run.completed";
  const listening = async () =>
    (await sql(`SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'`, [app])).length ===
    1;

  beforeAll(async () => {
    journal = openPostgresJournal(url, { schema });
    workerJournal = openPostgresJournal(url, { schema, pool: { application_name: app } });
    await journal.store.listRuns();
  });
  afterAll(async () => {
    await Promise.all([journal.close(), workerJournal.close()]);
    await dropSchema(schema);
  });

  it("claims a submitted run at once, long before its next poll", async () => {
    const loop = loopOf("n");
    const worker = startWorker({ journal: workerJournal, loops: { n: loop }, pollMs: POLL_MS, onError: () => {} });
    try {
      await until("the worker to listen", listening);
      await sleep(100); // its first look (an empty queue) is over: it naps for a minute
      await submitRun(journal, { runId: "first", loop, input: "x" });
      await until("the run to complete", completed("first"), 10_000);
      await submitRun(journal, { runId: "second", loop, input: "x" });
      await until("the second run to complete", completed("second"), 10_000);
    } finally {
      await worker.stop();
    }
  });

  it("a run handed back by a stopping worker is claimed at once by a listening one", async () => {
    const loop = loopOf("h", 400);
    const a = startWorker({ journal: workerJournal, loops: { h: loop }, pollMs: POLL_MS, onError: () => {} });
    await until("a to listen", listening);
    await submitRun(journal, { runId: "handed", loop, input: "x" });
    await until("a to take it", async () => a.active.length === 1);
    const b = startWorker({ journal: workerJournal, loops: { h: loop }, pollMs: POLL_MS, onError: () => {} });
    await sleep(100); // b's first look found nothing due: it naps for a minute
    await a.stop({ abort: true });
    try {
      await until("b to finish the run", completed("handed"), 10_000);
    } finally {
      await b.stop();
    }
  });

  it("listens again after its connections are killed, and still claims on announcement", async () => {
    const loop = loopOf("r");
    const errors: unknown[] = [];
    const worker = startWorker({
      journal: workerJournal,
      loops: { r: loop },
      pollMs: POLL_MS,
      onError: (e) => errors.push(e),
    });
    try {
      await until("the worker to listen", listening);
      const killed = await sql<{ pid: number }>(
        // MATERIALIZED: the filter runs first, so only the worker's own connections are terminated.
        `WITH mine AS MATERIALIZED (SELECT pid FROM pg_stat_activity WHERE application_name = $1)
         SELECT pid FROM mine WHERE pg_terminate_backend(pid)`,
        [app],
      );
      expect(killed.length).toBeGreaterThanOrEqual(1);
      await until("the worker to listen again", listening);
      await sleep(300); // the look that followed the reconnection is over
      await submitRun(journal, { runId: "after-outage", loop, input: "x" });
      await until("the run to complete", completed("after-outage"), 10_000);
    } finally {
      await worker.stop();
    }
  });
});
