import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { OpenJournal } from "../../src/events/journal.ts";
import { openSqliteJournal, readJournal } from "../../src/events/journal.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { ModelResponse } from "../../src/models/types.ts";
import { type RunEvent, runEventsOf } from "../../src/projections/events.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { RunEventEmitter } from "../../src/runtime/streaming/events.ts";
import { followRun } from "../../src/runtime/streaming/follow.ts";
import { tempDir } from "../events/tmp.ts";
import { closedAfterAll } from "../support/journalFile.ts";
import { jsonJournal } from "../support/loop.ts";
import { startWorker } from "../support/processes.ts";

let tmp: ReturnType<typeof tempDir>;
beforeAll(() => {
  tmp = tempDir("loom-follow-");
});
afterAll(() => tmp.remove());

const tools: Record<string, Tool> = {
  add: {
    description: "adds after a pause",
    execute: async (input) => {
      await new Promise((r) => setTimeout(r, 2));
      return { sum: (input as { a: number }).a + 1 };
    },
  },
};
const script = (turns: number): ModelResponse[] => [
  ...Array.from({ length: turns }, (_, i) => ({
    content: `step ${i}`,
    toolCalls: [
      { id: `c${i}`, name: "add", input: { a: i } },
      { id: `d${i}`, name: "add", input: { a: -i } },
    ],
  })),
  { content: "the end", toolCalls: [] },
];
const loopOf = (turns: number) => agentLoop$({ id: "f", model: scriptedModel(script(turns)), tools });

/** The journaled events (the model's deltas, live only, left out): what the journal's fold gives. */
const journaled = (events: RunEvent[]) => events.filter((e) => "cursor" in e);

async function collect(events: AsyncIterable<RunEvent>): Promise<RunEvent[]> {
  const out: RunEvent[] = [];
  for await (const e of events) out.push(e);
  return out;
}

const journals: [string, () => OpenJournal][] = [
  ["memory", () => jsonJournal()],
  ["sqlite", () => openSqliteJournal(tmp.file("follow.db"))],
];

describe.each(journals)("followRun on %s", (_, openJournal) => {
  const open = closedAfterAll(openJournal);
  it("reconnecting at every cursor of a 5-turn run yields exactly the rest", async () => {
    const journal = open();
    await loopOf(5).run({ runId: "five", input: "go", journal });
    const all = runEventsOf(await readJournal(journal, "five"));
    expect(await collect(followRun(journal, "five"))).toEqual(all);
    const cursors = [...new Set(all.map((e) => e.cursor))];
    for (const after of cursors) {
      const rest = await collect(followRun(journal, "five", { after }));
      expect(rest).toEqual(all.filter((e) => e.cursor > after));
    }
  });

  it("follows a run live from before its first entry to its last", async () => {
    const journal = open();
    const following = collect(followRun(journal, "live"));
    await new Promise((r) => setTimeout(r, 5));
    await loopOf(3).run({ runId: "live", input: "go", journal });
    expect(journaled(await following)).toEqual(runEventsOf(await readJournal(journal, "live")));
  });

  it("ends when its signal aborts", async () => {
    const journal = open();
    const controller = new AbortController();
    const following = collect(followRun(journal, "never", { signal: controller.signal }));
    setTimeout(() => controller.abort(), 20);
    expect(await following).toEqual([]);
  });

  it("a replay read in one batch still ends at the next event once its signal aborts, and a consumer that stops early stops it", async () => {
    const journal = open();
    await loopOf(3).run({ runId: "short", input: "go", journal });
    const controller = new AbortController();
    const seen: RunEvent[] = [];
    for await (const e of followRun(journal, "short", { signal: controller.signal })) {
      seen.push(e);
      if (seen.length === 3) controller.abort();
    }
    expect(seen).toEqual(runEventsOf(await readJournal(journal, "short")).slice(0, 3));
    const first: RunEvent[] = [];
    for await (const e of followRun(journal, "short")) {
      first.push(e);
      break;
    }
    expect(first.map((e) => e.type)).toEqual(["run-started"]);
    // Stopped, not left waiting: another follow of it gives the whole run again.
    expect(await collect(followRun(journal, "short"))).toEqual(runEventsOf(await readJournal(journal, "short")));
  });
});

describe("followRun", () => {
  it("carries the live deltas of a run this process runs, and drops those of a finished call", async () => {
    const journal = jsonJournal();
    const emitter = new RunEventEmitter(journal.store, "deltas");
    await journal.store.append("deltas", [{ type: "run.started", data: { loopId: "f", input: "x", tools: [] } }], {
      expectedVersion: 0,
    });
    const controller = new AbortController();
    const seen: RunEvent[] = [];
    const reading = (async () => {
      for await (const e of followRun(journal, "deltas", { signal: controller.signal })) {
        seen.push(e);
        if (e.type === "text-delta" && e.delta === "lo") controller.abort();
      }
    })();
    await new Promise((r) => setTimeout(r, 5));
    emitter.emitLive({ type: "text-delta", runId: "deltas", stepId: "f#turn:0:model", attempt: 1, delta: "Hel" });
    emitter.emitLive({ type: "text-delta", runId: "deltas", stepId: "f#turn:0:model", attempt: 1, delta: "lo" });
    await reading;
    expect(seen.map((e) => (e.type === "text-delta" ? e.delta : e.type))).toEqual(["run-started", "Hel", "lo"]);
  });

  it("follows a run another process runs on a SQLite file, live", async () => {
    const file = tmp.file("other.db");
    const worker = startWorker("test/runtime/workers/slowRun.ts", [file, "elsewhere", "4", "40"]);
    try {
      await worker.waitFor((l) => l === "started", "the worker's run to start");
      const journal = openSqliteJournal(file, { create: false });
      const arrivals: number[] = [];
      const events: RunEvent[] = [];
      for await (const e of followRun(journal, "elsewhere")) {
        events.push(e);
        arrivals.push(Date.now());
      }
      await worker.exited;
      expect(events).toEqual(runEventsOf(await readJournal(journal, "elsewhere")));
      expect(events.at(-1)).toMatchObject({ type: "run-completed", content: "finished" });
      // Live, not all at the end: the tool waits put time between the first and the last event.
      expect((arrivals.at(-1) as number) - (arrivals[0] as number)).toBeGreaterThan(80);
      await journal.close();
    } finally {
      worker.child.kill("SIGKILL");
    }
  });
});
