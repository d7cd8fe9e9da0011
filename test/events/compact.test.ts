import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { digestOf } from "../../src/core/digest.ts";
import { isConcurrencyError, isIntegrityError } from "../../src/core/errors.ts";
import { memoryArchive, sqliteArchive } from "../../src/events/archive.ts";
import { compact } from "../../src/events/compact.ts";
import { createJournal, type OpenJournal, openSqliteJournal, readJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import { readArchived } from "../../src/events/readArchived.ts";
import { sqliteStore } from "../../src/events/sqlite/sqlite.ts";
import type { EntryOf, NewEntry } from "../../src/events/types.ts";
import { frameCompleted, frameFailed, frameStarted, runStarted, turn } from "./entries.ts";
import { tempDir } from "./tmp.ts";

const setups: { name: string; open: (dir: string) => OpenJournal }[] = [
  { name: "memory", open: () => createJournal({ store: memoryStore({ json: true }), archive: memoryArchive() }) },
  { name: "sqlite, one file", open: (dir) => openSqliteJournal(join(dir, "j.db")) },
  {
    name: "sqlite store, sqlite archive in another file",
    open: (dir) => createJournal({ store: sqliteStore(join(dir, "j.db")), archive: sqliteArchive(join(dir, "a.db")) }),
  },
  {
    name: "sqlite store, memory archive",
    open: (dir) => createJournal({ store: sqliteStore(join(dir, "j.db")), archive: memoryArchive() }),
  },
];

const output = (i: number, j: number) => ({ hits: [`turn ${i}`, `call ${j}`], when: new Date(i * 1000) });

async function append(journal: OpenJournal, runId: string, entries: NewEntry[]): Promise<number> {
  const version = (await journal.store.read(runId)).at(-1)?.seq ?? 0;
  return (await journal.store.append(runId, entries, { expectedVersion: version })).version;
}

describe.each(setups)("compact ($name)", (setup) => {
  let tmp: ReturnType<typeof tempDir>;
  let journal: OpenJournal;
  beforeEach(async () => {
    tmp = tempDir();
    journal = setup.open(tmp.dir);
    const entries = [runStarted("demo"), ...[0, 1, 2, 3].flatMap((i) => turn("demo", i, 2, (j) => output(i, j)))];
    await append(journal, "r", entries);
  });
  afterEach(async () => {
    await journal.close();
    tmp.remove();
  });

  it("moves the completed tool frames of all but the last keepTurns turns, and leaves one marker", async () => {
    const result = await compact(journal, "r", { keepTurns: 1 });
    const moved = [0, 1, 2].flatMap((i) => [0, 1].map((j) => `demo#turn:${i}:tool:${j}`));
    expect(result.frameIds).toEqual(moved);
    expect(result.version).toBe(26);
    const entries = await readJournal(journal, "r");
    const frameIds = entries.flatMap((e) => (e.type === "frame.started" ? [e.data.frameId] : []));
    // Model frames stay: they carry the tool names and inputs both log shapes need.
    expect(frameIds).toEqual(
      [0, 1, 2, 3].map((i) => `demo#turn:${i}:model`).concat(["demo#turn:3:tool:0", "demo#turn:3:tool:1"]),
    );
    const marker = entries.at(-1) as EntryOf<"frames.archived">;
    expect(marker).toMatchObject({
      seq: 26,
      type: "frames.archived",
      data: { frameIds: moved, archiveRef: result.archiveRef },
    });
    expect(marker.data.seqs).toEqual([4, 5, 6, 7, 10, 11, 12, 13, 16, 17, 18, 19]);
    expect(marker.data.digests["demo#turn:1:tool:0"]).toEqual({
      ...digestOf(output(1, 0)),
      effect: "tool:search",
      inputDigest: "0".repeat(64),
    });
    expect((await journal.store.listRuns())[0]).toEqual({
      runId: "r",
      version: 26,
      lastType: "frames.archived",
      entries: 14,
    });
  });

  it("serves each archived frame back through readArchived, verified against the marker", async () => {
    await compact(journal, "r", { keepTurns: 2 });
    const frame = await readArchived(journal, "demo#turn:1:tool:1", { runId: "r" });
    expect(frame?.started.data).toEqual({
      frameId: "demo#turn:1:tool:1",
      effect: "tool:search",
      inputDigest: "0".repeat(64),
    });
    expect(frame?.completed.data).toEqual({
      frameId: "demo#turn:1:tool:1",
      output: JSON.parse(JSON.stringify(output(1, 1))),
    });
    expect(frame?.completed.seq).toBe(13);
    // Without a run id every run is searched; a step still in the hot journal is not archived.
    expect((await readArchived(journal, "demo#turn:0:tool:0"))?.completed.seq).toBe(5);
    expect(await readArchived(journal, "demo#turn:3:tool:0", { runId: "r" })).toBeUndefined();
    expect(await readArchived(journal, "demo#turn:0:model", { runId: "r" })).toBeUndefined();
  });

  it("compacts again later without touching what it already moved; the journal stays valid", async () => {
    await compact(journal, "r", { keepTurns: 2 });
    expect((await compact(journal, "r", { keepTurns: 2 })).frameIds).toEqual([]);
    await append(journal, "r", turn("demo", 4, 1));
    expect((await compact(journal, "r", { keepTurns: 2 })).frameIds).toEqual([
      "demo#turn:2:tool:0",
      "demo#turn:2:tool:1",
    ]);
    const entries = await readJournal(journal, "r");
    expect(entries.filter((e) => e.type === "frames.archived").length).toBe(2);
    expect((await readArchived(journal, "demo#turn:2:tool:1", { runId: "r", entries }))?.completed.seq).toBe(19);
    expect((await readJournal(journal, "r", { from: 4 }))[0]?.seq).toBe(8);
  });

  it("archives a failed frame with a null digest and keeps every start of a retried frame", async () => {
    await append(journal, "r", [
      ...turn("demo", 4, 0),
      frameStarted("demo#turn:4:tool:0"),
      frameStarted("demo#turn:4:tool:0"),
      frameFailed("demo#turn:4:tool:0"),
      ...turn("demo", 5, 0),
    ]);
    await compact(journal, "r", { keepTurns: 1 });
    const marker = (await readJournal(journal, "r")).at(-1) as EntryOf<"frames.archived">;
    expect(marker.data.digests["demo#turn:4:tool:0"]).toMatchObject({ digest: null, bytes: 0, failed: true });
    const frame = await readArchived(journal, "demo#turn:4:tool:0", { runId: "r" });
    expect(frame?.attempts?.map((e) => e.seq)).toEqual([28]);
    expect(frame?.started.seq).toBe(29);
    expect(frame?.completed.data).toEqual({ frameId: "demo#turn:4:tool:0", failed: true });
  });

  it("never archives a turn with a frame still in flight", async () => {
    await append(journal, "r", [...turn("demo", 4, 1), frameStarted("demo#turn:4:tool:1")]);
    const result = await compact(journal, "r", { keepTurns: 0 });
    expect(result.frameIds).not.toContain("demo#turn:4:tool:0");
    expect(result.frameIds).toContain("demo#turn:3:tool:1");
  });

  it("raises IntegrityError when the marker's digest no longer matches the archived output", async () => {
    await compact(journal, "r", { keepTurns: 1 });
    const entries = await readJournal(journal, "r");
    const marker = entries.at(-1) as EntryOf<"frames.archived">;
    const forged = structuredClone(marker) as { data: { digests: Record<string, { digest: string }> } };
    forged.data.digests["demo#turn:0:tool:0"]!.digest = "f".repeat(64);
    const tampered = [...entries.slice(0, -1), forged] as typeof entries;
    const e = await readArchived(journal, "demo#turn:0:tool:0", { runId: "r", entries: tampered }).catch(
      (x: unknown) => x,
    );
    expect(isIntegrityError(e)).toBe(true);
    expect((e as Error).message).toMatch(/^run r step demo#turn:0:tool:0 \(frames.archived at seq 26/);
  });

  it("refuses a negative keepTurns", async () => {
    await expect(compact(journal, "r", { keepTurns: -1 })).rejects.toMatchObject({ code: "compactOptions" });
  });
});

describe("compact in one SQLite file", () => {
  it("is one transaction: when the run moves meanwhile, neither the archive nor the journal changes", async () => {
    const tmp = tempDir();
    const journal = openSqliteJournal(tmp.file("j.db"));
    await append(journal, "r", [runStarted("demo"), ...turn("demo", 0, 1), ...turn("demo", 1, 1)]);
    const before = await journal.store.read("r");
    // A store whose read lets another writer append right after: the compaction's view is stale.
    const racing = new Proxy(journal.store, {
      get(target, key, receiver) {
        if (key !== "read") return Reflect.get(target, key, receiver);
        return async (runId: string, options?: { from?: number }) => {
          const entries = await target.read(runId, options);
          await target.append(runId, [frameStarted("demo#turn:2:model", "model")], { expectedVersion: entries.length });
          return entries;
        };
      },
    });
    const e = await compact({ ...journal, store: racing }, "r", { keepTurns: 0 }).catch((x: unknown) => x);
    expect(isConcurrencyError(e)).toBe(true);
    expect((await journal.store.read("r")).slice(0, before.length)).toEqual(before);
    const db = new Database(tmp.file("j.db"), { readonly: true });
    expect(db.prepare("SELECT count(*) FROM loom_archive").pluck().get()).toBe(0);
    db.close();
    await journal.close();
    tmp.remove();
  });
});

describe("compact with the archive elsewhere", () => {
  it("archives first and is safe to retry: a failed store step leaves the journal as it was", async () => {
    const archive = memoryArchive();
    const store = memoryStore();
    const journal = createJournal({ store, archive });
    await append(journal, "r", [runStarted("demo"), ...turn("demo", 0, 1), ...turn("demo", 1, 1)]);
    const failing = createJournal({
      store: { ...store, compact: () => Promise.reject(new Error("disk full")) },
      archive,
    });
    await expect(compact(failing, "r", { keepTurns: 1 })).rejects.toThrow("disk full");
    expect((await readJournal(journal, "r")).length).toBe(9);
    const result = await compact(journal, "r", { keepTurns: 1 });
    expect(result.frameIds).toEqual(["demo#turn:0:tool:0"]);
    expect((await readArchived(journal, "demo#turn:0:tool:0", { runId: "r" }))?.completed.data).toEqual(
      frameCompleted("demo#turn:0:tool:0", { j: 0, i: 0 }).data,
    );
  });
});
