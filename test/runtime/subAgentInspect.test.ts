import { createInspector, type StatelyInspectionEvent } from "@statelyai/inspect";
import { describe, expect, it } from "vitest";
import type { InspectionEvent } from "xstate";
import { createJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { agentTool } from "../../src/runtime/run/agentTool.ts";
import { chain, isLoop, loopActors, type Ref } from "../support/inspection.ts";

describe("the inspector sees a sub-agent's run as a child actor of the parent's tool call", () => {
  it("nests each sub-agent's loop actor under the call that runs it, in the parent's one actor tree", async () => {
    const events: InspectionEvent[] = [];
    const journal = createJournal({ store: memoryStore({ json: true }) });
    const out = await chain().run({ runId: "p", journal, input: "go", inspect: (e) => events.push(e) });
    expect(out.content).toBe("planned");
    const root = events[0]?.actorRef as Ref;
    expect(events[0]?.type).toBe("@xstate.actor");
    // One tree: every event (the sub-agents' too) names the parent's root actor as its root.
    expect(new Set(events.map((e) => e.rootId))).toEqual(new Set([root.sessionId]));
    const [top, child, grandchild] = loopActors(events);
    expect(loopActors(events)).toHaveLength(3);
    expect(top).toEqual({ id: root.id, rootId: root.sessionId, parents: [] });
    // The researcher's chart under the planner's call 1 (research), the searcher's under the researcher's call 0.
    expect(child).toMatchObject({ rootId: root.sessionId, parents: ["call:1", root.id] });
    expect(grandchild).toMatchObject({ rootId: root.sessionId, parents: ["call:0", child?.id, "call:1", root.id] });
    // The sub-agents' charts are seen walking to completed, as the parent's is.
    const finals = events
      .filter((e) => e.type === "@xstate.snapshot" && isLoop(e.actorRef))
      .filter((e) => (e as { snapshot: { status?: string } }).snapshot.status === "done");
    expect(finals.map((e) => (e as { snapshot: { value?: unknown } }).snapshot.value)).toEqual([
      "completed",
      "completed",
      "completed",
    ]);
  });

  it("reaches @statelyai/inspect as the sub-agent's actor with the call as its parent, in the parent's root", async () => {
    const sent: StatelyInspectionEvent[] = [];
    const inspector = createInspector({ send: (e) => sent.push(e), start() {}, stop() {} });
    const raw: InspectionEvent[] = [];
    const journal = createJournal({ store: memoryStore({ json: true }) });
    await chain().run({
      runId: "p",
      journal,
      input: "go",
      inspect: (e) => {
        raw.push(e);
        inspector.inspect.next?.(e);
      },
    });
    await new Promise((resolve) => setTimeout(resolve, 50)); // the inspector converts events when idle
    const root = raw[0]?.actorRef as Ref;
    const loops = sent.filter(
      (e) => e.type === "@xstate.actor" && (JSON.parse(e.definition ?? "{}") as { id?: string }).id === "agentLoop",
    );
    const sessionOf = (id: string) =>
      raw.find((e) => e.type === "@xstate.actor" && (e.actorRef as Ref).id === id && e.actorRef !== root)?.actorRef
        .sessionId;
    expect(loops.map((e) => e.rootId)).toEqual([root.sessionId, root.sessionId, root.sessionId]);
    expect(loops[0]?.type === "@xstate.actor" && loops[0].parentId).toBeUndefined();
    // The researcher's parent is the planner's call:1 (only the planner has a call 1).
    expect(loops[1]?.type === "@xstate.actor" && loops[1].parentId).toBe(sessionOf("call:1"));
  });

  it("shows a sub-agent whose tool the caller wrapped (no longer known as agentTool's) under the run's plainCalls actor", async () => {
    const child = agentLoop$({ id: "helper", model: scriptedModel(() => ({ content: "helped", toolCalls: [] })) });
    const made = agentTool(child, { description: "helps" });
    const wrapped = { ...made, execute: made.execute }; // a copy: a plain call, not a toolCall chart
    const parent = agentLoop$({
      id: "boss",
      model: scriptedModel(({ turn }) =>
        turn === 0
          ? { toolCalls: [{ id: "h", name: "help", input: { prompt: "q" } }] }
          : { content: "done", toolCalls: [] },
      ),
      tools: { help: wrapped },
    });
    const events: InspectionEvent[] = [];
    const journal = createJournal({ store: memoryStore({ json: true }) });
    expect((await parent.run({ runId: "b", journal, input: "go", inspect: (e) => events.push(e) })).content).toBe(
      "done",
    );
    const root = events[0]?.actorRef as Ref;
    const [, helper] = loopActors(events);
    expect(helper).toMatchObject({ rootId: root.sessionId, parents: ["plainCalls", root.id] });
  });
});
