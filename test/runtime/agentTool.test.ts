import { describe, expect, it } from "vitest";
import { readJournal } from "../../src/events/journal.ts";
import type { ModelResponse } from "../../src/events/types.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { agentTool } from "../../src/runtime/run/agentTool.ts";
import { jsonJournal } from "../support/loop.ts";

const ask = (id: string, name: string, prompt: string): ModelResponse => ({
  toolCalls: [{ id, name, input: { prompt } }],
});
/** The text of the conversation's last tool result. */
const lastResult = (messages: readonly { role: string; output?: unknown }[]) =>
  JSON.stringify(messages.filter((m) => m.role === "tool").at(-1)?.output);

/** planner → researcher → fact: each a loop, each model counted. */
function threeLevels(more: { factDepth?: number; onFact?: () => void } = {}) {
  const models = {
    fact: scriptedModel(({ messages }) => {
      more.onFact?.();
      return { content: `fact about ${(messages[0] as { content: string }).content}`, toolCalls: [] };
    }),
    researcher: scriptedModel(({ turn, messages }) =>
      turn === 0 ? ask("r1", "fact", "tides") : { content: `research: ${lastResult(messages)}`, toolCalls: [] },
    ),
    planner: scriptedModel(({ turn, messages }) =>
      turn === 0 ? ask("p1", "research", "the sea") : { content: `plan: ${lastResult(messages)}`, toolCalls: [] },
    ),
  };
  const fact = agentLoop$({ id: "fact", model: models.fact });
  const researcher = agentLoop$({
    id: "researcher",
    model: models.researcher,
    tools: { fact: agentTool(fact, { description: "a fact", maxDepth: more.factDepth }) },
  });
  const planner = agentLoop$({
    id: "planner",
    model: models.planner,
    tools: { research: agentTool(researcher, { description: "researches" }) },
  });
  return { planner, models };
}

describe("agentTool: a loop run as a child run of a tool call", () => {
  it("runs two levels deep, each child a run <parentRunId>/<stepId> in the same journal", async () => {
    const journal = jsonJournal();
    const { planner, models } = threeLevels();
    const out = await planner.run({ runId: "p", journal, input: "plan" });
    expect(out.content).toBe('plan: "research: \\"fact about tides\\""');
    const runs = (await journal.store.listRuns()).map((r) => r.runId).sort();
    expect(runs).toEqual(["p", "p/planner#turn:0:tool:0", "p/planner#turn:0:tool:0/researcher#turn:0:tool:0"]);
    expect((await readJournal(journal, "p/planner#turn:0:tool:0"))[0]?.data).toMatchObject({
      loopId: "researcher",
      input: "the sea",
    });
    expect([models.planner.calls, models.researcher.calls, models.fact.calls]).toEqual([2, 2, 1]);
  });

  it("resumes the child where it stopped when the parent resumes: no model call repeated", async () => {
    const journal = jsonJournal();
    const stop = new AbortController();
    const first = threeLevels({ onFact: () => stop.abort() }); // stops while the grandchild's model answers
    const stopped = await first.planner
      .run({ runId: "p", journal, input: "plan", signal: stop.signal })
      .catch((e) => e);
    expect(stopped.run?.reason).toBe("aborted");
    expect([first.models.planner.calls, first.models.researcher.calls, first.models.fact.calls]).toEqual([1, 1, 1]);

    const second = threeLevels();
    const out = await second.planner.run({ runId: "p", journal });
    expect(out.content).toBe('plan: "research: \\"fact about tides\\""');
    // Served from the journal: planner turn 0 and researcher turn 0; the grandchild's cut-off call is asked again.
    expect([second.models.planner.calls, second.models.researcher.calls, second.models.fact.calls]).toEqual([1, 1, 1]);
    const third = threeLevels();
    await expect(third.planner.run({ runId: "p", journal })).resolves.toEqual(out);
    expect([third.models.planner.calls, third.models.researcher.calls, third.models.fact.calls]).toEqual([0, 0, 0]);
  });

  it("called by hand without a run's context, it fails with a named error that says where it belongs", async () => {
    const child = agentLoop$({
      id: "child",
      model: scriptedModel(() => ({ content: "hi", toolCalls: [] })),
      tools: {},
    });
    const tool = agentTool(child, { description: "asks the child" });
    await expect(tool.execute({ prompt: "x" }, { stepId: "s" } as never)).rejects.toMatchObject({
      name: "LoomError",
      code: "agentToolOutsideRun",
      message: expect.stringContaining("give it to a loop's tools"),
    });
  });

  it("refuses a chain deeper than maxDepth with SubAgentLimitError, told to the model", async () => {
    const journal = jsonJournal();
    const { planner, models } = threeLevels({ factDepth: 1 });
    const out = await planner.run({ runId: "p", journal, input: "plan" });
    expect(models.fact.calls).toBe(0);
    const researcherLog = (await readJournal(journal, "p/planner#turn:0:tool:0")).filter(
      (e) => e.type === "decision.recorded",
    );
    expect(researcherLog[0]?.data).toMatchObject({
      choice: {
        failed: { error: "SubAgentLimitError", message: expect.stringContaining("2 sub-agents deep; at most 1") },
      },
    });
    expect(out.content).toContain("SubAgentLimitError");
  });

  it("refuses children past maxConcurrent for one parent run", async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const slow: Tool = { description: "waits", execute: () => gate.then(() => "done") };
    const child = agentLoop$({
      id: "child",
      model: scriptedModel(({ turn }) =>
        turn === 0 ? { toolCalls: [{ id: "s", name: "slow", input: {} }] } : { content: "child done", toolCalls: [] },
      ),
      tools: { slow },
    });
    const parent = agentLoop$({
      id: "parent",
      model: scriptedModel(({ turn }) =>
        turn === 0
          ? { toolCalls: [ask("a", "sub", "one").toolCalls[0]!, ask("b", "sub", "two").toolCalls[0]!] }
          : { content: "ok", toolCalls: [] },
      ),
      tools: { sub: agentTool(child, { description: "a child", maxConcurrent: 1 }) },
    });
    setTimeout(release, 50);
    const out = await parent.run({ runId: "p", journal: jsonJournal(), input: "go" });
    const outputs = out.toolCallLog.map((s) => s.toolOutput);
    expect(outputs.filter((o) => o === "child done")).toHaveLength(1);
    expect(outputs.filter((o) => (o as { error?: string }).error === "SubAgentLimitError")).toHaveLength(1);
  });

  it("fails the call with SubAgentInterruptedError when the child stops before its answer", async () => {
    const child = agentLoop$({
      id: "child",
      model: scriptedModel([{ toolCalls: [{ id: "x", name: "nothing", input: {} }] }]),
      maxIterations: 1,
    });
    const parent = agentLoop$({
      id: "parent",
      model: scriptedModel([ask("a", "sub", "go"), { content: "gave up", toolCalls: [] }]),
      tools: { sub: agentTool(child, { description: "a child" }) },
    });
    const out = await parent.run({ runId: "p", journal: jsonJournal(), input: "go" });
    expect(out.toolCallLog[0]?.toolOutput).toEqual({
      error: "SubAgentInterruptedError",
      message:
        "the sub-agent run p/parent#turn:0:tool:0 stopped (max-iterations) before its answer; it stays in the journal as it stopped",
    });
  });
});
