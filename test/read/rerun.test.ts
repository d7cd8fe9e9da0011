import { describe, expect, it } from "vitest";
import { agentLoop$, readJournal, scriptedModel, type Tool } from "../../src/index.ts";
import { foldEntries } from "../../src/journal.ts";
import { callAt, runViewOf } from "../../src/read/runView.ts";
import { jsonJournal } from "../support/loop.ts";

/**
 * A call that started again is a rerun only when its earlier start has no outcome and no failed
 * attempt awaiting a retry: a retry the failure policy makes is an attempt, not a rerun.
 */
describe("a tool call's reruns, from the journal", () => {
  it("counts none for a call retried after a failed attempt", async () => {
    let calls = 0;
    const flaky: Tool = {
      description: "fails once, then answers",
      retry: { maxAttempts: 3, initialDelayMs: 1, maxDelayMs: 1 },
      execute: () => {
        if (calls++ === 0) throw new Error("flake");
        return "fine";
      },
    };
    const loop = agentLoop$({
      id: "flaky",
      model: scriptedModel([
        { toolCalls: [{ id: "f", name: "flaky", input: {} }] },
        { content: "done", toolCalls: [] },
      ]),
      tools: { flaky },
    });
    const journal = jsonJournal();
    await loop.run({ runId: "r", journal, input: "go" });
    const entries = await readJournal(journal, "r");
    expect(entries.filter((e) => e.type === "frame.started" && e.data.frameId === "flaky#turn:0:tool:0")).toHaveLength(
      2,
    );
    const call = callAt(runViewOf(foldEntries(entries)), "flaky#turn:0:tool:0");
    expect(call).toMatchObject({ status: "ok", failures: 1 });
    expect(call?.reruns).toBeUndefined();
  });
});
