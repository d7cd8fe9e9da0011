import { describe, expect, it } from "vitest";
import { digestOf, digestOfRecorded } from "../../src/core/digest.ts";
import { readJournal } from "../../src/events/journal.ts";
import type { JournalEntry } from "../../src/events/types.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { evolveRunEvents, initialRunEventState, runEventsOf } from "../../src/projections/events.ts";
import { foldEntries } from "../../src/projections/runState.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { jsonJournal } from "../support/loop.ts";

const tools: Record<string, Tool> = {
  add: { description: "adds", execute: (input) => ({ sum: (input as { a: number }).a + 1 }) },
  boom: {
    description: "fails",
    execute: () => {
      throw new TypeError("no luck");
    },
  },
  pay: { description: "needs a yes", requiresApproval: true, execute: () => ({ paid: true }) },
};

/** A model that fails its first call (503), then asks for add, boom, an unknown tool and pay, then answers. */
function flakyModel() {
  let failed = false;
  const inner = scriptedModel([
    {
      content: "working",
      toolCalls: [
        { id: "c1", name: "add", input: { a: 1 } },
        { id: "c2", name: "boom", input: {} },
        { id: "c3", name: "nope", input: {} },
        { id: "c4", name: "pay", input: { amount: 5 } },
      ],
      usage: { inputTokens: 3, outputTokens: 4 },
      finishReason: "tool-calls",
    },
    { content: "all done", toolCalls: [] },
  ]);
  return {
    generate: async (request: Parameters<typeof inner.generate>[0]) => {
      if (!failed) {
        failed = true;
        throw Object.assign(new Error("busy"), { status: 503 });
      }
      return inner.generate(request);
    },
  };
}

async function recordedRun(toolCallLog?: "full" | "lean") {
  const journal = jsonJournal();
  const loop = agentLoop$({
    id: "ev",
    model: flakyModel(),
    tools,
    ...(toolCallLog ? { toolCallLog } : {}),
    retry: { model: { maxAttempts: 3, initialDelayMs: 1, maxDelayMs: 1, jitter: 0 } },
  });
  await expect(loop.run({ runId: "r", input: "go", journal })).rejects.toThrow(/approval/);
  await loop.run({ runId: "r", journal, approvals: { "ev#turn:0:tool:3": true } });
  return readJournal(journal, "r");
}

/** [cursor, type] of each event, and the entry each cursor names. */
const table = (entries: readonly JournalEntry[], mode?: "full" | "lean") =>
  runEventsOf(entries, mode ? { mode } : {}).map((e) => [e.cursor, e.type]);

