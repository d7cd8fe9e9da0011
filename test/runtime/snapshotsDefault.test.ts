import { randomBytes } from "node:crypto";
import { copyFileSync } from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import { longRunLoop } from "../../bench/longRun.ts";
import { AgentLoopConfigError } from "../../src/core/errors.ts";
import { canonicalJson } from "../../src/core/index.ts";
import { payloadCodec, staticKeys } from "../../src/events/codec/codec.ts";
import { withCodec } from "../../src/events/codec/codecStore.ts";
import { createJournal, openSqliteJournal, readJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import { redaction, withRedaction } from "../../src/events/redaction/redact.ts";
import type { Journal } from "../../src/events/spi.ts";
import type { EventStore, StoredSnapshot } from "../../src/events/store.ts";
import type { JournalEntry } from "../../src/events/types.ts";
import { entryBytes } from "../../src/projections/runSnapshot.ts";
import { foldEntries } from "../../src/projections/runState.ts";
import type { AgentLoopConfig } from "../../src/runtime/base/config.ts";
import { foldRun, rebuildToolCallLog } from "../../src/runtime/base/readers.ts";
import { DEFAULT_SNAPSHOT_EVERY, readRunState, writeRunSnapshot } from "../../src/runtime/base/snapshots.ts";
import { tempDir } from "../events/tmp.ts";

const tmp = tempDir("loom-snapshots-default-");
afterAll(() => tmp.remove());

/** What a run journaled, without the times: two journals of the same run compare equal. */
const facts = (entries: readonly JournalEntry[]) => JSON.stringify(entries.map((e) => [e.seq, e.type, e.data]));
const stateText = (state: unknown) => canonicalJson(JSON.parse(JSON.stringify(state)));

/** One snapshot as the store was given it, with the bytes of the entries appended since the previous one. */
interface Written {
  readonly seq: number;
  readonly bodyBytes: number;
  readonly format: number;
  readonly appendedSince: number;
}

/**
 * A JSON memory store that notes each snapshot written, the bytes the run had appended up to its
 * seq, and the entries its reads returned.
 */
function watchedJournal(): { journal: Journal; written: Written[]; read: { entries: number } } {
  const inner = memoryStore({ json: true });
  const written: Written[] = [];
  const read = { entries: 0 };
  const bytesUpTo: number[] = [0]; // bytes of the run's entries up to each seq
  let last = 0;
  const store: EventStore = {
    ...inner,
    append: async (runId, entries, options) => {
      const result = await inner.append(runId, entries, options);
      const stored = await inner.read(runId, { from: bytesUpTo.length });
      for (const e of stored) bytesUpTo[e.seq] = (bytesUpTo[e.seq - 1] ?? 0) + entryBytes(e);
      return result;
    },
    read: async (runId, options) => {
      const entries = await inner.read(runId, options);
      read.entries += entries.length;
      return entries;
    },
    writeSnapshot: async (runId: string, snapshot: StoredSnapshot) => {
      const upTo = bytesUpTo[snapshot.seq] ?? Number.NaN;
      written.push({
        seq: snapshot.seq,
        bodyBytes: Buffer.byteLength(snapshot.body),
        format: (JSON.parse(snapshot.body) as { format: number }).format,
        appendedSince: upTo - (bytesUpTo[last] ?? 0),
      });
      last = snapshot.seq;
      return inner.writeSnapshot?.(runId, snapshot);
    },
  };
  return { journal: createJournal({ store }), written, read };
}

/** A run of `turns` lookup turns, interrupted where one more model call would be needed. */
async function interruptedRun(journal: Journal, turns: number, extra: Partial<AgentLoopConfig> = {}): Promise<void> {
  await expect(
    longRunLoop(turns, { maxIterations: turns, ...extra }).run({ runId: "long", journal, input: "go" }),
  ).rejects.toMatchObject({ code: "agentInterrupted" });
}

describe("snapshots with no option set", () => {
  it("a loop with no snapshots option writes compact snapshots beside the run, one every 1,000 entries", async () => {
    const { journal, written } = watchedJournal();
    const out = await longRunLoop(700).run({ runId: "long", journal, input: "go" });
    expect(out.content).toBe("done");
    const entries = (await readJournal(journal, "long")).length;
    expect(entries).toBe(700 * 4 + 4); // run.started, four entries a tool turn, the last model call and run.completed
    expect(written.length).toBe(Math.floor(entries / DEFAULT_SNAPSHOT_EVERY));
    for (const w of written) expect(w.format).toBe(2); // the compact layout
    for (const [i, w] of written.entries()) expect(w.seq).toBeGreaterThanOrEqual((i + 1) * DEFAULT_SNAPSHOT_EVERY);
  });

  it("each default snapshot is bounded by what was appended since the previous one, and reads only that, not the run", async () => {
    const { journal, written, read } = watchedJournal();
    await longRunLoop(2000).run({ runId: "long", journal, input: "go" });
    const entries = (await readJournal(journal, "long")).length;
    read.entries -= entries; // the read just above
    expect(written.length).toBeGreaterThanOrEqual(7);
    for (const w of written) expect(w.bodyBytes).toBeLessThan(w.appendedSince);
    // The run grew eightfold between the first snapshot and the last; the snapshot did not grow with it.
    const first = written[0] as Written;
    const last = written.at(-1) as Written;
    expect(last.seq).toBeGreaterThan(7 * first.seq);
    expect(last.bodyBytes).toBeLessThan(first.bodyBytes * 1.25);
    // Each write read the entries since the previous snapshot (and the one it was taken at), never the run again.
    expect(read.entries).toBeLessThanOrEqual(entries + written.length);
  });

  it("snapshots: false writes none", async () => {
    const { journal, written } = watchedJournal();
    const out = await longRunLoop(700, { snapshots: false }).run({ runId: "long", journal, input: "go" });
    expect(out.content).toBe("done");
    expect(written).toEqual([]);
    expect(await journal.store.latestSnapshot?.("long")).toBeUndefined();
  });

  it("refuses a snapshots option that is neither an object nor false", () => {
    for (const snapshots of [true, 1000, "compact", null]) {
      expect(() => longRunLoop(1, { snapshots } as unknown as Partial<AgentLoopConfig>)).toThrow(AgentLoopConfigError);
    }
  });

  it("a resume from a default snapshot gives the byte-identical tool-call log, journal and state of a resume without snapshots (SQLite)", async () => {
    const file = tmp.file("default.db");
    const recorded = openSqliteJournal(file, { synchronous: "normal" });
    await interruptedRun(recorded, 900);
    await recorded.close();
    copyFileSync(file, tmp.file("plain.db"));
    const a = openSqliteJournal(file, { synchronous: "normal" });
    const b = openSqliteJournal(tmp.file("plain.db"), { synchronous: "normal" });
    try {
      const snapshot = await a.store.latestSnapshot?.("long");
      expect(snapshot?.seq).toBeGreaterThanOrEqual(3 * DEFAULT_SNAPSHOT_EVERY);
      // What the resume reads: the compact snapshot and the entries after it.
      const resumeRead = await readRunState(a, "long", { compact: true });
      expect(resumeRead.snapshotSeq).toBe(snapshot?.seq);
      expect(resumeRead.state.compacted?.belowTurn).toBeGreaterThan(0);
      const plain = withoutSnapshots(b);
      const outA = await longRunLoop(1500).run({ runId: "long", journal: a });
      const outB = await longRunLoop(1500, { snapshots: false }).run({ runId: "long", journal: plain });
      expect(outA.content).toBe("done");
      expect(JSON.stringify(outA)).toBe(JSON.stringify(outB));
      expect(facts(await readJournal(a, "long"))).toBe(facts(await readJournal(plain, "long")));
      // The state read through the snapshot is the fold of the whole journal (the two journals'
      // entries are the same facts; their times differ, and the state keeps entry times).
      expect(stateText(await foldRun(a, "long"))).toBe(stateText(foldEntries(await readJournal(a, "long"))));
      expect(JSON.stringify(await rebuildToolCallLog(a, "long", "full"))).toBe(
        JSON.stringify(await rebuildToolCallLog(plain, "long", "full")),
      );
      // The resumed run went on writing snapshots; the one without wrote none (its copy keeps the recorded one).
      expect((await a.store.latestSnapshot?.("long"))?.seq).toBeGreaterThan(snapshot?.seq ?? 0);
      expect((await b.store.latestSnapshot?.("long"))?.seq).toBe(snapshot?.seq);
    } finally {
      await a.close();
      await b.close();
    }
  }, 60_000);

  it.each([
    ["no snapshot", "none"],
    ["a full snapshot", "full"],
  ] as const)(
    "a run recorded by an earlier Loom with %s resumes under the default to the journal and log of a resume without snapshots",
    async (_, kind) => {
      // The earlier Loom wrote no snapshot by default; one configured with `{ every }` wrote full ones.
      const old = createJournal({ store: memoryStore({ json: true }) });
      await interruptedRun(old, 300, { snapshots: false });
      if (kind === "full") expect(await writeRunSnapshot(old, "long")).toBe(300 * 4 + 2);
      const entries = await old.store.read("long");
      const copy = createJournal({ store: memoryStore({ json: true }) });
      await copy.store.append(
        "long",
        entries.map((e) => ({ type: e.type, data: e.data }) as never),
        { expectedVersion: 0 },
      );
      const outA = await longRunLoop(800).run({ runId: "long", journal: old });
      const outB = await longRunLoop(800, { snapshots: false }).run({ runId: "long", journal: copy });
      expect(outA.content).toBe("done");
      expect(JSON.stringify(outA)).toBe(JSON.stringify(outB));
      expect(facts(await readJournal(old, "long"))).toBe(facts(await readJournal(copy, "long")));
      expect(JSON.stringify(await rebuildToolCallLog(old, "long", "full"))).toBe(
        JSON.stringify(await rebuildToolCallLog(copy, "long", "full")),
      );
      // The resumed part wrote compact snapshots over what the earlier Loom left.
      const latest = await old.store.latestSnapshot?.("long");
      expect(latest?.seq).toBeGreaterThan(300 * 4 + 2);
      expect((JSON.parse(latest?.body ?? "{}") as { format: number }).format).toBe(2);
      expect(stateText(await foldRun(old, "long"))).toBe(stateText(foldEntries(await readJournal(old, "long"))));
      expect((await readRunState(old, "long", { compact: true })).state.turns).toBe(801);
    },
  );
});

describe("snapshots with no option set, on an encoded or redacted journal", () => {
  it.each(["codec", "redaction"] as const)(
    "a %s journal writes no snapshot (it would hold the run's payloads in clear)",
    async (wrap) => {
      const inner = createJournal({ store: memoryStore({ json: true }) });
      const keys = staticKeys({ current: "k1", keys: { k1: randomBytes(32) } });
      const journal =
        wrap === "codec"
          ? withCodec(inner, payloadCodec({ compress: "gzip", encrypt: { keys } }))
          : withRedaction(inner, redaction({ paths: ["$..title"] }));
      const out = await longRunLoop(300).run({ runId: "long", journal, input: "go" });
      expect(out.content).toBe("done");
      expect((await inner.store.read("long")).length).toBeGreaterThan(DEFAULT_SNAPSHOT_EVERY);
      expect(await inner.store.latestSnapshot?.("long")).toBeUndefined();
    },
  );
});

/** The journal with its store's snapshot methods taken away. */
function withoutSnapshots(journal: Journal): Journal {
  const { writeSnapshot: _w, latestSnapshot: _l, ...store } = journal.store;
  return { ...journal, store: store as EventStore };
}
