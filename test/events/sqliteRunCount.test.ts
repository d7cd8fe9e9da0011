import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { compact } from "../../src/events/compact.ts";
import { type OpenJournal, openSqliteJournal } from "../../src/events/journal.ts";
import { sqliteStore } from "../../src/events/sqlite/sqlite.ts";
import type { EventStore, RunSummary } from "../../src/events/store.ts";
import { decision, runStarted, turn } from "./entries.ts";
import { tempDir } from "./tmp.ts";

/**
 * `listRuns`' `entries` on SQLite: read from `loom_runs.removed` (last seq − entries kept, kept by
 * a trigger on delete), not counted. Each case checks it against the rows themselves, counted.
 */

/** Every run with entries, as the rows say: its last seq and how many rows it keeps. */
function counted(path: string): { runId: string; version: number; entries: number }[] {
  const db = new Database(path, { readonly: true });
  try {
    return db
      .prepare(
        `SELECT r.run_id AS runId, max(e.seq) AS version, count(*) AS entries
           FROM loom_entries e JOIN loom_runs r ON r.run = e.run GROUP BY r.run_id ORDER BY r.run_id`,
      )
      .all() as { runId: string; version: number; entries: number }[];
  } finally {
    db.close();
  }
}

const summary = (runs: readonly RunSummary[]) =>
  runs.map(({ runId, version, entries }) => ({ runId, version, entries }));

async function expectExact(store: EventStore, path: string): Promise<void> {
  expect(summary(await store.listRuns())).toEqual(counted(path));
}

async function appendAll(store: EventStore, runId: string, entries: Parameters<EventStore["append"]>[1]) {
  const version = (await store.listRuns({ prefix: runId })).find((r) => r.runId === runId)?.version ?? 0;
  return (await store.append(runId, entries, { expectedVersion: version })).version;
}

const sha = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex");

