import { describe, expect, it } from "vitest";
import { readJournal } from "../../src/events/journal.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { countingTools, jsonJournal } from "../support/loop.ts";

const script = scriptedModel([
  { toolCalls: [{ id: "a", name: "add", input: { a: 1, b: 2 } }] },
  {
    toolCalls: [
      { id: "b", name: "echo", input: { text: "slow", delayMs: 20 } },
      { id: "c", name: "echo", input: { text: "fast", delayMs: 0 } },
    ],
  },
  { content: "done", toolCalls: [] },
]);

describe("agentLoop$", () => {
  it("runs model → tools → model and returns the full log in (iteration, j) order", async () => {
    const { tools, executions } = countingTools();
    const loop = agentLoop$({ id: "t", model: script, tools });
    const journal = jsonJournal();
    const out = await loop.run({ runId: "r1", input: "hi", journal });
    expect(out.content).toBe("done");
    expect(out.iterations).toBe(3);
    expect(out.toolCallLog).toEqual([
      { iteration: 0, toolName: "add", toolInput: { a: 1, b: 2 }, toolOutput: { sum: 3 } },
      { iteration: 1, toolName: "echo", toolInput: { text: "slow", delayMs: 20 }, toolOutput: { text: "slow" } },
      { iteration: 1, toolName: "echo", toolInput: { text: "fast", delayMs: 0 }, toolOutput: { text: "fast" } },
    ]);
    expect([...executions.values()]).toEqual([1, 1, 1]);
    const entries = await readJournal(journal, "r1");
    expect(entries.map((e) => e.type)).toContain("run.completed");
  });
});
