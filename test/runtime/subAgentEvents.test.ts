import { describe, expect, it } from "vitest";
import { uiMessageChunks } from "../../src/ai-sdk/uiMessageChunks.ts";
import type { ModelResponse } from "../../src/events/types.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { RunEvent } from "../../src/projections/events.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { agentTool } from "../../src/runtime/run/agentTool.ts";
import { followRun } from "../../src/runtime/streaming/follow.ts";
import { subRunPath } from "../../src/runtime/streaming/subRunEvents.ts";
import { jsonJournal } from "../support/loop.ts";

const ask = (name: string, prompt: string): ModelResponse => ({
  toolCalls: [{ id: `${name}-1`, name, input: { prompt } }],
});
const CHILD = "p/planner#turn:0:tool:0";
const GRANDCHILD = `${CHILD}/researcher#turn:0:tool:0`;

/** planner → researcher → fact, two levels of sub-agents. */
function threeLevels() {
  const fact = agentLoop$({ id: "fact", model: scriptedModel([{ content: "tides at 6", toolCalls: [] }]) });
  const researcher = agentLoop$({
    id: "researcher",
    model: scriptedModel([ask("fact", "tides"), { content: "research done", toolCalls: [] }]),
    tools: { fact: agentTool(fact, { description: "a fact" }) },
  });
  return agentLoop$({
    id: "planner",
    model: scriptedModel([ask("research", "the sea"), { content: "plan done", toolCalls: [] }]),
    tools: { research: agentTool(researcher, { description: "researches" }) },
  });
}

/** `runId type` of each journaled event (deltas left out), in order. */
const story = (events: readonly RunEvent[]) => events.filter((e) => "cursor" in e).map((e) => `${e.runId} ${e.type}`);

/** What a two-level run tells, nested: each sub-agent's events inside its call, in the order they happened. */
const EXPECTED = [
  "p run-started",
  "p model-started",
  "p model-finished",
  "p tool-started",
  `${CHILD} run-started`,
  `${CHILD} model-started`,
  `${CHILD} model-finished`,
  `${CHILD} tool-started`,
  `${GRANDCHILD} run-started`,
  `${GRANDCHILD} model-started`,
  `${GRANDCHILD} model-finished`,
  `${GRANDCHILD} run-completed`,
  `${CHILD} tool-finished`,
  `${CHILD} model-started`,
  `${CHILD} model-finished`,
  `${CHILD} run-completed`,
  "p tool-finished",
  "p model-started",
  "p model-finished",
  "p run-completed",
];

describe("a sub-agent's events in its parent's stream", () => {
  it("loop.stream and onEvent carry the child's and grandchild's events, marked with their run ids", async () => {
    const journal = jsonJournal();
    const told: RunEvent[] = [];
    const stream = threeLevels().stream({ runId: "p", journal, input: "plan", onEvent: (e) => told.push(e) });
    const streamed: RunEvent[] = [];
    for await (const event of stream) streamed.push(event);
    expect((await stream.output).content).toBe("plan done");
    expect(story(streamed)).toEqual(EXPECTED);
    expect(story(told)).toEqual(EXPECTED);
    // The grandchild's model deltas come too (something watches the chain), under its run id.
    expect(streamed.some((e) => e.type === "text-delta" && e.runId === GRANDCHILD)).toBe(true);
    const nested = streamed.find((e) => e.runId === GRANDCHILD) as RunEvent;
    expect(subRunPath("p", nested)).toEqual(["planner#turn:0:tool:0", "researcher#turn:0:tool:0"]);
    expect(subRunPath("p", streamed[0] as RunEvent)).toEqual([]);
    expect(subRunPath("q", nested)).toBeUndefined();
  });

  it("followRun of the parent gives the sub-agents' events too (subRuns: false, only its own)", async () => {
    const journal = jsonJournal();
    await threeLevels().run({ runId: "p", journal, input: "plan" });
    const followed: RunEvent[] = [];
    for await (const event of followRun(journal, "p")) followed.push(event);
    // Each child's events inside its call: after the call's start, all before its end.
    expect(story(followed)).toEqual(EXPECTED);
    const own: RunEvent[] = [];
    for await (const event of followRun(journal, "p", { subRuns: false })) own.push(event);
    expect(story(own)).toEqual(EXPECTED.filter((l) => l.startsWith("p ")));
  });

  it("a sub-agent's approval is asked in its own events, nested; the parent's call asks none of its own", async () => {
    const journal = jsonJournal();
    const book = { description: "books", requiresApproval: true, execute: () => "booked" };
    const booker = agentLoop$({ id: "booker", model: scriptedModel([ask("book", "2")]), tools: { book } });
    const planner = agentLoop$({
      id: "planner",
      model: scriptedModel([ask("booking", "dinner")]),
      tools: { booking: agentTool(booker, { description: "books" }) },
    });
    const stream = planner.stream({ runId: "p", journal, input: "plan" });
    const events: RunEvent[] = [];
    for await (const event of stream) events.push(event);
    await expect(stream.output).rejects.toMatchObject({ run: { reason: "approval-pending" } });
    const asked = events.filter((e) => e.type === "approval-requested");
    expect(asked.map((e) => [e.runId, "stepId" in e ? e.stepId : ""])).toEqual([[CHILD, "booker#turn:0:tool:0"]]);
    const followed: RunEvent[] = [];
    for await (const event of followRun(journal, "p")) followed.push(event);
    expect(story(followed).filter((l) => l.endsWith("approval-requested"))).toEqual([`${CHILD} approval-requested`]);
    expect(story(followed).at(-1)).toBe("p run-interrupted");
  });

  it("toUIMessageStream shows a sub-agent's events as its call's progress, and ends with the parent", async () => {
    const journal = jsonJournal();
    const chunks = [];
    for await (const chunk of uiMessageChunks(threeLevels().stream({ runId: "p", journal, input: "plan" })))
      chunks.push(chunk);
    const progress = chunks.filter((c) => c.type === "data-loom-subagent");
    expect(progress.length).toBeGreaterThan(0);
    expect(progress.every((c) => c.type === "data-loom-subagent" && c.data.toolCallId === "research-1")).toBe(true);
    expect(chunks.filter((c) => c.type === "finish")).toHaveLength(1);
    expect(chunks.at(-1)).toEqual({ type: "finish", finishReason: "stop" });
    const texts = chunks.filter((c) => c.type === "text-delta").map((c) => (c.type === "text-delta" ? c.delta : ""));
    expect(texts.join("")).toBe("plan done"); // the sub-agents' text stays in their progress
  });
});
