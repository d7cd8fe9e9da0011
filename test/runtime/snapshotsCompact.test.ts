import { afterAll, describe, expect, it } from "vitest";
import { LONG_LOOP, longRunEntries, longRunLoop, longRunTemplate } from "../../bench/longRun.ts";
import { canonicalJson, sha256Hex } from "../../src/core/index.ts";
import { createJournal, type OpenJournal, openSqliteJournal, readJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import type { Journal } from "../../src/events/spi.ts";
import type { EventStore } from "../../src/events/store.ts";
import type { JournalEntry, Message, NewEntry, RunStartedData } from "../../src/events/types.ts";
import type { Model } from "../../src/models/types.ts";
import { compactRunState } from "../../src/projections/runSnapshot.ts";
import { foldEntries } from "../../src/projections/runState.ts";
import { AgentInterruptedError } from "../../src/runtime/base/errors.ts";
import { foldRun, rebuildToolCallLog } from "../../src/runtime/base/readers.ts";
import { readRunState, writeRunSnapshot } from "../../src/runtime/base/snapshots.ts";
import { followRun } from "../../src/runtime/streaming/follow.ts";
import { tempDir } from "../events/tmp.ts";
import { crashingStore } from "../support/loop.ts";

const tmp = tempDir("loom-snapshots-compact-");
afterAll(() => tmp.remove());

/** What a run journaled, without the times: two journals of the same run compare equal. */
const facts = (entries: readonly JournalEntry[]) => JSON.stringify(entries.map((e) => [e.seq, e.type, e.data]));
const stateText = (state: unknown) => canonicalJson(JSON.parse(JSON.stringify(state)));

let template: RunStartedData;
const templateOnce = async () => (template ??= await longRunTemplate());

/** The store without its snapshot methods: every read folds the whole journal. */
function withoutSnapshots(journal: Journal): Journal {
  const { writeSnapshot: _w, latestSnapshot: _l, ...store } = journal.store;
  return { ...journal, store: store as EventStore };
}

/** The store, noting where each read starts until the first append (what a resume reads before its first new step). */
function readsBeforeFirstAppend(journal: Journal): { journal: Journal; froms: number[] } {
  const froms: number[] = [];
  let appended = false;
  const inner = journal.store;
  const store: EventStore = {
    ...inner,
    read: (runId, options) => {
      if (!appended && runId === "long") froms.push(options?.from ?? 1);
      return inner.read(runId, options);
    },
    append: (runId, entries, options) => {
      appended = true;
      return inner.append(runId, entries, options);
    },
  };
  return { journal: { ...journal, store }, froms };
}

/**
 * Writes an interrupted long run of `turns` turns with a compact snapshot `tail` entries before
 * its end (as a loop writing one every so often leaves it). Resolves to the snapshot's seq.
 */
async function writeWithSnapshot(
  journal: Journal,
  turns: number,
  tail: number,
  snapshot: "compact" | "full" | "none",
  end: "interrupted" | "completed" = "interrupted",
): Promise<number> {
  const entries = [...longRunEntries(await templateOnce(), turns, end)];
  const cut = entries.length - tail;
  let version = 0;
  const append = async (batch: NewEntry[]) => {
    version = (await journal.store.append("long", batch, { expectedVersion: version })).version;
  };
  for (let i = 0; i < cut; i += 4000) await append(entries.slice(i, Math.min(i + 4000, cut)));
  const seq =
    snapshot === "none" ? undefined : await writeRunSnapshot(journal, "long", { compact: snapshot === "compact" });
  await append(entries.slice(cut));
  return seq ?? 0;
}

/** A model that answers as the long run's, and notes the digest of the conversation it was sent each call. */
function notingModel(turns: number, seen: string[]): Model {
  return {
    generate: async ({ messages }: { messages: readonly Message[] }) => {
      seen.push(sha256Hex(JSON.stringify(messages)));
      let turn = 0;
      for (const m of messages) if (m.role === "assistant") turn++;
      return turn < turns
        ? { toolCalls: [{ id: `c${turn}`, name: "lookup", input: { n: turn } }] }
        : { content: "done", toolCalls: [] };
    },
  };
}

describe("compact snapshots (flat resume)", () => {
  it("a 20,000-turn run resumed from a compact snapshot journals, logs and prompts what one resumed without snapshots does, reading only the tail before its first new step (SQLite)", async () => {
    const turns = 20_000;
    const tail = 400;
    const journals: OpenJournal[] = [];
    try {
      const withSnap = openSqliteJournal(tmp.file("with.db"), { synchronous: "normal" });
      const without = openSqliteJournal(tmp.file("without.db"), { synchronous: "normal" });
      journals.push(withSnap, without);
      const seq = await writeWithSnapshot(withSnap, turns, tail, "compact");
      await writeWithSnapshot(without, turns, tail, "none");
      expect(seq).toBe(turns * 4 + 2 - tail);

      // The resume's read: the compact snapshot and its tail, not the run.
      const read = await readRunState(withSnap, "long", { compact: true });
      expect(read).toMatchObject({ snapshotSeq: seq, tail });
      expect(read.state.compacted?.belowTurn).toBe((seq - 2) / 4 - 2); // the snapshot's seq starts model turn (seq - 2) / 4
      expect(Object.keys(read.state.frames).length).toBeLessThan(tail); // the last turns' frames only

      const seenWith: string[] = [];
      const seenWithout: string[] = [];
      const spied = readsBeforeFirstAppend(withSnap);
      const a = await longRunLoop(turns, {
        model: notingModel(turns, seenWith),
        snapshots: { every: 4000, compact: true },
      }).run({ runId: "long", journal: spied.journal });
      const b = await longRunLoop(turns, { model: notingModel(turns, seenWithout) }).run({
        runId: "long",
        journal: withoutSnapshots(without),
      });
      // Before its first new step, the resume read from the snapshot's seq on, never the run from its start.
      expect(spied.froms.length).toBeGreaterThan(0);
      expect(Math.min(...spied.froms)).toBe(seq);
      expect(a.content).toBe("done");
      expect(a.toolCallLog).toHaveLength(turns);
      expect(JSON.stringify(a)).toBe(JSON.stringify(b));
      expect(seenWith).toEqual(seenWithout); // the model was sent the whole conversation, read back lazily
      expect(seenWith).toHaveLength(1);
      expect(facts(await readJournal(withSnap, "long"))).toBe(facts(await readJournal(without, "long")));
      expect(JSON.stringify(await rebuildToolCallLog(withSnap, "long", "full"))).toBe(
        JSON.stringify(await rebuildToolCallLog(without, "long", "full")),
      );
    } finally {
      for (const j of journals) await j.close();
    }
  }, 300_000);

  it("full readers pass over a compact snapshot: foldRun and readRunState fold the whole journal", async () => {
    const journal = createJournal({ store: memoryStore({ json: true }) });
    const seq = await writeWithSnapshot(journal, 30, 10, "compact");
    const full = foldEntries(await readJournal(journal, "long"));
    expect(await readRunState(journal, "long")).toMatchObject({ snapshotSeq: 0, tail: full.version });
    expect(stateText(await foldRun(journal, "long"))).toBe(stateText(full));
    const compact = await readRunState(journal, "long", { compact: true });
    expect(compact.snapshotSeq).toBe(seq);
    // The compact state is the full one without the frames of the older turns.
    const expected = compactRunState(full);
    expected.compacted = compact.state.compacted as { belowTurn: number };
    const older = Object.keys(full.frames).filter((id) => !(id in compact.state.frames));
    expect(older.length).toBeGreaterThan(0);
    for (const id of older) expect(Number(id.split(":")[1])).toBeLessThan(compact.state.compacted?.belowTurn ?? 0);
    const kept = Object.keys(compact.state.frames);
    for (const id of kept) expect(stateText(compact.state.frames[id])).toBe(stateText(full.frames[id]));
    expect(compact.state.turns).toBe(full.turns);
  });

  it("an interrupted compact resume reports the whole run's tool-call log", async () => {
    const turns = 50;
    const results: unknown[] = [];
    for (const compact of [true, false]) {
      const journal = createJournal({ store: memoryStore({ json: true }) });
      await writeWithSnapshot(journal, turns, 12, compact ? "compact" : "none");
      const stop = new AbortController();
      const error = await longRunLoop(turns + 5)
        .run({
          runId: "long",
          journal,
          signal: stop.signal,
          onEvent: (e) => {
            if (e.type === "tool-finished" && e.stepId === `${LONG_LOOP}#turn:${turns + 1}:tool:0`) stop.abort();
          },
        })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(AgentInterruptedError);
      const run = (error as AgentInterruptedError).run;
      expect(run.toolCallLog).toHaveLength(turns + 2);
      results.push({ run, entries: facts(await readJournal(journal, "long")) });
    }
    expect(JSON.stringify(results[0])).toBe(JSON.stringify(results[1]));
  });

  it("a run that crashes at any append, with compact snapshots on, resumes to the journal and log of one without snapshots", async () => {
    const clean = createJournal({ store: memoryStore({ json: true }) });
    await longRunLoop(8).run({ runId: "r", journal: clean, input: "go" });
    const expected = JSON.stringify(await rebuildToolCallLog(clean, "r", "full"));
    for (let k = 0; k <= 10; k++) {
      const journaled: string[] = [];
      for (const snapshots of [{ every: 3, compact: true }, undefined]) {
        const inner = memoryStore({ json: true });
        const loop = longRunLoop(8, snapshots ? { snapshots } : {});
        await loop.run({ runId: "r", journal: createJournal({ store: crashingStore(inner, k) }), input: "go" }).then(
          () => undefined,
          () => undefined,
        );
        const journal = createJournal({ store: inner });
        const out = await loop.run({ runId: "r", journal, input: "go" });
        expect(out.content, `crash at append ${k}`).toBe("done");
        expect(JSON.stringify(await rebuildToolCallLog(journal, "r", "full")), `crash at append ${k}`).toBe(expected);
        expect(stateText(await foldRun(journal, "r"))).toBe(stateText(foldEntries(await readJournal(journal, "r"))));
        journaled.push(facts(await readJournal(journal, "r")));
      }
      expect(journaled[0], `crash at append ${k}`).toBe(journaled[1]);
    }
  });

  it("followRun after a cursor past a snapshot reads from the snapshot on and gives the events a follower from the start gives", async () => {
    for (const snapshot of ["compact", "full"] as const) {
      const journal = createJournal({ store: memoryStore({ json: true }) });
      await writeWithSnapshot(journal, 40, 30, snapshot, "completed");
      const seq = (await journal.store.latestSnapshot?.("long"))?.seq ?? 0;
      expect(seq).toBeGreaterThan(100);
      const after = seq + 5;
      const spied = readsBeforeFirstAppend(journal);
      const events: unknown[] = [];
      for await (const e of followRun(spied.journal, "long", { after })) events.push(e);
      const expected: unknown[] = [];
      for await (const e of followRun(withoutSnapshots(journal), "long", { after })) expected.push(e);
      expect(events.length).toBeGreaterThan(10);
      expect(JSON.stringify(events)).toBe(JSON.stringify(expected));
      expect(Math.min(...spied.froms)).toBeGreaterThanOrEqual(seq); // never the run from its start
      // A cursor before the snapshot: every entry is read, as before.
      const early = readsBeforeFirstAppend(journal);
      const fromStart: unknown[] = [];
      for await (const e of followRun(early.journal, "long", { after: seq - 20 })) fromStart.push(e);
      expect(Math.min(...early.froms)).toBe(1);
      expect(JSON.stringify(fromStart.slice(-expected.length))).toBe(JSON.stringify(expected));
    }
  });

  it("refuses a snapshots.compact that is not a boolean", () => {
    expect(() => longRunLoop(1, { snapshots: { every: 10, compact: "yes" as unknown as boolean } })).toThrow(
      /snapshots.compact must be true or false/,
    );
  });
});
