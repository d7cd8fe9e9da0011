import { describe, expect, it } from "vitest";
import { replayRun } from "../../src/cli/replay.ts";
import type { ListedTool } from "../../src/events/toolList.ts";
import { agentLoop$, readJournal, rebuildToolCallLog, scriptedModel, type ToolSource } from "../../src/index.ts";
import { foldEntries } from "../../src/journal.ts";
import { jsonJournal } from "../support/loop.ts";

describe("loom inspect's replay of a run whose tools came from a tool source (MCP)", () => {
  it("replays the source's calls as recorded: every tool result matches", async () => {
    const source: ToolSource = {
      name: "calc",
      list: async () => [{ name: "double", description: "doubles" }],
      tools: (listed: readonly ListedTool[]) =>
        Object.fromEntries(
          listed.map((t) => [
            t.name,
            { description: t.description ?? "", execute: (i: unknown) => (i as { n: number }).n * 2 },
          ]),
        ),
    };
    const model = scriptedModel([
      { toolCalls: [{ id: "d", name: "double", input: { n: 21 } }] },
      { content: "42", toolCalls: [] },
    ]);
    const journal = jsonJournal();
    await agentLoop$({ id: "l", model, toolSources: [source] }).run({ runId: "r", journal, input: "double 21" });
    const entries = await readJournal(journal, "r");
    const state = foldEntries(entries);
    const lean = await rebuildToolCallLog(journal, "r", "lean");
    const result = await replayRun(journal, entries, state, lean, { inspect: () => {} });
    expect(result).toEqual({ ended: "completed", turns: 2, matching: 1, of: 1, subRuns: [] });
  });
});
