import { describe, expect, it } from "vitest";
import { isDefinitionChangedError } from "../../src/core/errors.ts";
import { readJournal } from "../../src/events/journal.ts";
import type { Journal } from "../../src/events/spi.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { AgentLoopConfig, Tool } from "../../src/runtime/base/config.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { jsonJournal } from "../support/loop.ts";

const lookup: Tool = {
  description: "looks an order up",
  inputSchema: { type: "object", properties: { order: { type: "string" } } },
  execute: (input) => ({ found: input }),
};
const search: Tool = { description: "searches", execute: () => [] };

/** A run stopped after its first model call (the iteration limit): a resume calls the model again. */
async function stoppedRun(journal: Journal, config: Partial<AgentLoopConfig> = {}) {
  const model = scriptedModel([{ toolCalls: [{ id: "c1", name: "lookup", input: { order: "7" } }] }]);
  const loop = agentLoop$({ id: "shop", model, tools: { lookup }, system: "Be brief.", maxIterations: 1, ...config });
  await expect(loop.run({ runId: "r", journal, input: "where is 7?" })).rejects.toThrow(/max-iterations/);
  return (await readJournal(journal, "r")).length;
}

const resumeWith = (journal: Journal, config: Partial<AgentLoopConfig>) =>
  agentLoop$({
    id: "shop",
    // Indexed by turn: turn 0 is served from the journal, turn 1 is the resume's call.
    model: scriptedModel([{ toolCalls: [] }, { content: "On its way.", toolCalls: [] }]),
    tools: { lookup },
    system: "Be brief.",
    ...config,
  }).run({ runId: "r", journal });

describe("the run pins its definition", () => {
  it("records the definition's digests in run.started", async () => {
    const journal = jsonJournal();
    await stoppedRun(journal);
    const [started] = await readJournal(journal, "r");
    expect(started?.data).toMatchObject({
      definition: { digest: expect.any(String), system: expect.any(String), tools: { lookup: expect.any(String) } },
    });
  });

  it("resumes under the same definition", async () => {
    const journal = jsonJournal();
    await stoppedRun(journal);
    await expect(resumeWith(journal, {})).resolves.toMatchObject({ content: "On its way." });
  });

  it.each([
    ["a tool added", { tools: { lookup, search } }, 'tool "search" added'],
    ["a tool removed", { tools: {} }, 'tool "lookup" removed'],
    [
      "an input schema changed",
      { tools: { lookup: { ...lookup, inputSchema: { type: "object", properties: { id: { type: "number" } } } } } },
      'the input schema of tool "lookup" changed',
    ],
    ["the system prompt changed", { system: "Be thorough." }, "the system prompt changed"],
  ])("refuses %s with DefinitionChangedError before any append", async (_, config, change) => {
    const journal = jsonJournal();
    const entries = await stoppedRun(journal);
    const error = await resumeWith(journal, config as Partial<AgentLoopConfig>).catch((e) => e);
    expect(isDefinitionChangedError(error)).toBe(true);
    expect(error).toMatchObject({ code: "definitionChanged", runId: "r", changes: [change] });
    expect(error.message).toContain('run r was recorded under another definition of loop "shop"');
    expect(error.message).toMatch(/acceptDefinitionChanges: \[|a system prompt change cannot be accepted/);
    expect(await readJournal(journal, "r")).toHaveLength(entries);
  });

  it("goes on when the loop accepts the change, by kind or by predicate", async () => {
    const byKind = jsonJournal();
    await stoppedRun(byKind);
    await expect(
      resumeWith(byKind, { tools: { lookup, search }, acceptDefinitionChanges: ["tool-added"] }),
    ).resolves.toMatchObject({ content: "On its way." });
    const byPredicate = jsonJournal();
    await stoppedRun(byPredicate);
    await expect(
      resumeWith(byPredicate, {
        tools: { lookup: { ...lookup, inputSchema: { type: "object" } } },
        acceptDefinitionChanges: (c) => c.kind === "tool-schema-changed" && c.tool === "lookup",
      }),
    ).resolves.toMatchObject({ content: "On its way." });
  });

  it("still refuses the changes the loop does not accept", async () => {
    const journal = jsonJournal();
    await stoppedRun(journal);
    const error = await resumeWith(journal, {
      tools: { search },
      acceptDefinitionChanges: ["tool-added"],
    }).catch((e) => e);
    expect(error).toMatchObject({ code: "definitionChanged", changes: ['tool "lookup" removed'] });
  });

  it("resumes a run recorded before the pin (no definition in run.started) as before", async () => {
    const journal = jsonJournal();
    await journal.store.append(
      "r",
      [{ type: "run.started", data: { loopId: "shop", input: "where is 7?", tools: ["lookup"] } }],
      { expectedVersion: 0 },
    );
    const model = scriptedModel([{ content: "On its way.", toolCalls: [] }]);
    const loop = agentLoop$({ id: "shop", model, tools: { lookup, search }, system: "Be brief." });
    await expect(loop.run({ runId: "r", journal })).resolves.toMatchObject({ content: "On its way." });
  });

  it("never accepts a changed system prompt: every model call's prompt digest covers it", async () => {
    const journal = jsonJournal();
    await stoppedRun(journal);
    const error = await resumeWith(journal, { system: "Be kind.", acceptDefinitionChanges: () => true }).catch(
      (e) => e,
    );
    expect(error).toMatchObject({ code: "definitionChanged", changes: ["the system prompt changed"] });
    expect(error.message).toContain("a system prompt change cannot be accepted");
  });

  it("refuses an invalid acceptDefinitionChanges when the loop is made", () => {
    const model = scriptedModel([]);
    expect(() => agentLoop$({ id: "l", model, acceptDefinitionChanges: ["tool-renamed" as never] })).toThrow(
      /acceptDefinitionChanges must be a predicate or a list of "tool-added", "tool-removed", "tool-schema-changed", "tool-source-added", "tool-source-removed"; "tool-renamed" is not one/,
    );
  });
});
