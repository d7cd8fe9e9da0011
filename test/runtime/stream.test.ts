import { describe, expect, it } from "vitest";
import { readJournal } from "../../src/events/journal.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { ModelResponse } from "../../src/models/types.ts";
import { type RunEvent, runEventsOf } from "../../src/projections/events.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { isAgentInterruptedError } from "../../src/runtime/base/errors.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { EventQueue } from "../../src/runtime/streaming/events.ts";
import { journalText } from "../support/journalText.ts";
import { jsonJournal } from "../support/loop.ts";

const tools: Record<string, Tool> = {
  add: { description: "adds", execute: (input) => ({ sum: (input as { a: number }).a + 1 }) },
  pay: { description: "needs a yes", requiresApproval: true, execute: () => ({ paid: true }) },
};

/** `turns` turns of one add call each (two on the first), then an answer. */
const script = (turns: number): ModelResponse[] => [
  ...Array.from({ length: turns }, (_, i) => ({
    content: `step ${i}`,
    toolCalls: [
      { id: `c${i}`, name: "add", input: { a: i } },
      ...(i === 0 ? [{ id: "x", name: "add", input: { a: 100 } }] : []),
    ],
  })),
  { content: "the end", toolCalls: [] },
];

const loopOf = (turns: number, toolCallLog?: "lean") =>
  agentLoop$({ id: "st", model: scriptedModel(script(turns)), tools, ...(toolCallLog ? { toolCallLog } : {}) });

/** The journal as the store keeps it, but for the wall clock of each append. */
/** The journaled events (the model's deltas, live only, left out): what the journal's fold gives. */
const journaled = (events: RunEvent[]) => events.filter((e) => "cursor" in e);

async function collect(stream: AsyncIterable<RunEvent>): Promise<RunEvent[]> {
  const events: RunEvent[] = [];
  for await (const event of stream) events.push(event);
  return events;
}

describe("loop.stream", () => {
  it("gives the run's journaled events, exactly the fold of what it journaled, and its value", async () => {
    const journal = jsonJournal();
    const stream = loopOf(4).stream({ runId: "s", input: "go", journal });
    const events = await collect(stream);
    const output = await stream.output;
    expect(output.content).toBe("the end");
    expect(journaled(events)).toEqual(runEventsOf(await readJournal(journal, "s")));
    expect(events.at(-1)).toMatchObject({ type: "run-completed", content: "the end", iterations: 5 });
  });

  it("writes the journal run writes, byte for byte but the clock", async () => {
    const a = jsonJournal();
    const b = jsonJournal();
    await loopOf(3, "lean").run({ runId: "same", input: "go", journal: a });
    const stream = loopOf(3, "lean").stream({ runId: "same", input: "go", journal: b });
    const events = await collect(stream);
    await stream.output;
    expect(journalText(await readJournal(b, "same"))).toEqual(journalText(await readJournal(a, "same")));
    // A lean run's events carry digests, not outputs.
    const finished = events.filter((e) => e.type === "tool-finished");
    expect(finished).toHaveLength(4);
    for (const e of finished)
      expect(e).toEqual(expect.objectContaining({ digest: expect.any(String), bytes: expect.any(Number) }));
    expect(finished.some((e) => "output" in e)).toBe(false);
  });

  it("tells run({ onEvent }) the same events", async () => {
    const journal = jsonJournal();
    const told: RunEvent[] = [];
    await loopOf(2).run({ runId: "cb", input: "go", journal, onEvent: (e) => told.push(e) });
    expect(journaled(told)).toEqual(runEventsOf(await readJournal(journal, "cb")));
  });

  it("a listener that throws changes nothing in the run", async () => {
    const journal = jsonJournal();
    const output = await loopOf(2).run({
      runId: "throws",
      input: "go",
      journal,
      onEvent: () => {
        throw new Error("watcher bug");
      },
    });
    expect(output.content).toBe("the end");
  });

  it("a resumed run streams the events after its journal, folded on from it", async () => {
    const journal = jsonJournal();
    const loop = agentLoop$({
      id: "ap",
      model: scriptedModel([
        { toolCalls: [{ id: "p", name: "pay", input: { n: 1 } }] },
        { content: "paid", toolCalls: [] },
      ]),
      tools,
    });
    const first = loop.stream({ runId: "ap", input: "go", journal });
    const before = await collect(first); // an interruption ends the iteration; output rejects
    await expect(first.output).rejects.toSatisfy(isAgentInterruptedError);
    expect(before.slice(-2).map((e) => e.type)).toEqual(["approval-requested", "run-interrupted"]);
    const second = loop.stream({ runId: "ap", journal, approvals: { "ap#turn:0:tool:0": true } });
    const after = await collect(second);
    const last = (before.at(-1) as { cursor: number }).cursor;
    expect(journaled(after)).toEqual(runEventsOf(await readJournal(journal, "ap")).filter((e) => e.cursor > last));
    expect(after.find((e) => e.type === "tool-finished")).toMatchObject({ toolName: "pay", output: { paid: true } });
  });

  it("a consumer that reads nothing until the end still gets every journaled event", async () => {
    const journal = jsonJournal();
    const stream = loopOf(30).stream({ runId: "late", input: "go", journal });
    await stream.output;
    expect(journaled(await collect(stream))).toEqual(runEventsOf(await readJournal(journal, "late")));
  });

  it("throws what run throws, other than an interruption", async () => {
    const journal = jsonJournal();
    const stream = loopOf(1).stream({ runId: "no-input", journal });
    await expect(collect(stream)).rejects.toThrow(/needs an input/);
    await expect(stream.output).rejects.toThrow(/needs an input/);
  });
});

