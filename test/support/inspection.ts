import type { AnyActorRef, InspectionEvent } from "xstate";
import { scriptedModel } from "../../src/models/scripted.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { agentTool } from "../../src/runtime/run/agentTool.ts";

/** Sub-agents under an inspector: a chain of loops, and the actor tree an inspector builds of its events. */

export type Ref = AnyActorRef & { _parent?: Ref };

/** Whether `ref` runs a loop's chart (the agentLoop machine of any loop). */
export const isLoop = (ref: unknown) =>
  (ref as { logic?: { config?: { id?: string } } }).logic?.config?.id === "agentLoop";

/** planner → researcher → searcher (two levels), each answering after its one tool call. */
export function chain() {
  const searcher = agentLoop$({
    id: "searcher",
    model: scriptedModel(({ turn }) =>
      turn === 0 ? { toolCalls: [{ id: "s", name: "look", input: {} }] } : { content: "found", toolCalls: [] },
    ),
    tools: { look: { description: "looks", execute: () => "page" } },
  });
  const researcher = agentLoop$({
    id: "researcher",
    model: scriptedModel(({ turn }) =>
      turn === 0
        ? { toolCalls: [{ id: "r", name: "search", input: { prompt: "q" } }] }
        : { content: "researched", toolCalls: [] },
    ),
    tools: { search: agentTool(searcher, { description: "searches" }) },
  });
  return agentLoop$({
    id: "planner",
    model: scriptedModel(({ turn }) =>
      turn === 0
        ? {
            toolCalls: [
              { id: "p", name: "add", input: {} },
              { id: "d", name: "research", input: { prompt: "q" } },
            ],
          }
        : { content: "planned", toolCalls: [] },
    ),
    tools: {
      add: { description: "adds", execute: () => 1 },
      research: agentTool(researcher, { description: "researches" }),
    },
  });
}

/**
 * The actor tree as an inspector builds it (@statelyai/inspect: each `@xstate.actor` event names
 * its actor's parent by `_parent.sessionId`), and for each loop chart's actor the ids of its
 * parents up to the root.
 */
export function loopActors(events: InspectionEvent[]) {
  const parentOf = new Map<string, Ref | undefined>();
  for (const e of events)
    if (e.type === "@xstate.actor") parentOf.set(e.actorRef.sessionId, (e.actorRef as Ref)._parent);
  return events
    .filter((e) => e.type === "@xstate.actor" && isLoop(e.actorRef))
    .map((e) => {
      const path: string[] = [];
      for (let at = parentOf.get(e.actorRef.sessionId); at !== undefined; at = parentOf.get(at.sessionId)) {
        path.push(at.id);
      }
      return { id: (e.actorRef as Ref).id, rootId: e.rootId, parents: path };
    });
}
