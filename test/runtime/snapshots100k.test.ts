import { copyFileSync, existsSync, readFileSync, statSync } from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import { longRunEntries, longRunLoop, longRunTemplate, lookupOutput } from "../../bench/longRun.ts";
import { createJournal, type OpenJournal, openSqliteJournal, readJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import type { Journal } from "../../src/events/spi.ts";
import type { EventStore } from "../../src/events/store.ts";
import type { JournalEntry, NewEntry, RunStartedData } from "../../src/events/types.ts";
import { rebuildToolCallLog } from "../../src/runtime/base/readers.ts";
import { readRunState, writeRunSnapshot } from "../../src/runtime/base/snapshots.ts";
import { tempDir } from "../events/tmp.ts";

/**
 * Issue 33, "a 100,000-turn run resumed with snapshot and the log identical to one without
 * snapshots", on SQLite. A resume WITHOUT snapshots walks all 100,000 turns through the chart
 * (minutes), so the oracle here is what such a resume appends, taken from the run's own entries:
 * `longRunEntries(…, "completed")` ends with the three entries a resume of the interrupted run
 * appends (the last model call's `frame.started` with the prompt digest chained over every turn,
 * its `frame.completed`, `run.completed`). The second test checks that oracle against real
 * resumes without snapshots, walked from turn 0, at sizes the chart walks quickly: the entries
 * of a turn have one shape whatever its number (only the turn number, the output and the chained
 * digest change, and the generator computes those for every turn as at any size), so what holds
 * at 0 to 300 turns holds at 100,000. The full tool-call log is compared with the log rebuilt by
 * the projection (`rebuildToolCallLog`, no chart) from a second SQLite file holding the same run
 * and those completion entries, never a snapshot, and with the log made from the turns' inputs; a
 * copy of the file is resumed with the lean log, compared with the lean entries the run's tool
 * frames recorded.
 *
 * Time and memory are printed, not asserted (the machine is shared).
 */

const tmp = tempDir("loom-snapshots-100k-");
afterAll(() => tmp.remove());

let template: RunStartedData;
const templateOnce = async () => (template ??= await longRunTemplate());

/** What an entry journaled, without its time. */
const fact = (e: JournalEntry) => JSON.stringify([e.seq, e.type, e.data]);
const factOf = (seq: number, e: NewEntry) => JSON.stringify([seq, e.type, e.data]);

/** The store without its snapshot methods: every read folds the whole journal. */
function withoutSnapshots(journal: Journal): Journal {
  const { writeSnapshot: _w, latestSnapshot: _l, ...store } = journal.store;
  return { ...journal, store: store as EventStore };
}

/** The store, noting where each read of `runId` starts until the first append (what a resume reads before its first new step). */
function readsBeforeFirstAppend(journal: Journal, runId: string): { journal: Journal; froms: number[] } {
  const froms: number[] = [];
  let appended = false;
  const inner = journal.store;
  const store: EventStore = {
    ...inner,
    read: (id, options) => {
      if (!appended && id === runId) froms.push(options?.from ?? 1);
      return inner.read(id, options);
    },
    append: (id, entries, options) => {
      appended = true;
      return inner.append(id, entries, options);
    },
  };
  return { journal: { ...journal, store }, froms };
}

/** Appends `entries` to run "long" from version `version` in batches (each one transaction). Resolves to the new version. */
async function appendAll(journal: Journal, entries: readonly NewEntry[], version: number): Promise<number> {
  for (let i = 0; i < entries.length; i += 10_000) {
    const batch = entries.slice(i, Math.min(i + 10_000, entries.length));
    version = (await journal.store.append("long", batch, { expectedVersion: version })).version;
  }
  return version;
}

/** The last three entries of the completed `turns`-turn run: what a resume of the interrupted one ends it with. */
function completionOf(run: RunStartedData, turns: number): NewEntry[] {
  const last: NewEntry[] = [];
  for (const entry of longRunEntries(run, turns, "completed")) {
    last.push(entry);
    if (last.length > 3) last.shift();
  }
  return last;
}

/**
 * The entries a resume of the interrupted run appends: its `completion`, after (with the lean log)
 * the pin of the log's mode, which the run's `run.started` does not hold (ADR 0142 D3: a late pin,
 * journaled with the resume's first append).
 */
function resumeAppends(completion: readonly NewEntry[], mode: "full" | "lean"): NewEntry[] {
  const pin: NewEntry = {
    type: "decision.recorded",
    data: { decisionId: "long#toolCallLog", source: "agent-tool-call-log", choice: { mode: "lean" } },
  };
  return mode === "lean" ? [pin, ...completion] : [...completion];
}

const mb = (bytes: number) => Math.round(bytes / 2 ** 20);
const load = () => readFileSync("/proc/loadavg", "utf8").trim();

describe("a 100,000-turn run resumed from a compact snapshot (SQLite)", () => {
  it("reads only from the snapshot before its first new step, appends what a resume without snapshots appends, and returns the log a journal without snapshots rebuilds", async () => {
    const turns = 100_000;
    const tail = 400;
    const times: Record<string, number> = {};
    let t = performance.now();
    const lap = (name: string) => {
      const now = performance.now();
      times[name] = Math.round(now - t);
      t = now;
    };
    const journals: OpenJournal[] = [];
    try {
      const run = await templateOnce();
      const entries = [...longRunEntries(run, turns, "interrupted")];
      expect(entries).toHaveLength(turns * 4 + 2);
      expect(entries.at(-1)?.type).toBe("run.interrupted");
      const completion = completionOf(run, turns);
      expect(completion.map((e) => e.type)).toEqual(["frame.started", "frame.completed", "run.completed"]);
      lap("entries made");

      // The run with a compact snapshot `tail` entries before its end, as a loop writing one every so often leaves it.
      const withSnap = openSqliteJournal(tmp.file("with.db"), { synchronous: "normal" });
      journals.push(withSnap);
      const cut = entries.length - tail;
      let version = await appendAll(withSnap, entries.slice(0, cut), 0);
      lap("written");
      const seq = await writeRunSnapshot(withSnap, "long", { compact: true });
      lap("snapshot written");
      version = await appendAll(withSnap, entries.slice(cut), version);
      expect(seq).toBe(cut);
      expect(version).toBe(entries.length);
      const read = await readRunState(withSnap, "long", { compact: true });
      expect(read).toMatchObject({ snapshotSeq: seq, tail });
      expect(Object.keys(read.state.frames).length).toBeLessThan(tail); // the last turns' frames only
      // A copy of the file (closed first: nothing left in its write-ahead log) for a resume with the lean log.
      await withSnap.close();
      journals.splice(journals.indexOf(withSnap), 1);
      copyFileSync(tmp.file("with.db"), tmp.file("lean.db"));
      expect(existsSync(tmp.file("with.db-wal")) && statSync(tmp.file("with.db-wal")).size > 0).toBe(false);
      const withSnapAgain = openSqliteJournal(tmp.file("with.db"), { synchronous: "normal" });
      const lean = openSqliteJournal(tmp.file("lean.db"), { synchronous: "normal" });
      journals.push(withSnapAgain, lean);
      lap("copied");

      // The resume, to completion.
      const spied = readsBeforeFirstAppend(withSnapAgain, "long");
      const heap0 = process.memoryUsage().heapUsed;
      t = performance.now();
      const out = await longRunLoop(turns, { snapshots: { every: 1_000_000, compact: true } }).run({
        runId: "long",
        journal: spied.journal,
      });
      lap("resumed to completion");
      const resumeHeapMb = mb(process.memoryUsage().heapUsed - heap0);
      expect(out.content).toBe("done");
      expect(out.iterations).toBe(turns + 1);
      // Before its first new step, the resume read from the snapshot's seq on, never the run from its start.
      expect(spied.froms.length).toBeGreaterThan(0);
      expect(Math.min(...spied.froms)).toBe(seq);

      // Blocks: what each check reads is let go before the next (the process holds about 1 GB at the peak).
      {
        // Its journal, entry for entry: the run as written, then what a resume without snapshots appends.
        const after = await readJournal(withSnapAgain, "long");
        lap("journal read back");
        expect(after).toHaveLength(entries.length + completion.length);
        const expected = [...entries, ...completion];
        let firstDiff = -1;
        for (let i = 0; i < expected.length && firstDiff < 0; i++) {
          if (fact(after[i] as JournalEntry) !== factOf(i + 1, expected[i] as NewEntry)) firstDiff = i;
        }
        expect(
          firstDiff,
          firstDiff < 0 ? "" : `entry ${firstDiff + 1}: ${fact(after[firstDiff] as JournalEntry)}`,
        ).toBe(-1);
        lap("journal compared");
      }
      {
        // The log: as rebuilt by the projection from a second SQLite file of the same run without snapshots.
        const without = openSqliteJournal(tmp.file("without.db"), { synchronous: "normal" });
        journals.push(without);
        await appendAll(without, [...entries, ...completion], 0);
        expect(await without.store.latestSnapshot?.("long")).toBeUndefined();
        lap("second journal written");
        const rebuilt = await rebuildToolCallLog(without, "long", "full");
        await without.close();
        journals.splice(journals.indexOf(without), 1);
        lap("full log rebuilt without snapshots");
        expect(out.toolCallLog).toHaveLength(turns);
        expect(JSON.stringify(out.toolCallLog)).toBe(JSON.stringify(rebuilt));
        // And as made from the turns' inputs, without the journal.
        const made = Array.from({ length: turns }, (_, n) => ({
          iteration: n,
          toolName: "lookup",
          toolInput: { n },
          toolOutput: lookupOutput(n),
        }));
        expect(JSON.stringify(out.toolCallLog)).toBe(JSON.stringify(made));
        lap("full logs compared");
      }

      // The loop with the lean log resumes the copy: its log is the one made from what the run's tool
      // frames recorded (step id, digest, bytes), and it appends what a lean resume without snapshots does.
      const leanSpied = readsBeforeFirstAppend(lean, "long");
      const leanOut = await longRunLoop(turns, {
        toolCallLog: "lean",
        snapshots: { every: 1_000_000, compact: true },
      }).run({ runId: "long", journal: leanSpied.journal });
      lap("lean copy resumed to completion");
      expect(Math.min(...leanSpied.froms)).toBe(seq);
      const leanMade: unknown[] = [];
      for (const e of entries) {
        if (e.type !== "frame.completed" || !e.data.frameId.endsWith(":tool:0")) continue;
        const n = leanMade.length;
        const { digest, bytes, frameId } = e.data as { frameId: string; digest?: string | null; bytes?: number };
        leanMade.push({
          iteration: n,
          toolName: "lookup",
          toolInput: { n },
          status: "ok",
          bytes,
          digest,
          stepId: frameId,
        });
      }
      expect(leanMade).toHaveLength(turns);
      expect(JSON.stringify(leanOut.toolCallLog)).toBe(JSON.stringify(leanMade));
      const leanAppended = await readJournal(lean, "long", { from: entries.length + 1 });
      expect(leanAppended.map(fact)).toEqual(
        resumeAppends(completion, "lean").map((e, i) => factOf(entries.length + i + 1, e)),
      );
      lap("lean log compared");

      const m = process.memoryUsage();
      console.log(
        `100,000-turn compact resume (SQLite): ${JSON.stringify({ ...times, resumeHeapMb, heapMb: mb(m.heapUsed), rssMb: mb(m.rss), loadavg: load() })}`,
      );
    } finally {
      for (const j of journals) await j.close();
    }
  }, 300_000);

  it("the oracle: a resume without snapshots, walked from turn 0, appends the completed run's last three entries (after the lean log's mode pin), whatever the turn count", async () => {
    const run = await templateOnce();
    for (const mode of ["full", "lean"] as const) {
      for (const turns of [0, 1, 7, 300]) {
        const journal = createJournal({ store: memoryStore({ json: true }) });
        const entries = [...longRunEntries(run, turns, "interrupted")];
        await appendAll(journal, entries, 0);
        const loop = longRunLoop(turns, mode === "lean" ? { toolCallLog: "lean" } : {});
        const out = await loop.run({ runId: "long", journal: withoutSnapshots(journal) });
        expect(out.content).toBe("done");
        const appended = (await readJournal(journal, "long")).slice(entries.length);
        expect(appended.map(fact), `${mode} log, ${turns} turns`).toEqual(
          resumeAppends(completionOf(run, turns), mode).map((e, i) => factOf(entries.length + i + 1, e)),
        );
      }
    }
  }, 60_000);
});
