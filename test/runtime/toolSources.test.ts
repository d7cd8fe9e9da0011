import { describe, expect, it } from "vitest";
import { isAgentLoopConfigError, isJournalFormatError } from "../../src/core/errors.ts";
import { readJournal } from "../../src/events/journal.ts";
import type { ListedTool } from "../../src/events/toolList.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { Tool, ToolSource } from "../../src/runtime/base/config.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { jsonJournal } from "../support/loop.ts";

/** A source whose list is `tools` (asked: `lists` counts), each tool echoing its input. */
function echoSource(name: string, tools: ListedTool[] = [{ name: "echo", description: "echoes" }]) {
  const source = {
    name,
    lists: 0,
    async list() {
      source.lists++;
      return tools;
    },
    tools: (listed: readonly ListedTool[]) =>
      Object.fromEntries(
        listed.map((t): [string, Tool] => [
          t.name,
          { description: t.description ?? "", execute: (input) => ({ input }) },
        ]),
      ),
  } satisfies ToolSource & { lists: number };
  return source;
}

const echoCall = { toolCalls: [{ id: "c1", name: "echo", input: { x: 1 } }] };

describe("tool sources (the SPI mcpTools implements)", () => {
  it("asks the source once per run and serves its list from the journal after", async () => {
    const journal = jsonJournal();
    const source = echoSource("s");
    const loop = (script: Parameters<typeof scriptedModel>[0], maxIterations?: number) =>
      agentLoop$({ id: "l", model: scriptedModel(script), toolSources: [source], maxIterations });
    await expect(loop([echoCall], 1).run({ runId: "r", journal, input: "x" })).rejects.toThrow(/max-iterations/);
    const out = await loop([echoCall, { content: "done", toolCalls: [] }]).run({ runId: "r", journal });
    expect(out.toolCallLog).toEqual([
      { iteration: 0, toolName: "echo", toolInput: { x: 1 }, toolOutput: { input: { x: 1 } } },
    ]);
    expect(source.lists).toBe(1);
    await loop([])
      .run({ runId: "r2", journal, input: "y" })
      .catch(() => {});
    expect(source.lists).toBe(2); // another run: its own list
  });

  it("lists on a resume a source the run has no list of yet (added, and accepted), journaling it then", async () => {
    const journal = jsonJournal();
    const local: Tool = { description: "local", execute: () => "local" };
    const script = [
      { toolCalls: [{ id: "c0", name: "local", input: {} }] },
      echoCall,
      { content: "ok", toolCalls: [] },
    ];
    const first = agentLoop$({ id: "l", model: scriptedModel(script), tools: { local }, maxIterations: 1 });
    await expect(first.run({ runId: "r", journal, input: "x" })).rejects.toThrow(/max-iterations/);
    const source = echoSource("late");
    const loop = agentLoop$({
      id: "l",
      model: scriptedModel(script),
      tools: { local },
      toolSources: [source],
      acceptDefinitionChanges: ["tool-source-added"],
    });
    const out = await loop.run({ runId: "r", journal });
    expect(out.toolCallLog.map((s) => s.toolOutput)).toEqual(["local", { input: { x: 1 } }]);
    expect(source.lists).toBe(1);
    const lists = (await readJournal(journal, "r")).filter((e) => e.type === "decision.recorded");
    expect(lists.map((e) => e.data.decisionId)).toEqual(["l#tools:late"]);
  });

  it("refuses a damaged journaled list with JournalFormatError before any append", async () => {
    const journal = jsonJournal();
    const source = echoSource("s");
    const loop = () =>
      agentLoop$({ id: "l", model: scriptedModel([echoCall]), toolSources: [source], maxIterations: 1 });
    await expect(loop().run({ runId: "r", journal, input: "x" })).rejects.toThrow(/max-iterations/);
    const length = (await readJournal(journal, "r")).length;
    // The recorded list altered (a second record of the decision wins in the fold).
    const damaged = { decisionId: "l#tools:s", source: "tool-list", choice: { tools: "none" } };
    await journal.store.append("r", [{ type: "decision.recorded", data: damaged }], { expectedVersion: length });
    const e = await loop()
      .run({ runId: "r", journal })
      .catch((x) => x);
    expect(isJournalFormatError(e)).toBe(true);
    expect(e.message).toContain("the tool list l#tools:s holds no list of tools");
    expect(await readJournal(journal, "r")).toHaveLength(length + 1);
  });

  it("refuses two sources of one name, and a name that cannot be part of a decision id, when the loop is made", () => {
    const model = scriptedModel([]);
    const twice = () => agentLoop$({ id: "l", model, toolSources: [echoSource("s"), echoSource("s")] });
    expect(twice).toThrow(/two tool sources are named "s"/);
    const e = (() => {
      try {
        agentLoop$({ id: "l", model, toolSources: [echoSource("my server")] });
      } catch (x) {
        return x;
      }
    })();
    expect(isAgentLoopConfigError(e) && e.message).toContain("toolSources[0].name must be a non-empty string");
  });

  it("refuses two sources with a tool of one name (toolNameClash)", async () => {
    const loop = agentLoop$({ id: "l", model: scriptedModel([]), toolSources: [echoSource("a"), echoSource("b")] });
    const e = await loop.run({ runId: "r", journal: jsonJournal(), input: "x" }).catch((x) => x);
    expect(e).toMatchObject({ code: "toolNameClash" });
    expect(e.message).toContain('tool source "b" has a tool named "echo", and so has tool source "a"');
  });
});