describe("runEventsOf: a run's journal as RunEvents", () => {
  it("gives each entry's events with the entry's seq as cursor", async () => {
    const entries = await recordedRun();
    const seq = (p: (e: JournalEntry) => boolean) => entries.find(p)?.seq;
    const frameStarted = (id: string) =>
      entries.filter((e) => e.type === "frame.started" && e.data.frameId === id).map((e) => e.seq);
    const frameDone = (id: string) => seq((e) => e.type === "frame.completed" && e.data.frameId === id);
    const decision = (id: string) => seq((e) => e.type === "decision.recorded" && e.data.decisionId === id);
    const [m0a, m0b] = frameStarted("ev#turn:0:model");
    const events = table(entries);
    // The order of the tool events follows the journal; compare as the journal orders them.
    const expected: [number | undefined, string][] = [
      [seq((e) => e.type === "run.started"), "run-started"],
      [m0a, "model-started"],
      [seq((e) => e.type === "attempt.failed"), "reset"], // the failed attempt's deltas are void
      [seq((e) => e.type === "attempt.failed"), "model-retrying"],
      [m0b, "model-started"],
      [frameDone("ev#turn:0:model"), "model-finished"],
      [frameStarted("ev#turn:0:tool:0")[0], "tool-started"],
      [frameDone("ev#turn:0:tool:0"), "tool-finished"],
      [frameStarted("ev#turn:0:tool:1")[0], "tool-started"],
      [decision("ev#turn:0:tool:1:outcome"), "tool-finished"],
      [seq((e) => e.type === "call.settled"), "call-settled"],
      [seq((e) => e.type === "run.interrupted"), "approval-requested"],
      [seq((e) => e.type === "run.interrupted"), "run-interrupted"],
      [decision("ev#turn:0:tool:3:approval"), "approval-decided"],
      [frameStarted("ev#turn:0:tool:3")[0], "tool-started"],
      [frameDone("ev#turn:0:tool:3"), "tool-finished"],
      [frameStarted("ev#turn:1:model")[0], "model-started"],
      [frameDone("ev#turn:1:model"), "model-finished"],
      [seq((e) => e.type === "run.completed"), "run-completed"],
    ];
    expect(expected.every(([c]) => typeof c === "number")).toBe(true);
    expect([...events].sort((a, b) => (a[0] as number) - (b[0] as number))).toEqual(events); // cursors never go back
    expect(new Set(events.map(String))).toEqual(new Set(expected.map(String)));
    expect(events).toHaveLength(expected.length);
  });

  it("carries what each entry says", async () => {
    const entries = await recordedRun();
    const events = runEventsOf(entries);
    const of = <T extends string>(type: T) => events.filter((e) => e.type === type);
    expect(of("run-started")[0]).toMatchObject({ runId: "r", loopId: "ev", input: "go" });
    expect(of("model-started").map((e) => ("attempt" in e ? e.attempt : 0))).toEqual([1, 2, 1]);
    const retrying = of("model-retrying")[0];
    expect(retrying).toMatchObject({
      stepId: "ev#turn:0:model",
      attempt: 1,
      error: { name: "Error", message: "busy", status: 503, retryable: true },
    });
    expect(typeof (retrying as { retryAt: unknown }).retryAt).toBe("string");
    expect(of("model-finished")[0]).toMatchObject({
      stepId: "ev#turn:0:model",
      turn: 0,
      content: "working",
      usage: { inputTokens: 3, outputTokens: 4 },
    });
    expect(of("tool-started").map((e) => [("toolName" in e && e.toolName) || "", "input" in e ? e.input : 0])).toEqual([
      ["add", { a: 1 }],
      ["boom", {}],
      ["pay", { amount: 5 }],
    ]);
    expect(
      of("tool-finished").sort((a, b) =>
        (a as { stepId: string }).stepId < (b as { stepId: string }).stepId ? -1 : 1,
      ),
    ).toEqual([
      expect.objectContaining({
        stepId: "ev#turn:0:tool:0",
        toolName: "add",
        status: "ok",
        output: { sum: 2 },
        ...digestOf({ sum: 2 }),
      }),
      expect.objectContaining({
        stepId: "ev#turn:0:tool:1",
        toolName: "boom",
        status: "error",
        output: { error: "TypeError", message: "no luck" },
        ...digestOf({ error: "TypeError", message: "no luck" }),
      }),
      expect.objectContaining({ stepId: "ev#turn:0:tool:3", toolName: "pay", status: "ok", output: { paid: true } }),
    ]);
    expect(of("call-settled")[0]).toMatchObject({
      stepId: "ev#turn:0:tool:2",
      toolName: "nope",
      status: "error",
      reason: "unknown-tool",
    });
    expect(of("approval-requested")[0]).toMatchObject({
      stepId: "ev#turn:0:tool:3",
      toolName: "pay",
      input: { amount: 5 },
      inputDigest: digestOfRecorded({ amount: 5 }).digest,
    });
    expect(of("run-interrupted")[0]).toMatchObject({
      reason: "approval-pending",
      detail: { stepIds: ["ev#turn:0:tool:3"] },
    });
    expect(of("approval-decided")[0]).toMatchObject({ stepId: "ev#turn:0:tool:3", approved: true });
    expect(of("run-completed")[0]).toMatchObject({ content: "all done", iterations: 2 });
  });

  it("in lean mode, tool-finished carries the digest and bytes, never the output", async () => {
    const entries = await recordedRun();
    const full = runEventsOf(entries, { mode: "full" }).filter((e) => e.type === "tool-finished");
    const lean = runEventsOf(entries, { mode: "lean" }).filter((e) => e.type === "tool-finished");
    expect(lean).toHaveLength(3);
    for (const [i, e] of lean.entries()) {
      expect("output" in e).toBe(false);
      const { output: _, ...rest } = full[i] as { output: unknown };
      expect(e).toEqual(rest);
    }
  });

  it("follows the run's mode pin when no mode is asked for", async () => {
    const entries = await recordedRun("lean");
    const finished = runEventsOf(entries).filter((e) => e.type === "tool-finished");
    expect(finished.length).toBe(3);
    expect(finished.some((e) => "output" in e)).toBe(false);
    expect(
      runEventsOf(entries, { mode: "full" }).filter((e) => e.type === "tool-finished" && "output" in e),
    ).toHaveLength(3);
  });

  it("seeded with a run's state, goes on exactly as the fold of the whole journal", async () => {
    const entries = await recordedRun();
    const all = table(entries);
    for (let k = 0; k <= entries.length; k++) {
      const state = initialRunEventState({}, foldEntries(entries.slice(0, k)));
      const rest = entries.slice(k).flatMap((e) => evolveRunEvents(state, e).map((x) => [x.cursor, x.type]));
      expect(rest).toEqual(all.filter(([c]) => (c as number) > k));
    }
  });

  it("gives run-cancelled for a run.cancelled entry and run-failed for run.failed", () => {
    const entry = (seq: number, type: string, data: unknown) =>
      ({ runId: "r", seq, type, data, meta: { v: 1, at: "" } }) as unknown as JournalEntry;
    const events = runEventsOf([
      entry(1, "run.started", { loopId: "ev", input: "x", tools: [] }),
      entry(2, "run.cancelled", { reason: "user asked" }),
      entry(3, "run.failed", { error: { name: "Error", message: "bad" } }),
    ]);
    expect(events.slice(1)).toEqual([
      { type: "run-cancelled", runId: "r", cursor: 2, reason: "user asked" },
      { type: "run-failed", runId: "r", cursor: 3, error: { name: "Error", message: "bad" } },
    ]);
  });
});