describe("EventQueue: a slow consumer's buffer", () => {
  const delta = (attempt: number, d: string): RunEvent => ({
    type: "text-delta",
    runId: "r",
    stepId: "m",
    attempt,
    delta: d,
  });
  const journaled = (cursor: number): RunEvent => ({ type: "run-cancelled", runId: "r", cursor, reason: "" });

  it("drops deltas past its limit, and the rest of that attempt's, never journaled events", async () => {
    const queue = new EventQueue(3);
    queue.push(delta(1, "a"));
    queue.push(delta(1, "b"));
    queue.push(journaled(1));
    queue.push(delta(1, "c")); // full: dropped
    for (let i = 2; i < 100; i++) queue.push(journaled(i));
    queue.end();
    const out: RunEvent[] = [];
    const reader = (async () => {
      for await (const e of queue) out.push(e);
    })();
    await reader;
    expect(out.filter((e) => e.type === "text-delta").map((e) => (e as { delta: string }).delta)).toEqual(["a", "b"]);
    expect(out.filter((e) => "cursor" in e)).toHaveLength(99);
    expect(queue.dropped).toBe(1);
    const later = new EventQueue(3);
    for (let i = 0; i < 3; i++) later.push(journaled(i));
    later.push(delta(1, "x")); // dropped
    await later[Symbol.asyncIterator]().next(); // room again
    later.push(delta(1, "y")); // the same attempt: still dropped (no hole in its text)
    later.push(delta(2, "z")); // another attempt: kept
    later.end();
    const rest: RunEvent[] = [];
    for await (const e of later) rest.push(e);
    expect(rest.filter((e) => e.type === "text-delta").map((e) => (e as { delta: string }).delta)).toEqual(["z"]);
  });
});

describe("what a watcher is given", () => {
  it("is frozen: a watcher cannot change the output the model is fed next", async () => {
    const journal = jsonJournal();
    const seen: unknown[] = [];
    const model = scriptedModel(({ messages, turn }) => {
      seen.push(structuredClone(messages.filter((m) => m.role === "tool").map((m) => m.output)));
      return turn === 0 ? script(1)[0]! : { content: "ok", toolCalls: [] };
    });
    const loop = agentLoop$({ id: "fz", model, tools });
    let refused = 0;
    await loop.run({
      runId: "fz",
      input: "go",
      journal,
      onEvent: (e) => {
        if (e.type !== "tool-finished") return;
        try {
          (e.output as { sum: number }).sum = 999;
        } catch {
          refused++;
        }
      },
    });
    expect(refused).toBe(2);
    expect(seen.at(-1)).toEqual([{ sum: 1 }, { sum: 101 }]);
  });
});
