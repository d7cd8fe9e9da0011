import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import { LONG_LOOP, longRunEntries, longRunLoop, longRunTemplate, writeLongRun } from "../../bench/longRun.ts";
import { canonicalJson, type SnapshotError, sha256Hex } from "../../src/core/index.ts";
import { memoryArchive } from "../../src/events/archive.ts";
import { compact } from "../../src/events/compact.ts";
import { createJournal, type OpenJournal, openSqliteJournal, readJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import type { Journal } from "../../src/events/spi.ts";
import { sqliteStore } from "../../src/events/sqlite/sqlite.ts";
import type { EventStore } from "../../src/events/store.ts";
import type { JournalEntry, RunStartedData } from "../../src/events/types.ts";
import { foldEntries } from "../../src/projections/runState.ts";
import { foldRun, rebuildToolCallLog } from "../../src/runtime/base/readers.ts";
import { readRunState, writeRunSnapshot } from "../../src/runtime/base/snapshots.ts";
import { forkRun } from "../../src/runtime/control/operations.ts";
import { snapshotContract } from "../events/snapshotContract.ts";
import { tempDir } from "../events/tmp.ts";
import { crashingStore } from "../support/loop.ts";

const tmp = tempDir("loom-snapshots-");
afterAll(() => tmp.remove());

/** What a run journaled, without the times: two journals of the same run compare equal. */
const facts = (entries: readonly JournalEntry[]) => JSON.stringify(entries.map((e) => [e.seq, e.type, e.data]));

/**
 * The folded state as canonical text (keys sorted): a compacted run's fold lists its archived frames
 * where the marker is, one from a snapshot where they were; the same tables either way.
 */
const stateText = (state: unknown) => canonicalJson(JSON.parse(JSON.stringify(state)));

const journalOnMemory = () => createJournal({ store: memoryStore({ json: true }), archive: memoryArchive() });

/** The store without its snapshot methods: a custom store that keeps none. */
function withoutSnapshots(store: EventStore): EventStore {
  const { writeSnapshot: _w, latestSnapshot: _l, ...rest } = store;
  return rest;
}

snapshotContract("memory", async () => ({ store: memoryStore({ json: true }) }));
snapshotContract("memory (frozen entries)", async () => ({ store: memoryStore() }));
snapshotContract("sqlite", async () => {
  const dir = tempDir("loom-snapshot-contract-");
  return { store: sqliteStore(dir.file("c.db")), cleanup: async () => dir.remove() };
});

let template: RunStartedData;
const templateOnce = async () => (template ??= await longRunTemplate());

describe("long runs written through the store", () => {
  it("are entry for entry what the loop writes (the generator the 100,000-turn bench uses)", async () => {
    const journal = journalOnMemory();
    await longRunLoop(6).run({ runId: "r", journal, input: "go" });
    const generated = [...longRunEntries(await templateOnce(), 6, "completed")];
    const written = await readJournal(journal, "r");
    expect(JSON.stringify(written.map((e) => [e.type, e.data]))).toBe(
      JSON.stringify(generated.map((e) => [e.type, e.data])),
    );
  });
});

describe("run snapshots", () => {
  it("a 10,000-turn run resumed from a snapshot journals and logs what one resumed without snapshots does (SQLite)", async () => {
    const turns = 10_000;
    const journals: OpenJournal[] = [];
    try {
      for (const name of ["with", "without"]) {
        const journal = openSqliteJournal(tmp.file(`${name}.db`), { synchronous: "normal" });
        journals.push(journal);
        await writeLongRun(journal.store, "long", await templateOnce(), turns, "interrupted");
      }
      const [withSnap, without] = journals as [OpenJournal, OpenJournal];
      const seq = await writeRunSnapshot(withSnap, "long");
      expect(seq).toBe(turns * 4 + 2); // run.started, 4 entries a turn, run.interrupted
      // The snapshot is what the read starts from: only the entries after it are folded.
      const read = await readRunState(withSnap, "long");
      expect(read).toMatchObject({ snapshotSeq: seq, tail: 0 });
      expect(stateText(read.state)).toBe(stateText(foldEntries(await readJournal(withSnap, "long"))));

      const warnings: SnapshotError[] = [];
      const snapshots = { every: 4000, onWarning: (e: SnapshotError) => warnings.push(e) };
      const a = await longRunLoop(turns, { snapshots }).run({ runId: "long", journal: withSnap });
      const b = await longRunLoop(turns, { snapshots: false }).run({ runId: "long", journal: without });
      expect(a.content).toBe("done");
      expect(JSON.stringify(a)).toBe(JSON.stringify(b));
      expect(facts(await readJournal(withSnap, "long"))).toBe(facts(await readJournal(without, "long")));
      expect(JSON.stringify(await rebuildToolCallLog(withSnap, "long", "full"))).toBe(
        JSON.stringify(await rebuildToolCallLog(without, "long", "full")),
      );
      expect(warnings).toEqual([]);
      // No snapshot is written by the run with `snapshots: false`.
      expect(await without.store.latestSnapshot?.("long")).toBeUndefined();
    } finally {
      for (const j of journals) await j.close();
    }
  }, 120_000);

  it("a loop with snapshots writes one every N entries, and a resume reads only the tail", async () => {
    const journal = journalOnMemory();
    const every = 40;
    // Stopped after turn 30 (an abort), resumed to the end.
    const stop = new AbortController();
    const loop = longRunLoop(60, { snapshots: { every } });
    await loop
      .run({
        runId: "r",
        journal,
        input: "go",
        signal: stop.signal,
        onEvent: (e) => {
          if (e.type === "tool-finished" && e.stepId === `${LONG_LOOP}#turn:30:tool:0`) stop.abort();
        },
      })
      .catch((e: { code?: string }) => expect(e.code).toBe("agentInterrupted"));
    const first = await journal.store.latestSnapshot?.("r");
    expect(first?.seq).toBeGreaterThanOrEqual(every);
    const read = await readRunState(journal, "r");
    expect(read.snapshotSeq).toBe(first?.seq);
    expect(read.tail).toBeLessThan(every + 8); // what came after the last snapshot, not the run
    const plain = journalOnMemory();
    await writeLongRun(plain.store, "r", await templateOnce(), 60, "completed");
    const out = await loop.run({ runId: "r", journal });
    expect(out.content).toBe("done");
    expect((await journal.store.latestSnapshot?.("r"))?.seq).toBeGreaterThan(first?.seq ?? 0);
    expect(stateText(await foldRun(journal, "r"))).toBe(stateText(foldEntries(await readJournal(journal, "r"))));
    const log = await rebuildToolCallLog(journal, "r", "full");
    expect(JSON.stringify(log)).toBe(JSON.stringify(await rebuildToolCallLog(plain, "r", "full")));
  });

  it("a snapshot whose body does not match its digest is ignored, told to the hook, and the whole journal folded", async () => {
    const journal = journalOnMemory();
    await writeLongRun(journal.store, "r", await templateOnce(), 50, "interrupted");
    const seq = (await writeRunSnapshot(journal, "r")) as number;
    const good = (await journal.store.latestSnapshot?.("r"))!;
    // A damaged copy at a later seq (the store keeps the latest): one flipped status in the body.
    const body = good.body.replace('"status":"interrupted"', '"status":"completed"');
    expect(body).not.toBe(good.body);
    await journal.store.writeSnapshot?.("r", { seq: seq + 1, digest: good.digest, body });
    const warnings: SnapshotError[] = [];
    const read = await readRunState(journal, "r", { onSnapshotWarning: (e) => warnings.push(e) });
    expect(read.snapshotSeq).toBe(0);
    expect(read.state.status).toBe("interrupted");
    expect(stateText(read.state)).toBe(stateText(foldEntries(await readJournal(journal, "r"))));
    expect(warnings.map((w) => [w.code, w.runId, w.seq])).toEqual([["snapshotDigestMismatch", "r", seq + 1]]);
    expect(warnings[0]?.message).toMatch(/run r snapshot at seq \d+: .*ignored/);

    // The same through a resume: the run completes as without snapshots, the warning told once.
    const seen: string[] = [];
    const out = await longRunLoop(50, { snapshots: { every: 1000, onWarning: (e) => seen.push(e.code) } }).run({
      runId: "r",
      journal,
    });
    expect(out.content).toBe("done");
    expect(seen).toEqual(["snapshotDigestMismatch"]);
  });

  it("a snapshot that checks out by digest but is of another stream under the run id is not used", async () => {
    const other = journalOnMemory();
    await writeLongRun(other.store, "r", await templateOnce(), 30, "interrupted");
    await writeRunSnapshot(other, "r");
    const foreign = (await other.store.latestSnapshot?.("r"))!;
    // The run removed and started again under its id: longer (another entry at the snapshot's seq), or shorter.
    for (const turns of [40, 20]) {
      const journal = journalOnMemory();
      await writeLongRun(journal.store, "r", await templateOnce(), turns, "interrupted");
      await journal.store.writeSnapshot?.("r", foreign);
      const warnings: string[] = [];
      const read = await readRunState(journal, "r", { onSnapshotWarning: (e) => warnings.push(e.code) });
      expect(read.snapshotSeq).toBe(0);
      expect(warnings).toEqual(["snapshotStale"]);
      expect(stateText(read.state)).toBe(stateText(foldEntries(await readJournal(journal, "r"))));
    }
  });

  it("a run compacted after its snapshot reads the same state and resumes to the same log", async () => {
    const journal = journalOnMemory();
    const plain = journalOnMemory();
    for (const j of [journal, plain]) await writeLongRun(j.store, "r", await templateOnce(), 40, "interrupted");
    await writeRunSnapshot(journal, "r");
    for (const j of [journal, plain]) await compact(j, "r", { keepTurns: 5 });
    const read = await readRunState(journal, "r");
    expect(read.snapshotSeq).toBeGreaterThan(0);
    expect(read.tail).toBe(1); // the frames.archived marker
    expect(stateText(read.state)).toBe(stateText(foldEntries(await readJournal(journal, "r"))));
    const a = await longRunLoop(40).run({ runId: "r", journal });
    const b = await longRunLoop(40).run({ runId: "r", journal: plain });
    expect(JSON.stringify(a)).toBe(JSON.stringify(b));
    // The archive's ref is the hash of the frames' entries, times included: the two journals' differ.
    const noRef = (entries: readonly JournalEntry[]) =>
      JSON.stringify(
        entries.map((e) => [e.seq, e.type, e.data]),
        (key, value) => (key === "archiveRef" ? undefined : value),
      );
    expect(noRef(await readJournal(journal, "r"))).toBe(noRef(await readJournal(plain, "r")));
  });

  it("a fork before the snapshot's seq does not use it: the fork folds and resumes as a fork without snapshots", async () => {
    const journal = journalOnMemory();
    const plain = journalOnMemory();
    for (const j of [journal, plain]) await writeLongRun(j.store, "r", await templateOnce(), 30, "completed");
    const seq = (await writeRunSnapshot(journal, "r")) as number;
    const at = `${LONG_LOOP}#turn:10:model`;
    for (const j of [journal, plain]) await forkRun(j, "r", { at, newRunId: "f" });
    const read = await readRunState(journal, "f");
    expect(read.snapshotSeq).toBe(0);
    expect(read.state.version).toBeLessThan(seq);
    expect(stateText(read.state)).toBe(stateText(foldEntries(await readJournal(journal, "f"))));
    const a = await longRunLoop(30, { snapshots: { every: 20 } }).run({ runId: "f", journal });
    const b = await longRunLoop(30).run({ runId: "f", journal: plain });
    expect(JSON.stringify(a)).toBe(JSON.stringify(b));
    expect(facts(await readJournal(journal, "f"))).toBe(facts(await readJournal(plain, "f")));
    // The source's snapshot is the source's: still where it was.
    expect((await journal.store.latestSnapshot?.("r"))?.seq).toBe(seq);
  });

  it("a store without snapshots is read in full, and writeRunSnapshot writes nothing", async () => {
    const journal: Journal = createJournal({ store: withoutSnapshots(memoryStore({ json: true })) });
    await writeLongRun(journal.store, "r", await templateOnce(), 10, "interrupted");
    expect(await writeRunSnapshot(journal, "r")).toBeUndefined();
    const read = await readRunState(journal, "r");
    expect(read).toMatchObject({ snapshotSeq: 0, tail: 42 });
    const out = await longRunLoop(10, { snapshots: { every: 5 } }).run({ runId: "r", journal });
    expect(out.content).toBe("done");
  });

  it("a SQLite file from before snapshots is read in full, read-only too, and gets the table when opened to write", async () => {
    const file = tmp.file("older.db");
    const journal = openSqliteJournal(file);
    await writeLongRun(journal.store, "r", await templateOnce(), 5, "completed");
    await journal.close();
    const db = new Database(file);
    db.exec("DROP TABLE loom_snapshots");
    db.close();
    const reader = openSqliteJournal(file, { readonly: true });
    try {
      expect(await readRunState(reader, "r")).toMatchObject({ snapshotSeq: 0, tail: 24 });
    } finally {
      await reader.close();
    }
    const writer = openSqliteJournal(file);
    try {
      expect(await writeRunSnapshot(writer, "r")).toBe(24);
      expect(await readRunState(writer, "r")).toMatchObject({ snapshotSeq: 24, tail: 0 });
    } finally {
      await writer.close();
    }
  });

  it("a run that crashes at any append, with snapshots on, resumes to the log of a clean run", async () => {
    const clean = journalOnMemory();
    await longRunLoop(6).run({ runId: "r", journal: clean, input: "go" });
    const expected = JSON.stringify(await rebuildToolCallLog(clean, "r", "full"));
    const appends = 8; // the clean run's store appends (each a crash point)
    for (let k = 0; k <= appends; k++) {
      const inner = memoryStore({ json: true });
      const loop = longRunLoop(6, { snapshots: { every: 3 } });
      await loop.run({ runId: "r", journal: createJournal({ store: crashingStore(inner, k) }), input: "go" }).then(
        () => undefined,
        () => undefined,
      );
      const journal = createJournal({ store: inner });
      const out = await loop.run({ runId: "r", journal, input: "go" });
      expect(out.content, `crash at append ${k}`).toBe("done");
      expect(JSON.stringify(await rebuildToolCallLog(journal, "r", "full")), `crash at append ${k}`).toBe(expected);
      expect(stateText(await foldRun(journal, "r"))).toBe(stateText(foldEntries(await readJournal(journal, "r"))));
      expect((await inner.latestSnapshot?.("r"))?.seq ?? 0).toBeGreaterThan(0);
    }
  });

  it("refuses a snapshots option that is not a positive number of entries", () => {
    expect(() => longRunLoop(1, { snapshots: { every: 0 } })).toThrow(/snapshots.every must be a positive integer/);
  });

  it("writes nothing when nothing was appended since the latest snapshot, and a digest covers the body", async () => {
    const journal = journalOnMemory();
    await writeLongRun(journal.store, "r", await templateOnce(), 3, "completed");
    const seq = await writeRunSnapshot(journal, "r");
    expect(await writeRunSnapshot(journal, "r")).toBeUndefined();
    const stored = (await journal.store.latestSnapshot?.("r"))!;
    expect(stored.seq).toBe(seq);
    expect(stored.digest).toBe(sha256Hex(stored.body));
  });
});
