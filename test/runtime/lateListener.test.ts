import { describe, expect, it } from "vitest";
import { memoryStore } from "../../src/events/memory.ts";
import type { NewEntry } from "../../src/events/types.ts";
import { type RunEvent, runEventsOf } from "../../src/projections/events.ts";
import { foldEntries } from "../../src/projections/runState.ts";
import { Appender } from "../../src/runtime/base/appender.ts";
import { RunEventEmitter } from "../../src/runtime/streaming/events.ts";
import { buildRun, type CallPlan } from "../projections/runBuilder.ts";

/**
 * The run's events are folded only while something listens: entries appended before a listener
 * came wait, and are folded (their events told to nobody) when it comes. A listener that comes
 * late must still be told exactly what the journal's fold gives for the entries after it came.
 */
async function eventsAfterLateListener(turns: number, listenAfter: number) {
  const calls = (i: number): CallPlan[] => [
    { kind: "ok", name: "search", input: { q: i }, output: { hits: [i, i + 1] } },
    { kind: "failed", name: "fetch", input: { page: i }, failure: { error: `page ${i} is gone` } },
    { kind: "settled", name: "fetch", input: { page: -i }, status: "error", reason: "unknown-tool", result: "no" },
  ];
  const plan = { loopId: "late", runId: "r", turns: Array.from({ length: turns }, (_, i) => ({ calls: calls(i) })) };
  const { entries } = buildRun({ ...plan, complete: true });
  const store = memoryStore();
  const appender = new Appender(store, "r", foldEntries([]));
  const emitter = new RunEventEmitter(store, "r");
  emitter.attach(appender);
  const told: RunEvent[] = [];
  for (const [i, entry] of entries.entries()) {
    if (i === listenAfter) emitter.listen((e) => told.push(e));
    await appender.append(entry as NewEntry);
  }
  const all = runEventsOf(await store.read("r"));
  return { told, expected: all.filter((e) => e.cursor > listenAfter), entries: entries.length };
}

describe("a listener that comes after the run appended", () => {
  it("is told what the journal's fold gives from there on: tool names, inputs and attempts it did not see start", async () => {
    const { told, expected } = await eventsAfterLateListener(4, 4);
    expect(told.length).toBeGreaterThan(5);
    expect(told).toEqual(expected);
    expect(told.some((e) => e.type === "tool-finished" && e.toolName === "search")).toBe(true);
  });

  it("is told the same once more entries waited than the emitter keeps unfolded", async () => {
    const turns = 700; // about 7 entries a turn: past the 4096 kept unfolded
    const { told, expected, entries } = await eventsAfterLateListener(turns, 4500);
    expect(entries).toBeGreaterThan(4600);
    expect(told).toEqual(expected);
    expect(told.length).toBeGreaterThan(0);
  });
});
