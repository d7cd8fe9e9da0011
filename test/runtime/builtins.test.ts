import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { isAgentLoopConfigError } from "../../src/core/errors.ts";
import { createJournal, readJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import type { ModelResponse, NewEntry } from "../../src/events/types.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { GenerateRequest } from "../../src/models/types.ts";
import type { AgentLoopConfig, Tool, ToolSource } from "../../src/runtime/base/config.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { jsonJournal } from "../support/loop.ts";

const lookup: Tool = { description: "looks an order up", execute: () => ({ status: "shipped" }) };
const search = (id = "s1"): ModelResponse => ({ toolCalls: [{ id, name: "search_tools", input: { query: "order" } }] });
const answer: ModelResponse = { content: "It shipped.", toolCalls: [] };

/** A loop whose model keeps what it was told and sent, call by call. */
function toldLoop(script: readonly ModelResponse[], more: Partial<AgentLoopConfig> = {}) {
  const requests: GenerateRequest[] = [];
  const model = scriptedModel(({ request, turn }) => {
    requests.push({ ...request, messages: [...request.messages] }); // the run's list grows after the call
    return script[turn] ?? answer;
  });
  const loop = agentLoop$({ id: "support", model, tools: { lookup }, ...more });
  const told = () => requests.map((r) => r.tools.map((t) => t.name));
  return { loop, requests, told };
}

describe("what the model is told it can call", () => {
  it("tells the model the loop's tools only: no search_tools unless the loop asks for it", async () => {
    const { loop, told } = toldLoop([answer]);
    await loop.run({ runId: "r", journal: jsonJournal(), input: "where is my order?" });
    expect(told()).toEqual([["lookup"]]);
  });

  it("offers search_tools with searchTools: true, and answers it with the tools that match", async () => {
    const { loop, told, requests } = toldLoop([search(), answer], { searchTools: true });
    await loop.run({ runId: "r", journal: jsonJournal(), input: "where is my order?" });
    expect(told()).toEqual([
      ["lookup", "search_tools"],
      ["lookup", "search_tools"],
    ]);
    const fed = requests[1]?.messages.at(-1);
    expect(fed).toMatchObject({ role: "tool", isError: false, output: [{ name: "lookup" }] });
  });

  it("refuses a call of search_tools as an unknown tool with searchTools: false", async () => {
    const { loop, requests } = toldLoop([search(), answer], { searchTools: false });
    await loop.run({ runId: "r", journal: jsonJournal(), input: "where is my order?" });
    expect(requests[1]?.messages.at(-1)).toMatchObject({ isError: true, output: { error: "unknown-tool" } });
  });

  it("lets a tool source's tool be named search_tools when the built-in is not offered", async () => {
    const source: ToolSource = {
      name: "finder",
      list: async () => [{ name: "search_tools", description: "the source's own search" }],
      tools: () => ({ search_tools: { description: "the source's own search", execute: () => ({ from: "source" }) } }),
    };
    const { loop, requests } = toldLoop([search(), answer], { toolSources: [source] });
    await loop.run({ runId: "r", journal: jsonJournal(), input: "find" });
    expect(requests[1]?.messages.at(-1)).toMatchObject({ isError: false, output: { from: "source" } });
    const clash = await toldLoop([answer], { toolSources: [source], searchTools: true })
      .loop.run({ runId: "r2", journal: jsonJournal(), input: "find" })
      .catch((e) => e);
    expect(isAgentLoopConfigError(clash) && clash.code).toBe("toolNameClash");
  });

  it("refuses a loop tool named search_tools beside searchTools: true (the model would be told two)", () => {
    const own: Tool = { description: "my own search", execute: () => [] };
    const clash = (() => {
      try {
        agentLoop$({ id: "support", model: scriptedModel([answer]), tools: { search_tools: own }, searchTools: true });
      } catch (e) {
        return e;
      }
    })();
    expect(isAgentLoopConfigError(clash) && clash.code).toBe("toolNameClash");
    expect(() =>
      agentLoop$({ id: "support", model: scriptedModel([answer]), tools: { search_tools: own } }),
    ).not.toThrow();
  });
});

/**
 * `test/fixtures/searchToolsRun.jsonl`: run `old-1` as the version before this change journaled it
 * (commit 1f22a11, the loop below with no `searchTools` option, so the model was told of it): the
 * model asked for `search_tools`, the call was answered, and the run stopped at `maxIterations: 1`.
 */
async function recordedBeforeTheChange(upTo?: (e: { type: string; data: unknown }) => boolean) {
  const text = readFileSync(fileURLToPath(new URL("../fixtures/searchToolsRun.jsonl", import.meta.url)), "utf8");
  const lines = text.split("\n").filter(Boolean);
  const entries: NewEntry[] = lines.map((l) => JSON.parse(l));
  const cut = upTo ? entries.findIndex(upTo) + 1 : entries.length;
  const journal = createJournal({ store: memoryStore({ json: true }) });
  await journal.store.append("old-1", entries.slice(0, cut), { expectedVersion: 0 });
  return journal;
}

describe("a run recorded when every loop offered search_tools (golden journal)", () => {
  it("resumes under a loop that no longer offers it: served as recorded, no DefinitionChangedError, the model told its tools only", async () => {
    const journal = await recordedBeforeTheChange();
    const after = toldLoop([search(), answer]);
    const out = await after.loop.run({ runId: "old-1", journal });
    expect(out.content).toBe("It shipped.");
    expect(out.toolCallLog).toEqual([
      {
        iteration: 0,
        toolName: "search_tools",
        toolInput: { query: "order" },
        toolOutput: [{ name: "lookup", description: "looks an order up" }],
      },
    ]);
    expect(after.told()).toEqual([["lookup"]]); // turn 0 served; turn 1 is told the loop's tools only
  });

  it("answers its search_tools call as it was answered when the result was not journaled yet (a crash right after the model's answer)", async () => {
    const journal = await recordedBeforeTheChange(
      (e) => e.type === "frame.completed" && (e.data as { frameId: string }).frameId === "support#turn:0:model",
    );
    const out = await toldLoop([search(), answer]).loop.run({ runId: "old-1", journal });
    expect(out.content).toBe("It shipped.");
    const settled = (await readJournal(journal, "old-1")).filter((e) => e.type === "call.settled");
    expect(settled.map((e) => e.data)).toEqual([
      {
        stepId: "support#turn:0:tool:0",
        status: "ok",
        reason: "search-tools",
        result: [{ name: "lookup", description: "looks an order up" }],
      },
    ]);
  });
});
