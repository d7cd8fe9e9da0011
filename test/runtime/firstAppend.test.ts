import { describe, expect, it } from "vitest";
import { memoryStore } from "../../src/events/memory.ts";
import type { EventStore } from "../../src/events/store.ts";
import type { EntryType } from "../../src/events/types.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { crashingStore, jsonJournal } from "../support/loop.ts";

/** A store that keeps the entry types of each append it makes. */
function recording(inner: EventStore, appends: EntryType[][]): EventStore {
  return {
    ...inner,
    async append(runId, entries, options) {
      const result = await inner.append(runId, entries, options);
      appends.push(entries.map((e) => e.type));
      return result;
    },
  };
}

/** A loop of one tool turn and an answer; `calls` gets each model call, with the appends made before it. */
function oneToolLoop(calls: string[], appends: readonly unknown[] = [], runMs?: number) {
  return agentLoop$({
    id: "first",
    model: scriptedModel(({ turn }) => {
      calls.push(`model:${turn} after ${appends.length}`);
      return turn === 0
        ? { toolCalls: [{ id: "c0", name: "echo", input: { x: 1 } }] }
        : { content: "done", toolCalls: [] };
    }),
    tools: { echo: { description: "echoes", execute: (input) => input } },
    ...(runMs === undefined ? {} : { timeouts: { runMs } }),
  });
}

describe("a new run's first append", () => {
  it("carries run.started with the first model call's frame.started: one commit, before the model is called", async () => {
    const appends: EntryType[][] = [];
    const calls: string[] = [];
    const loop = oneToolLoop(calls, appends);
    const out = await loop.run({
      runId: "r",
      input: "go",
      journal: jsonJournal(recording(memoryStore({ json: true }), appends)),
    });
    expect(out.content).toBe("done");
    expect(calls).toEqual(["model:0 after 1", "model:1 after 3"]);
    expect(appends).toEqual([
      ["run.started", "frame.started"],
      ["frame.completed", "frame.started"],
      ["frame.completed", "frame.started"],
      ["frame.completed", "run.completed"],
    ]);
  });

  it("a crash before it leaves no journal: the run is new again, and resuming without input says so", async () => {
    const store = memoryStore({ json: true });
    const calls: string[] = [];
    const loop = oneToolLoop(calls);
    await expect(loop.run({ runId: "r", input: "go", journal: jsonJournal(crashingStore(store, 0)) })).rejects.toThrow(
      /simulated crash/,
    );
    expect(calls).toEqual([]); // the model is never called before its frame.started is durable
    expect(await store.read("r")).toEqual([]);
    await expect(loop.run({ runId: "r", journal: jsonJournal(store) })).rejects.toMatchObject({
      code: "missingInput",
      message: expect.stringMatching(/run r has no journal yet, so it needs an input/),
    });
    const out = await loop.run({ runId: "r", input: "go", journal: jsonJournal(store) });
    expect(out.content).toBe("done");
    expect(calls).toEqual(["model:0 after 0", "model:1 after 0"]);
  });

  it("a run holding only run.started (as submitRun writes it) writes its late decisions with the first frame.started", async () => {
    const first = memoryStore({ json: true });
    await oneToolLoop([]).run({ runId: "r", input: "go", journal: jsonJournal(first) });
    const [started] = await first.read("r");
    const store = memoryStore({ json: true });
    await store.append("r", [{ type: "run.started", data: started?.data }] as never, { expectedVersion: 0 });
    const appends: EntryType[][] = [];
    const calls: string[] = [];
    // A deadline configured after the run started is decided on this resume (it runs from now).
    const loop = oneToolLoop(calls, appends, 60_000);
    const out = await loop.run({ runId: "r", journal: jsonJournal(recording(store, appends)) });
    expect(out.content).toBe("done");
    // That decision rides with the model call's frame.started: no commit of its own.
    expect(appends[0]).toEqual(["decision.recorded", "frame.started"]);
    expect(calls[0]).toBe("model:0 after 1");
    expect(appends.length).toBe(4);
  });
});
