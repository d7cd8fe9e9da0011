import { describe, expect, it } from "vitest";
import { isRunCancelledError, RunCancelledError } from "../../src/core/errors.ts";
import { openSqliteJournal, readJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { isAgentInterruptedError } from "../../src/runtime/base/errors.ts";
import { cancelRun, isRunControlError } from "../../src/runtime/control/operations.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { tempDir } from "../events/tmp.ts";
import { jsonJournal } from "../support/loop.ts";
import { startWorker } from "../support/processes.ts";

const rejection = (p: Promise<unknown>) =>
  p.then(
    () => {
      throw new Error("expected a rejection");
    },
    (e: unknown) => e,
  );

/** A tool that waits until its signal aborts, and says what it saw. */
function slowTool() {
  const seen: { started: number; abortReason?: unknown } = { started: 0 };
  let started: () => void = () => {};
  const running = new Promise<void>((resolve) => {
    started = resolve;
  });
  const tool: Tool = {
    description: "waits for ever",
    execute: (_input, { signal }) =>
      new Promise((_, reject) => {
        seen.started++;
        started();
        signal.addEventListener("abort", () => {
          seen.abortReason = signal.reason;
          reject(signal.reason);
        });
      }),
  };
  return { tool, seen, running };
}

const twoTurns = () =>
  scriptedModel([{ toolCalls: [{ id: "c1", name: "wait", input: {} }] }, { content: "done", toolCalls: [] }]);

describe("cancelRun", () => {
  it("stops a run during a tool: the tool's signal aborts, run.cancelled is journaled, run() then rejects", async () => {
    const journal = jsonJournal();
    const { tool, seen, running } = slowTool();
    const loop = agentLoop$({ id: "c", model: twoTurns(), tools: { wait: tool } });
    // A short lease: the renewal (every third of it) is where a running owner learns of the request.
    const run = loop.run({ runId: "r1", journal, input: "go", ownership: { leaseMs: 300 } });
    const outcome = rejection(run);
    await running;
    const result = await cancelRun(journal, "r1", { reason: "operator stop", waitMs: 5_000 });
    expect(result.status).toBe("cancelled");
    const e = await outcome;
    expect(isRunCancelledError(e)).toBe(true);
    expect(e).toMatchObject({ code: "runCancelled", runId: "r1", reason: "operator stop" });
    expect(seen.abortReason).toBeInstanceOf(RunCancelledError);
    const entries = await readJournal(journal, "r1");
    expect(entries.at(-1)).toMatchObject({ type: "run.cancelled", data: { reason: "operator stop" } });
    // Never resumed: run() rejects before calling anything, and appends nothing.
    const again = await rejection(loop.run({ runId: "r1", journal }));
    expect(isRunCancelledError(again)).toBe(true);
    expect((await readJournal(journal, "r1")).length).toBe(entries.length);
    expect(seen.started).toBe(1);
    // Cancelling again is harmless; the run is not found under another id.
    expect((await cancelRun(journal, "r1", { reason: "again" })).status).toBe("cancelled");
    const unknown = await rejection(cancelRun(journal, "nope", { reason: "x" }));
    expect(isRunControlError(unknown) && unknown.code).toBe("runNotFound");
  });

  it("ends a run no one runs itself (an interrupted run), and refuses a completed one", async () => {
    const journal = jsonJournal();
    const approvalTool: Tool = { description: "needs a yes", requiresApproval: true, execute: () => "ran" };
    const loop = agentLoop$({
      id: "c",
      model: scriptedModel([
        { toolCalls: [{ id: "c1", name: "wait", input: {} }] },
        { content: "done", toolCalls: [] },
      ]),
      tools: { wait: approvalTool },
    });
    const interrupted = await rejection(loop.run({ runId: "r2", journal, input: "go" }));
    expect(isAgentInterruptedError(interrupted)).toBe(true);
    expect(await cancelRun(journal, "r2", { reason: "not needed" })).toEqual({ status: "cancelled" });
    expect((await readJournal(journal, "r2")).at(-1)?.type).toBe("run.cancelled");
    const e = await rejection(loop.run({ runId: "r2", journal, approvals: {} }));
    expect(e).toMatchObject({ code: "runCancelled", reason: "not needed" });

    const done = agentLoop$({ id: "d", model: scriptedModel([{ content: "hi", toolCalls: [] }]) });
    await done.run({ runId: "r3", journal, input: "hello" });
    const finished = await rejection(cancelRun(journal, "r3", { reason: "late" }));
    expect(isRunControlError(finished) && finished.code).toBe("runFinished");
  });

  it("a request left while the owner was away is honoured by the next run", async () => {
    const store = memoryStore({ json: true });
    const journal = jsonJournal(store);
    const loop = agentLoop$({
      id: "c",
      model: scriptedModel([
        { toolCalls: [{ id: "c1", name: "wait", input: {} }] },
        { content: "done", toolCalls: [] },
      ]),
      tools: { wait: { description: "x", requiresApproval: true, execute: () => "ran" } },
    });
    await rejection(loop.run({ runId: "r4", journal, input: "go" }));
    // An owner holds the run (a process that will crash), so cancelRun only records the request.
    const held = await store.acquire("r4", { owner: "crashing", leaseMs: 60_000 });
    expect(await cancelRun(journal, "r4", { reason: "stop it" })).toMatchObject({
      status: "requested",
      holder: { owner: "crashing" },
    });
    await store.release(held); // it goes away without ending the run
    const e = await rejection(loop.run({ runId: "r4", journal, approvals: { "c#turn:0:tool:0": true } }));
    expect(e).toMatchObject({ code: "runCancelled", reason: "stop it" });
    const entries = await readJournal(journal, "r4");
    expect(entries.at(-1)).toMatchObject({ type: "run.cancelled", data: { reason: "stop it" } });
    expect(entries.some((x) => x.type === "frame.started" && x.data.frameId === "c#turn:0:tool:0")).toBe(false);
  });

  it("stops a run another process is running (SQLite): its tool aborts, it journals run.cancelled", async () => {
    const tmp = tempDir("loom-cancel-");
    const path = tmp.file("loom.db");
    openSqliteJournal(path).close(); // the file exists before either process opens it
    try {
      const child = startWorker("test/runtime/workers/cancelProcess.ts", [path, "far-1"]);
      await child.waitFor((l) => l === "started", "the tool to start", 60_000);
      const journal = openSqliteJournal(path);
      try {
        expect(await cancelRun(journal, "far-1", { reason: "from afar", waitMs: 10_000 })).toEqual({
          status: "cancelled",
        });
        const line = await child.waitFor((l) => l.startsWith("{"), "the run's outcome");
        expect(JSON.parse(line)).toEqual({ cancelled: true, reason: "from afar", toolAbortedByCancel: true });
        expect((await readJournal(journal, "far-1")).at(-1)).toMatchObject({ type: "run.cancelled" });
      } finally {
        await journal.close();
      }
      expect((await child.exited).code, child.stderr()).toBe(0);
    } finally {
      tmp.remove();
    }
  }, 90_000);
});
