import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type OpenJournal, readJournal } from "../../src/events/journal.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { openPostgresJournal, startWorker, submitRun } from "../../src/postgres.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { deliverEvent } from "../../src/runtime/control/events.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { dropSchema, freshSchema, PG_URL, sleep, sql, until } from "./pg.ts";

/**
 * Durable waits on PostgreSQL (issue 31): a worker parks a waiting run (no owner, due at its wake
 * time) and claims it when due, also after a worker restart; an event delivered to a run whose
 * process is gone queues it, and a worker resumes it. Real (short) times: PostgreSQL's now()
 * decides when a parked run is due.
 */
describe.skipIf(PG_URL === undefined)("durable waits with startWorker", () => {
  const url = PG_URL as string;
  const schema = freshSchema("waits");
  let journal: OpenJournal;
  const types = async (runId: string) => (await readJournal(journal, runId)).map((e) => e.type);
  const completed = (runId: string) => async () => (await types(runId)).at(-1) === "run.completed";
  const lease = async (runId: string) =>
    (
      await sql<{ owner: string | null; due: boolean }>(
        `SELECT owner, expires_at <= now() AS due FROM "${schema}".loom_leases WHERE run_id = $1`,
        [runId],
      )
    )[0];

  beforeAll(() => {
    journal = openPostgresJournal(url, { schema });
  });
  afterAll(async () => {
    await journal.close();
    await dropSchema(schema);
  });

  function loopOf(id: string, tool: Tool["execute"]) {
    const executions: string[] = [];
    const waits: Tool = {
      description: "waits",
      execute: (input, ctx) => {
        executions.push(ctx.stepId);
        return tool(input, ctx);
      },
    };
    const model = scriptedModel(({ turn }) =>
      turn === 0 ? { toolCalls: [{ id: "w", name: "waits", input: {} }] } : { content: "done", toolCalls: [] },
    );
    return { loop: agentLoop$({ id, model, tools: { waits } }), executions };
  }

  it("parks a sleeping run and wakes it once when due, after a worker restart", async () => {
    const { loop, executions } = loopOf("nap", (_i, ctx) => ctx.sleep(1500));
    await submitRun(journal, { runId: "sleeper", loop, input: "nap" });
    const first = startWorker({ journal, loops: { nap: loop }, pollMs: 20, onError: () => {} });
    await until("the run to wait", async () => (await types("sleeper")).at(-1) === "run.interrupted");
    await sleep(100);
    await first.stop(); // the worker goes away while the run sleeps
    expect(await lease("sleeper")).toEqual({ owner: null, due: false }); // parked until its wake time
    const entries = await readJournal(journal, "sleeper");
    const interrupted = entries.at(-1);
    const detail = (interrupted?.data as { detail?: { expiresAt?: Record<string, string> } } | undefined)?.detail;
    const until_ = detail?.expiresAt?.["nap#turn:0:tool:0"] as string;

    const second = startWorker({ journal, loops: { nap: loop }, pollMs: 20, onError: () => {} });
    await until("the run to complete", completed("sleeper"));
    await second.stop();
    const after = await readJournal(journal, "sleeper");
    expect(after.filter((e) => e.type === "run.interrupted")).toHaveLength(1); // never resumed early
    const woke = after.find((e) => e.type === "frame.completed" && e.data.frameId === "nap#turn:0:tool:0");
    expect(woke?.data).toMatchObject({ output: { woke: until_ } });
    expect(Date.parse(String(woke?.meta.at))).toBeGreaterThanOrEqual(Date.parse(until_));
    expect(executions).toHaveLength(1);
  });

  it("resumes a run whose process is gone when its event is delivered", async () => {
    const tokens: string[] = [];
    const { loop, executions } = loopOf("pay", (_i, ctx) => {
      const wait = ctx.waitForEvent();
      tokens.push(wait.token);
      return wait;
    });
    await submitRun(journal, { runId: "payer", loop, input: "pay" });
    const first = startWorker({ journal, loops: { pay: loop }, pollMs: 20, onError: () => {} });
    await until("the run to wait", async () => (await types("payer")).at(-1) === "run.interrupted");
    await first.stop();
    expect(await lease("payer")).toBeUndefined(); // no time to wake at: only a delivery can

    const second = startWorker({ journal, loops: { pay: loop }, pollMs: 1000, onError: () => {} });
    await sleep(100);
    expect((await types("payer")).at(-1)).toBe("run.interrupted");
    await deliverEvent(journal, tokens[0] as string, { paid: true });
    await until("the run to complete", completed("payer"));
    await second.stop();
    expect(executions).toHaveLength(1);
    const out = await loop.run({ runId: "payer", journal });
    expect(out.toolCallLog[0]?.toolOutput).toEqual({ paid: true });
  });
});
