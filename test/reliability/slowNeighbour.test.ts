import { describe, expect, it } from "vitest";
import { readJournal } from "../../src/events/journal.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { jsonJournal } from "../support/loop.ts";

describe("a finished tool's result is durable while a slow neighbour of its turn still runs", () => {
  it("journals the fast tool's frame.completed before the slow one ends, so a crash then cannot run it again", async () => {
    const journal = jsonJournal();
    let releaseSlow: () => void = () => {};
    let slowStarted: () => void = () => {};
    const started = new Promise<void>((r) => {
      slowStarted = r;
    });
    const fast: Tool = { description: "answers at once", execute: () => ({ fast: true }) };
    const slow: Tool = {
      description: "answers when released",
      execute: () =>
        new Promise((resolve) => {
          releaseSlow = () => resolve({ slow: true });
          slowStarted();
        }),
    };
    const model = scriptedModel([
      {
        toolCalls: [
          { id: "a", name: "fast", input: {} },
          { id: "b", name: "slow", input: {} },
        ],
      },
      { content: "done", toolCalls: [] },
    ]);
    const run = agentLoop$({ id: "n", model, tools: { fast, slow } }).run({ runId: "r", journal, input: "go" });
    await started;
    await new Promise((r) => setTimeout(r, 50)); // the fast tool has long finished
    const stored = await readJournal(journal, "r");
    const completed = stored
      .filter((e) => e.type === "frame.completed")
      .map((e) => (e.data as { frameId: string }).frameId);
    expect(completed).toContain("n#turn:0:tool:0");
    expect(completed).not.toContain("n#turn:0:tool:1");
    releaseSlow();
    await expect(run).resolves.toMatchObject({ content: "done" });
  });
});