describe("SQLite listRuns entries (loom_runs.removed)", () => {
  let tmp: ReturnType<typeof tempDir>;
  let path: string;
  beforeEach(() => {
    tmp = tempDir();
    path = tmp.file("j.db");
  });
  afterEach(() => tmp.remove());

  it("are exact after appends and after each of several compactions, and readers' listRuns agrees", async () => {
    const journal: OpenJournal = openSqliteJournal(path);
    try {
      await appendAll(journal.store, "r", [runStarted("demo"), ...turn("demo", 0, 2)]);
      await appendAll(journal.store, "s", [runStarted("demo")]);
      await expectExact(journal.store, path);
      for (let round = 0; round < 4; round++) {
        const first = 1 + round * 3;
        await appendAll(
          journal.store,
          "r",
          [first, first + 1, first + 2].flatMap((i) => turn("demo", i, 2)),
        );
        const result = await compact(journal, "r", { keepTurns: 1 });
        expect(result.frameIds.length).toBeGreaterThan(0);
        const [r] = await journal.store.listRuns({ prefix: "r" });
        expect(r).toMatchObject({ runId: "r", version: result.version, lastType: "frames.archived" });
        expect(r?.entries).toBe((await journal.store.read("r")).length);
        expect(r?.entries).toBeLessThan(r?.version ?? 0);
        await expectExact(journal.store, path);
      }
      const reader = sqliteStore(path, { readonly: true });
      expect(await reader.listRuns()).toEqual(await journal.store.listRuns());
      await reader.close();
    } finally {
      await journal.close();
    }
  });

  it("stay exact whatever rows are deleted outside Loom: below the last, the last ones, a whole run", async () => {
    const store = sqliteStore(path);
    const raw = new Database(path);
    try {
      let seed = 7;
      const random = (n: number) => {
        seed = (seed * 1103515245 + 12345) % 2 ** 31;
        return seed % n;
      };
      const ids = ["a", "b", "c"];
      const keyOf = raw.prepare("SELECT run FROM loom_runs WHERE run_id = ?").pluck();
      const seqs = raw.prepare("SELECT seq FROM loom_entries WHERE run = ? ORDER BY seq").pluck();
      const removeOne = raw.prepare("DELETE FROM loom_entries WHERE run = ? AND seq = ?");
      for (let step = 0; step < 300; step++) {
        const runId = ids[random(ids.length)] as string;
        const key = keyOf.get(runId) as number | undefined;
        const held = key === undefined ? [] : (seqs.all(key) as number[]);
        const op = random(10);
        if (held.length === 0 || op < 5) {
          const n = 1 + random(4);
          const fresh = held.length === 0 ? [runStarted("demo")] : [];
          const more = Array.from({ length: n - fresh.length }, (_, i) => decision(`d${step}.${i}`, i));
          await appendAll(store, runId, [...fresh, ...more]);
        } else if (op < 8) {
          removeOne.run(key, held[random(held.length)]); // anywhere, the last row included
        } else if (op < 9) {
          raw.prepare("DELETE FROM loom_entries WHERE run = ? AND seq > ?").run(key, held[random(held.length)]);
        } else {
          raw.prepare("DELETE FROM loom_entries WHERE run = ?").run(key); // the whole run: it starts again at 1
        }
        await expectExact(store, path);
      }
    } finally {
      raw.close();
      await store.close();
    }
  });

  it("count a run removed with SQLite's tools and started again under its id from its new entries only", async () => {
    // SQLite has no pruneRuns; PruneNotSupportedError advises removing old runs with the database's tools.
    const journal = openSqliteJournal(path);
    try {
      await appendAll(journal.store, "old", [runStarted("demo"), ...[0, 1, 2].flatMap((i) => turn("demo", i, 1))]);
      await compact(journal, "old", { keepTurns: 1 });
      const raw = new Database(path);
      raw.exec(`DELETE FROM loom_entries WHERE run = (SELECT run FROM loom_runs WHERE run_id = 'old');
                DELETE FROM loom_snapshots WHERE run_id = 'old'`);
      raw.close();
      expect(await journal.store.listRuns()).toEqual([]);
      await journal.store.append("old", [runStarted("demo"), decision("d", 1)], { expectedVersion: 0 });
      expect(summary(await journal.store.listRuns())).toEqual([{ runId: "old", version: 2, entries: 2 }]);
      await expectExact(journal.store, path);
    } finally {
      await journal.close();
    }
  });

  it("are exact when a compaction removes the run's last entry (its marker comes first)", async () => {
    const journal = openSqliteJournal(path);
    try {
      await appendAll(journal.store, "r", [runStarted("demo"), ...[0, 1].flatMap((i) => turn("demo", i, 2))]);
      const last = (await journal.store.read("r")).at(-1);
      expect(last?.type === "frame.completed" ? last.data.frameId : undefined).toBe("demo#turn:1:tool:1");
      const result = await compact(journal, "r", { keepTurns: 0 });
      expect(result.frameIds).toContain("demo#turn:1:tool:1");
      expect(summary(await journal.store.listRuns())).toEqual([{ runId: "r", version: 14, entries: 6 }]);
      await expectExact(journal.store, path);
    } finally {
      await journal.close();
    }
  });

  it("are read from the column, not counted (a wrong value shows)", async () => {
    const store = sqliteStore(path);
    await store.append("r", [runStarted("demo"), decision("d", 1)], { expectedVersion: 0 });
    const raw = new Database(path);
    raw.exec("UPDATE loom_runs SET removed = 1");
    raw.close();
    expect(summary(await store.listRuns())).toEqual([{ runId: "r", version: 2, entries: 1 }]);
    await store.close();
  });
});

/**
 * A file as every Loom before `loom_runs.removed` wrote it (schema version 2): its tables as that
 * Loom created them (fixed here, as they were), its rows what Loom writes, compacted as it did
 * (rows deleted, a marker appended, no trigger). The rows are made by today's store in another
 * file (the row layout did not change) and copied over column by column.
 */
