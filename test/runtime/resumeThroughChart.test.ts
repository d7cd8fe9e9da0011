import { describe, expect, it } from "vitest";
import type { AnyActorRef, InspectionEvent } from "xstate";
import {
  agentLoop$,
  createJournal,
  isAgentInterruptedError,
  type ModelResponse,
  memoryStore,
  readJournal,
} from "../../src/index.ts";

/**
 * Resuming is running the chart again from turn 0: recorded steps are served by the durable step,
 * none runs twice, and a turn whose calls all ended goes straight on (`turnSettled`) without a
 * call dispatched; the first turn with work left is dispatched as in a live run.
 */
function counted(limit: number) {
  const calls = { model: 0, tool: 0 };
  const loop = agentLoop$({
    id: "walk",
    maxIterations: limit,
    model: {
      async generate({ messages }) {
        calls.model++;
        const turn = messages.filter((m) => m.role === "assistant").length;
        return (
          turn < 5
            ? { toolCalls: [{ id: `c${turn}`, name: "lookup", input: { turn } }] }
            : { content: "done", toolCalls: [] }
        ) satisfies ModelResponse;
      },
    },
    tools: {
      lookup: {
        description: "looks up",
        execute: async (input) => {
          calls.tool++;
          return { seen: input };
        },
      },
    },
  });
  return { loop, calls };
}

describe("resume walks the chart from turn 0", () => {
  it("serves every recorded step, dispatches no call of a settled turn, and goes on where the run stopped", async () => {
    const journal = createJournal({ store: memoryStore() });
    const first = counted(3);
    const stopped = await first.loop.run({ runId: "w", input: "go", journal }).catch((e) => e);
    expect(isAgentInterruptedError(stopped) && stopped.run.reason).toBe("max-iterations");
    expect(first.calls).toEqual({ model: 3, tool: 3 });
    const before = (await readJournal(journal, "w")).length;

    const second = counted(10);
    const spawned: string[] = [];
    const dispatched: number[] = []; // the turns whose calls the loop told its plainCalls actor to run
    const states: string[] = [];
    const out = await second.loop.run({
      runId: "w",
      journal,
      inspect: (e: InspectionEvent) => {
        const id = (e.actorRef as AnyActorRef).id;
        if (e.type === "@xstate.actor" && id.startsWith("call:")) spawned.push(id);
        if (e.type === "@xstate.event" && id === "plainCalls" && e.event.type === "CALLS.RUN") {
          for (const call of (e.event as unknown as { calls: { turn: number }[] }).calls) dispatched.push(call.turn);
        }
        const snapshot =
          e.type === "@xstate.snapshot" ? (e.snapshot as { machine?: { id?: string }; value?: unknown }) : undefined;
        if (snapshot?.machine?.id === "agentLoop") states.push(JSON.stringify(snapshot.value));
      },
    });
    expect(out.content).toBe("done");
    // Turns 0–2 were served: only turns 3 and 4 called the model and the tool again (plus the answer).
    expect(second.calls).toEqual({ model: 3, tool: 2 });
    expect(dispatched).toEqual([3, 4]); // the calls of turns 3 and 4, none of 0–2
    expect(spawned).toEqual([]); // a call that cannot wait is no actor of its own
    expect(states[0]).toBe('"starting"');
    expect(states.filter((s) => s.includes("dispatching"))).toHaveLength(2);
    // Nothing recorded was journaled again: the resume appended only the new turns and the end.
    const entries = await readJournal(journal, "w");
    const frameIds = entries
      .filter((e) => e.type === "frame.started")
      .map((e) => (e.data as { frameId: string }).frameId);
    expect(new Set(frameIds).size).toBe(frameIds.length);
    expect(entries.length).toBeGreaterThan(before);
  });
});
