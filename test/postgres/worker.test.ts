import { MockLanguageModelV3 } from "ai/test";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fromAiSdk } from "../../src/ai-sdk/aiSdk.ts";
import { isAgentLoopConfigError, isReplayDivergenceError } from "../../src/core/errors.ts";
import { createJournal, type OpenJournal, readJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { isNotPostgresJournalError, openPostgresJournal, startWorker, submitRun } from "../../src/postgres.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { type AgentLoop, agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { streamedAs } from "../support/aiSdkStream.ts";
import { dropSchema, freshSchema, PG_URL, sleep, sql, until } from "./pg.ts";

/** A loop `id`: turn 0 calls `work` (which takes `workMs`), turn 1 answers; `runs` lists the tool's executions. */
function loopOf(
  id: string,
  options: { readonly workMs?: number; readonly tool?: Partial<Tool>; readonly toolCallLog?: "lean" } = {},
) {
  const runs: string[] = [];
  const loop = agentLoop$({
    id,
    model: scriptedModel(({ turn }) =>
      turn === 0 ? { toolCalls: [{ id: "c", name: "work", input: {} }] } : { content: "ok", toolCalls: [] },
    ),
    tools: {
      work: {
        description: "works for a while",
        execute: async (_input, { stepId }) => {
          runs.push(stepId);
          await sleep(options.workMs ?? 0);
          return { done: true };
        },
        ...options.tool,
      },
    },
    ...(options.toolCallLog ? { toolCallLog: options.toolCallLog } : {}),
  });
  return { loop, runs };
}

// Skipped without LOOM_PG_URL (store.test.ts prints the one line saying so).
describe.skipIf(PG_URL === undefined)("submitRun and startWorker", () => {
  const url = PG_URL as string;
  const schema = freshSchema("worker");
  let journal: OpenJournal;
  const lease = async (runId: string) =>
    (
      await sql<{ owner: string | null; due: boolean; failures: number; last_error: string | null }>(
        `SELECT owner, expires_at <= now() AS due, failures, last_error FROM "${schema}".loom_leases WHERE run_id = $1`,
        [runId],
      )
    )[0];
  const types = async (runId: string) => (await readJournal(journal, runId)).map((e) => e.type);
  const completed = (runId: string) => async () => (await types(runId)).at(-1) === "run.completed";
  const work = (loops: Record<string, AgentLoop>, leaseMs = 600) =>
    startWorker({ journal, loops, leaseMs, pollMs: 10, onError: () => {} });

  beforeAll(() => {
    journal = openPostgresJournal(url, { schema });
  });
  afterAll(async () => {
    await journal.close();
    await dropSchema(schema);
  });

  it("submits a new run as exactly the run.started loop.run would write, once", async () => {
    const { loop } = loopOf("s", { toolCallLog: "lean" });
    await loop.run({ runId: "inline", input: "hello", journal });
    expect(await submitRun(journal, { runId: "queued", loop, input: "hello" })).toEqual({ started: true });
    expect(await submitRun(journal, { runId: "queued", loop, input: "hello" })).toEqual({ started: false });
    expect(await submitRun(journal, { runId: "queued", loop })).toEqual({ started: false });
    const [inline] = await readJournal(journal, "inline");
    expect(await readJournal(journal, "queued")).toEqual([{ ...inline, runId: "queued", meta: expect.anything() }]);
    expect(await lease("queued")).toMatchObject({ owner: null, due: true, failures: 0 });

    const worker = work({ s: loop });
    await until("the queued run to complete", completed("queued"));
    await worker.stop();
    expect(await types("queued")).toEqual(await types("inline"));
    expect(JSON.stringify(await loop.run({ runId: "queued", journal }))).toBe(
      JSON.stringify(await loop.run({ runId: "inline", journal })),
    );
    expect(await lease("queued")).toBeUndefined();
  });

  it("refuses a new run without input, another loop's run, another input, and a journal not on postgres", async () => {
    const { loop } = loopOf("s");
    const { loop: other } = loopOf("other");
    const why = (p: Promise<unknown>) =>
      p.then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(await why(submitRun(journal, { runId: "no-input", loop }))).toMatchObject({ code: "missingInput" });
    await submitRun(journal, { runId: "mine", loop, input: "a" });
    expect(isReplayDivergenceError(await why(submitRun(journal, { runId: "mine", loop: other })))).toBe(true);
    expect(await why(submitRun(journal, { runId: "mine", loop, input: "b" }))).toMatchObject({ code: "inputMismatch" });
    const memory = createJournal({ store: memoryStore() });
    expect(isNotPostgresJournalError(await why(submitRun(memory, { runId: "m", loop, input: "a" })))).toBe(true);
    expect(() => startWorker({ journal: memory, loops: { s: loop } })).toThrow(
      /needs a journal whose store is postgres/,
    );
    const e = (() => {
      try {
        startWorker({ journal, loops: { wrong: loop } });
      } catch (x) {
        return x;
      }
    })();
    expect(isAgentLoopConfigError(e)).toBe(true);
    await sql(`DELETE FROM "${schema}".loom_leases WHERE run_id = 'mine'`);
  });

  it("leaves runs waiting for an approval or the iteration limit to their caller, and never picks a completed run", async () => {
    const { loop: gated } = loopOf("gated", { tool: { requiresApproval: true } });
    const { loop: bounded } = agentLoopBounded();
    const { loop: done } = loopOf("done");
    await done.run({ runId: "finished", input: "x", journal });
    await submitRun(journal, { runId: "finished", loop: done });
    await submitRun(journal, { runId: "approval", loop: gated, input: "x" });
    await submitRun(journal, { runId: "limit", loop: bounded, input: "x" });
    const before = await types("finished");
    const worker = work({ gated, bounded, done });
    await until("both runs to interrupt", async () =>
      (await Promise.all([types("approval"), types("limit")])).every((t) => t.at(-1) === "run.interrupted"),
    );
    await sleep(200); // polls enough to have picked anything it would pick
    await worker.stop();
    expect((await types("approval")).filter((t) => t === "run.interrupted")).toHaveLength(1);
    expect((await types("limit")).filter((t) => t === "run.interrupted")).toHaveLength(1);
    expect(await types("finished")).toEqual(before);
    expect([await lease("approval"), await lease("limit"), await lease("finished")]).toEqual([
      undefined,
      undefined,
      undefined,
    ]);
  });

  it("hands a run whose model failed back with a delay, and finishes it on a later attempt", async () => {
    let calls = 0;
    const flaky = agentLoop$({
      id: "flaky",
      model: {
        async generate() {
          if (calls++ === 0) throw new Error("rate limited");
          return { content: "ok", toolCalls: [] };
        },
      },
    });
    await submitRun(journal, { runId: "flaky", loop: flaky, input: "x" });
    const worker = work({ flaky });
    await until("the model error", async () => (await lease("flaky"))?.failures === 1);
    expect(await lease("flaky")).toMatchObject({
      owner: null,
      due: false,
      last_error: expect.stringMatching(/model-error/),
    });
    await until("the retry to complete the run", completed("flaky"), 5_000);
    await worker.stop();
    expect(calls).toBe(2);
  });

  it("takes over a run whose lease ran out (its worker died)", async () => {
    const { loop, runs } = loopOf("ghost");
    await submitRun(journal, { runId: "ghost", loop, input: "x" });
    await sql(
      `UPDATE "${schema}".loom_leases SET owner = 'dead', expires_at = now() - interval '1 second' WHERE run_id = 'ghost'`,
    );
    const worker = work({ ghost: loop });
    await until("the run to complete", completed("ghost"));
    await worker.stop();
    expect(runs).toHaveLength(1);
    expect(await lease("ghost")).toBeUndefined();
  });

  it("keeps a lease renewed while a tool outlives it, so no other worker takes the run", async () => {
    const { loop, runs } = loopOf("held", { workMs: 1_500 });
    await submitRun(journal, { runId: "held", loop, input: "x" });
    const a = work({ held: loop }, 300);
    await until("the tool to start", async () => runs.length === 1);
    const b = work({ held: loop }, 300);
    await until("the run to complete", completed("held"));
    await Promise.all([a.stop(), b.stop()]);
    expect(runs).toHaveLength(1); // a takeover would have run the tool again (its frame has no completion yet)
  });

  it("aborts its run when it finds its lease taken, and leaves the row to the new owner", async () => {
    const { loop, runs } = loopOf("stolen", { workMs: 1_000 });
    await submitRun(journal, { runId: "stolen", loop, input: "x" });
    const worker = work({ stolen: loop }, 300);
    await until("the tool to start", async () => runs.length === 1);
    // As a claim by another worker would: its owner, its expiry (so this worker cannot claim it back).
    await sql(
      `UPDATE "${schema}".loom_leases SET owner = 'thief', expires_at = now() + interval '1 hour' WHERE run_id = 'stolen'`,
    );
    await until("the worker to let go", async () => worker.active.length === 0, 2_000);
    await worker.stop();
    expect(await lease("stolen")).toMatchObject({ owner: "thief", failures: 0 });
    expect((await types("stolen")).at(-1)).toBe("run.interrupted");
    await sql(`DELETE FROM "${schema}".loom_leases WHERE run_id = 'stolen'`);
  });

  it("drains on stop(), and on stop({ abort: true }) hands the run back at once", async () => {
    const { loop, runs } = loopOf("drain", { workMs: 300 });
    await submitRun(journal, { runId: "drained", loop, input: "x" });
    const a = work({ drain: loop });
    await until("the tool to start", async () => runs.length === 1);
    await a.stop();
    expect((await types("drained")).at(-1)).toBe("run.completed");

    await submitRun(journal, { runId: "aborted", loop, input: "x" });
    const b = work({ drain: loop });
    await until("the run to start", async () => (await types("aborted")).includes("frame.started"));
    await b.stop({ abort: true });
    expect((await types("aborted")).at(-1)).toBe("run.interrupted");
    expect(await lease("aborted")).toMatchObject({ owner: null, due: true, failures: 0 });
    const c = work({ drain: loop });
    await until("another worker to finish it", completed("aborted"));
    await c.stop();
  });

  it("runs a doStream-only AI SDK model: a worker streams as every run does (one streaming rule, issue 36)", async () => {
    const finished = (text: string, unified: "stop" | "tool-calls", input?: string) =>
      streamedAs({
        content: input ? [{ type: "tool-call", toolCallId: "c", toolName: "work", input }] : [{ type: "text", text }],
        finishReason: { unified, raw: undefined },
        usage: {
          inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
          outputTokens: { total: 1, text: 1, reasoning: undefined },
        },
      });
    const mock = new MockLanguageModelV3({
      doStream: [finished("", "tool-calls", "{}"), finished("streamed", "stop")],
    });
    const loop = agentLoop$({
      id: "streams",
      model: fromAiSdk(mock),
      tools: { work: { description: "works", execute: async () => ({ done: true }) } },
      searchTools: false,
    });
    await submitRun(journal, { runId: "stream-only", loop, input: "go" });
    const worker = work({ streams: loop });
    await until("the stream-only run to complete", completed("stream-only"));
    await worker.stop();
    expect(mock.doStreamCalls).toHaveLength(2);
    expect(mock.doGenerateCalls).toHaveLength(0);
    expect((await loop.run({ runId: "stream-only", journal })).content).toBe("streamed");
  });
});

function agentLoopBounded() {
  return {
    loop: agentLoop$({
      id: "bounded",
      maxIterations: 1,
      model: scriptedModel(() => ({ toolCalls: [{ id: "c", name: "noop", input: {} }] })),
      tools: { noop: { description: "does nothing", execute: () => ({}) } },
    }),
  };
}
