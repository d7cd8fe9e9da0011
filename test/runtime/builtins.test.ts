import { describe, expect, it } from "vitest";
import { isAgentLoopConfigError } from "../../src/core/errors.ts";
import { createJournal, readJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import type { ModelResponse } from "../../src/events/types.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { GenerateRequest } from "../../src/models/types.ts";
import { agentLoop$ } from "../../src/runtime/agentLoop.ts";
import type { AgentLoopConfig, Tool, ToolSource } from "../../src/runtime/config.ts";
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

describe("a run recorded when every loop offered search_tools", () => {
  // Earlier versions offered it unless `searchTools: false`; what they journaled is what a run
  // recorded today with `searchTools: true` journals (the offer itself is not journaled).
  it("resumes under a loop that no longer offers it: the recorded call is answered as it was, no DefinitionChangedError", async () => {
    const journal = jsonJournal();
    const before = toldLoop([search(), answer], { searchTools: true, maxIterations: 1 });
    const stopped = await before.loop.run({ runId: "r", journal, input: "where is my order?" }).catch((e) => e);
    expect(stopped.run?.reason).toBe("max-iterations");
    const settled = (await readJournal(journal, "r")).filter((e) => e.type === "call.settled");
    expect(settled.map((e) => e.data)).toMatchObject([{ reason: "search-tools", status: "ok" }]);

    const after = toldLoop([search(), answer]);
    const out = await after.loop.run({ runId: "r", journal });
    expect(out.content).toBe("It shipped.");
    expect(out.toolCallLog).toEqual([
      {
        iteration: 0,
        toolName: "search_tools",
        toolInput: { query: "order" },
        toolOutput: [{ name: "lookup", description: "looks an order up" }],
      },
    ]);
    expect(after.told()).toEqual([["lookup"]]); // turn 0 served; turn 1 told the loop's tools only
  });

  it("answers a recorded search_tools call whose result was not journaled yet (a crash right after the model's answer)", async () => {
    const recorded = jsonJournal();
    await toldLoop([search(), answer], { searchTools: true }).loop.run({ runId: "r", journal: recorded, input: "go" });
    // The journal as a crash left it: the model's answer asking for search_tools, nothing after it.
    const entries = await readJournal(recorded, "r");
    const cut = entries.findIndex((e) => e.type === "frame.completed" && e.data.frameId === "support#turn:0:model");
    const journal = createJournal({ store: memoryStore({ json: true }) });
    await journal.store.append(
      "r",
      entries.slice(0, cut + 1).map((e) => ({ type: e.type, data: e.data }) as never),
      { expectedVersion: 0 },
    );

    const after = toldLoop([search(), answer]);
    const out = await after.loop.run({ runId: "r", journal });
    expect(out.toolCallLog[0]?.toolOutput).toEqual([{ name: "lookup", description: "looks an order up" }]);
    const settled = (await readJournal(journal, "r")).filter((e) => e.type === "call.settled");
    expect(settled.map((e) => e.data)).toMatchObject([{ reason: "search-tools", status: "ok" }]);
  });
});
