import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { memoryArchive } from "../../src/events/archive.ts";
import { compact } from "../../src/events/compact.ts";
import { createJournal, type OpenJournal, openSqliteJournal, readJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import { uncompactedEntries } from "../../src/events/readArchived.ts";
import type { ArchiveStore, Journal } from "../../src/events/spi.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { ModelResponse } from "../../src/models/types.ts";
import { type JournaledRunEvent, type RunEvent, runEventsOf } from "../../src/projections/events.ts";
import { isAgentInterruptedError } from "../../src/runtime/base/errors.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { followRun } from "../../src/runtime/streaming/follow.ts";
import { tempDir } from "../events/tmp.ts";
import { closedAfterAll } from "../support/journalFile.ts";

let tmp: ReturnType<typeof tempDir>;
beforeAll(() => {
  tmp = tempDir("loom-follow-compacted-");
});
afterAll(() => tmp.remove());

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
const add = async (input: unknown) => ({ sum: (input as { a: number }).a + 1 });
const loopOf = (turns: number, maxIterations?: number) =>
  agentLoop$({
    id: "fc",
    model: scriptedModel(script(turns)),
    tools: { add: { description: "adds one", execute: add } },
    ...(maxIterations === undefined ? {} : { maxIterations }),
  });

/**
 * A loop whose one tool call per turn compacts the run (keepTurns 0) before it answers: the run is
 * compacted while it runs, between every two turns.
 */
const compactingLoop = (turns: number, journal: Journal) =>
  agentLoop$({
    id: "fc",
    model: scriptedModel([
      ...Array.from({ length: turns }, (_, i) => ({
        content: `step ${i}`,
        toolCalls: [{ id: `c${i}`, name: "add", input: { a: i } }],
      })),
      { content: "the end", toolCalls: [] },
    ]),
    tools: {
      add: {
        description: "compacts the run, then adds one",
        execute: async (input, { runId }) => {
          await new Promise((r) => setTimeout(r, 15)); // the follower that keeps up reads the turn first
          await compact(journal, runId as string, { keepTurns: 0 });
          return add(input);
        },
      },
    },
  });

/** The journaled events (the model's deltas, live only, left out). */
const journaled = (events: RunEvent[]) => events.filter((e): e is JournaledRunEvent => "cursor" in e);

async function collect(events: AsyncIterable<RunEvent>): Promise<RunEvent[]> {
  const out: RunEvent[] = [];
  for await (const e of events) out.push(e);
  return out;
}

/** An archive that counts its reads. */
function countingArchive(inner: ArchiveStore): ArchiveStore & { gets: number } {
  const counted = {
    gets: 0,
    put: inner.put.bind(inner),
    get: (ref: string) => {
      counted.gets++;
      return inner.get(ref);
    },
    close: inner.close.bind(inner),
  };
  return counted;
}

const journals: [string, () => OpenJournal][] = [
  ["memory", () => createJournal({ store: memoryStore({ json: true }), archive: memoryArchive() })],
  ["sqlite", () => openSqliteJournal(tmp.file("follow-compacted.db"))],
];

describe.each(journals)("followRun over a compacted run on %s", (_, openJournal) => {
  const open = closedAfterAll(openJournal);

  it("gives the uncompacted run's events, and at every cursor exactly the rest", async () => {
    const journal = open();
    await loopOf(5).run({ runId: "five", input: "go", journal });
    const all = runEventsOf(await readJournal(journal, "five"));
    expect((await compact(journal, "five", { keepTurns: 3 })).frameIds).toHaveLength(6); // turns 0 to 2
    expect((await compact(journal, "five", { keepTurns: 1 })).frameIds).toHaveLength(4); // turns 3 and 4
    const hot = await readJournal(journal, "five");
    expect(hot.filter((e) => e.type === "frames.archived")).toHaveLength(2);
    expect(hot.at(-1)?.type).toBe("frames.archived"); // the run's last entry is no longer its end
    expect(await collect(followRun(journal, "five"))).toEqual(all);
    for (const after of new Set(all.map((e) => e.cursor))) {
      expect(await collect(followRun(journal, "five", { after }))).toEqual(all.filter((e) => e.cursor > after));
    }
    // Lean: the digests of the archived outputs, no outputs.
    const lean = await collect(followRun(journal, "five", { mode: "lean" }));
    expect(lean).toEqual(runEventsOf(await uncompactedEntries(journal, "five", hot), { mode: "lean" }));
    expect(lean.filter((e) => e.type === "tool-finished")).toHaveLength(10);
    expect(lean.some((e) => e.type === "tool-finished" && "output" in e)).toBe(false);
  });

  it("follows a run compacted while it runs, whether the follower keeps up or lags behind", async () => {
    const journal = open();
    const fast = collect(followRun(journal, "moving"));
    // The slow follower reads its first events, then waits for the run to end: the frames it had
    // not read by then were archived, and are read back.
    let release!: () => void;
    const released = new Promise<void>((r) => {
      release = r;
    });
    const slow = (async () => {
      const out: RunEvent[] = [];
      for await (const e of followRun(journal, "moving")) {
        out.push(e);
        if (out.length === 1) await released;
      }
      return out;
    })();
    await new Promise((r) => setTimeout(r, 5));
    await compactingLoop(4, journal).run({ runId: "moving", input: "go", journal });
    release();
    const hot = await readJournal(journal, "moving");
    expect(hot.filter((e) => e.type === "frames.archived").length).toBeGreaterThanOrEqual(3);
    const all = runEventsOf(await uncompactedEntries(journal, "moving", hot));
    expect(journaled(await fast)).toEqual(all);
    expect(journaled(await slow)).toEqual(all);
    // And they are the events of the same run never compacted (its cursors differ by the markers).
    const plain = createJournal({ store: memoryStore({ json: true }) });
    await compactingLoop(4, createJournal({ store: memoryStore(), archive: memoryArchive() })).run({
      runId: "moving",
      input: "go",
      journal: plain,
    });
    const uncursored = (events: JournaledRunEvent[]) => events.map(({ cursor: _, ...rest }) => rest);
    expect(uncursored(all)).toEqual(uncursored(runEventsOf(await readJournal(plain, "moving"))));
  });
});

describe("followRun over a compacted run", () => {
  it("reads only the archive batches that hold events after the cursor", async () => {
    const archive = countingArchive(memoryArchive());
    const journal = createJournal({ store: memoryStore({ json: true }), archive });
    await loopOf(5).run({ runId: "r", input: "go", journal });
    const all = runEventsOf(await readJournal(journal, "r"));
    await compact(journal, "r", { keepTurns: 1 });
    const last = all.at(-1)?.cursor as number;
    expect(await collect(followRun(journal, "r", { after: last - 1 }))).toEqual([all.at(-1)]);
    expect(archive.gets).toBe(0);
    expect(await collect(followRun(journal, "r"))).toEqual(all);
    expect(archive.gets).toBe(1);
  });

  it("waits for a compacted run interrupted at the cursor to be resumed, then gives the rest", async () => {
    const journal = createJournal({ store: memoryStore({ json: true }), archive: memoryArchive() });
    const interrupted = await loopOf(4, 3)
      .run({ runId: "stopped", input: "go", journal })
      .catch((e: unknown) => e);
    expect(isAgentInterruptedError(interrupted)).toBe(true);
    expect((await compact(journal, "stopped", { keepTurns: 0 })).frameIds.length).toBeGreaterThan(0);
    const before = runEventsOf(await uncompactedEntries(journal, "stopped", await readJournal(journal, "stopped")));
    const stop = before.at(-1);
    expect(stop?.type).toBe("run-interrupted");
    let resumed = false;
    const following = collect(followRun(journal, "stopped", { after: stop?.cursor })).then((rest) => {
      expect(resumed).toBe(true); // it did not end at the interruption it was given as its cursor
      return rest;
    });
    await new Promise((r) => setTimeout(r, 30));
    resumed = true;
    await loopOf(4, 5).run({ runId: "stopped", journal });
    const all = runEventsOf(await uncompactedEntries(journal, "stopped", await readJournal(journal, "stopped")));
    expect(all.at(-1)?.type).toBe("run-completed");
    expect(journaled(await following)).toEqual(all.filter((e) => e.cursor > (stop?.cursor as number)));
  });
  it("fails with IntegrityError archiveMissing on a compacted run whose journal was opened without its archive", async () => {
    const store = memoryStore({ json: true });
    const journal = createJournal({ store, archive: memoryArchive() });
    await loopOf(2).run({ runId: "r", input: "go", journal });
    await compact(journal, "r", { keepTurns: 0 });
    const failure = await collect(followRun(createJournal({ store }), "r")).catch((e: unknown) => e);
    expect(failure).toMatchObject({ name: "IntegrityError", code: "archiveMissing" });
    expect((failure as Error).message).toMatch(/run r: frames were archived into .* open it with the archive/);
  });
});