async function writeV2(path: string, scratch: string): Promise<void> {
  const journal = openSqliteJournal(scratch);
  try {
    await appendAll(journal.store, "a", [runStarted("demo"), ...[0, 1, 2, 3].flatMap((i) => turn("demo", i, 2))]);
    await compact(journal, "a", { keepTurns: 1 });
    await appendAll(
      journal.store,
      "a",
      [4, 5].flatMap((i) => turn("demo", i, 2)),
    );
    await compact(journal, "a", { keepTurns: 1 });
    await appendAll(journal.store, "b", [runStarted("demo"), ...turn("demo", 0, 1)]);
    await appendAll(journal.store, "c/child", [runStarted("child"), decision("d", 1)]);
  } finally {
    await journal.close();
  }
  const db = new Database(path);
  db.exec(`
    CREATE TABLE loom_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    INSERT INTO loom_meta VALUES ('schema_version', '2');
    CREATE TABLE loom_runs (run INTEGER PRIMARY KEY, run_id TEXT NOT NULL UNIQUE);
    CREATE TABLE loom_entry_types (code INTEGER PRIMARY KEY, type TEXT NOT NULL UNIQUE);
    CREATE TABLE loom_entries (
      run INTEGER NOT NULL, seq INTEGER NOT NULL, type INTEGER NOT NULL, at INTEGER NOT NULL,
      v INTEGER NOT NULL, frame TEXT, effect TEXT, digest BLOB, data TEXT, UNIQUE (run, seq)
    );
    CREATE TABLE loom_blobs (digest TEXT PRIMARY KEY, size INTEGER NOT NULL, bytes BLOB NOT NULL);
    CREATE TABLE loom_archive (ref TEXT PRIMARY KEY, run_id TEXT NOT NULL, body TEXT NOT NULL);
    CREATE INDEX loom_archive_run ON loom_archive (run_id);`);
  db.prepare("ATTACH DATABASE ? AS src").run(scratch);
  db.exec(`
    INSERT INTO loom_runs (run, run_id) SELECT run, run_id FROM src.loom_runs;
    INSERT INTO loom_entry_types SELECT code, type FROM src.loom_entry_types;
    INSERT INTO loom_entries SELECT run, seq, type, at, v, frame, effect, digest, data FROM src.loom_entries;
    INSERT INTO loom_archive SELECT ref, run_id, body FROM src.loom_archive;
    DETACH DATABASE src;`);
  db.close();
}

describe("a file written before loom_runs.removed (schema version 2)", () => {
  let tmp: ReturnType<typeof tempDir>;
  let path: string;
  let expected: { runId: string; version: number; entries: number }[];
  beforeEach(async () => {
    tmp = tempDir();
    path = tmp.file("v2.db");
    await writeV2(path, tmp.file("scratch.db"));
    expected = counted(path);
    expect(expected).toEqual([
      { runId: "a", version: 39, entries: 19 },
      { runId: "b", version: 5, entries: 5 },
      { runId: "c/child", version: 2, entries: 2 },
    ]);
  });
  afterEach(() => tmp.remove());

  it("is read read-only as it is: entries counted, nothing in the file changed", async () => {
    const before = sha(path);
    const reader = sqliteStore(path, { readonly: true });
    expect(summary(await reader.listRuns())).toEqual(expected);
    expect(summary(await reader.listRuns({ prefix: "c/" }))).toEqual(expected.slice(2));
    expect((await reader.read("a")).length).toBe(19);
    await reader.close();
    expect(sha(path)).toBe(before);
  });

  it("gets the column on its first open to write, set from its rows once, and stays exact as it is compacted again", async () => {
    const journal = openSqliteJournal(path);
    try {
      expect(summary(await journal.store.listRuns())).toEqual(expected);
      const db = new Database(path, { readonly: true });
      expect(db.prepare("SELECT run_id, removed FROM loom_runs ORDER BY run_id").raw().all()).toEqual([
        ["a", 20],
        ["b", 0],
        ["c/child", 0],
      ]);
      // Version 3: a Loom at version 2 refuses it (its compaction would not keep `removed`).
      expect(db.prepare("SELECT value FROM loom_meta WHERE key = 'schema_version'").pluck().get()).toBe("3");
      db.close();
      await appendAll(
        journal.store,
        "a",
        [6, 7].flatMap((i) => turn("demo", i, 2)),
      );
      await compact(journal, "a", { keepTurns: 1 });
      await appendAll(journal.store, "b", [...turn("demo", 1, 1), ...turn("demo", 2, 1)]);
      await compact(journal, "b", { keepTurns: 0 });
      await expectExact(journal.store, path);
      const [a] = await journal.store.listRuns({ prefix: "a" });
      expect(a?.entries).toBe((await journal.store.read("a")).length);
    } finally {
      await journal.close();
    }
    // Opened again: not set from the rows a second time (a wrong value would stay; see above).
    const again = sqliteStore(path);
    await expectExact(again, path);
    await again.close();
    const reader = sqliteStore(path, { readonly: true });
    await expectExact(reader, path);
    await reader.close();
  });
});
