import { existsSync, renameSync } from "node:fs";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { openSqliteJournal } from "../../src/events/journal.ts";
import type { SqliteEventStore } from "../../src/events/sqlite.ts";
import { CHECKPOINT_PAGES, INLINE_LIMIT_PAGES, walCheckpointer } from "../../src/events/sqliteCheckpoint.ts";
import { sqliteFileOf } from "../../src/events/sqliteFile.ts";
import { decision, runStarted } from "./entries.ts";
import { tempDir } from "./tmp.ts";

/** A WAL file at synchronous=NORMAL with one table, as a journal opened at "normal" is. */
function walFile(path: string): Database.Database {
  const db = new Database(path);
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  db.exec("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)");
  return db;
}

/** Commits `n` rows of 3 kB, one a commit (about 1 page each). */
function commit(db: Database.Database, from: number, n: number): void {
  const insert = db.prepare("INSERT INTO t (k, v) VALUES (?, ?)");
  for (let k = from; k < from + n; k++) insert.run(k, "x".repeat(3000));
}

/** Frames in the WAL now (a PASSIVE checkpoint of a connection copies none it does not have to). */
const walFrames = (db: Database.Database) =>
  (db.pragma("wal_checkpoint(PASSIVE)") as { log: number }[])[0]?.log ?? Number.NaN;

describe("WAL checkpoints on a worker thread (synchronous: normal)", () => {
  let tmp: ReturnType<typeof tempDir>;
  beforeEach(() => {
    tmp = tempDir();
  });
  afterEach(() => tmp.remove());

  it("the appending connection no longer checkpoints at 1,000 pages; the worker does, and the WAL starts over", async () => {
    const db = walFile(tmp.file("a.db"));
    const checkpoints = walCheckpointer(db, "normal", { pages: 50 });
    expect(checkpoints).toBeDefined();
    expect(db.pragma("wal_autocheckpoint", { simple: true })).toBe(INLINE_LIMIT_PAGES);
    for (let i = 0; i < 120; i++) {
      commit(db, i, 1);
      checkpoints?.wrote(1);
    }
    expect(checkpoints?.stats.requests).toBe(2);
    // The writer pauses: the worker copies the whole WAL into the file.
    await vi.waitFor(
      () => {
        const last = checkpoints?.stats.last;
        expect(last !== undefined && last.log > 0 && last.checkpointed === last.log).toBe(true);
      },
      { timeout: 10_000, interval: 10 },
    );
    expect(checkpoints?.stats.failed).toBeUndefined();
    // So the next commit writes the WAL from its start: a few frames, not 120 and more.
    commit(db, 1000, 1);
    expect(walFrames(db)).toBeLessThan(10);
    await checkpoints?.close();
    expect(db.prepare("SELECT count(*) FROM t").pluck().get()).toBe(121);
    db.close();
  });

  it("without the worker the WAL keeps every frame (the control: the inline limit is above what was written)", () => {
    const db = walFile(tmp.file("b.db"));
    db.pragma(`wal_autocheckpoint = ${INLINE_LIMIT_PAGES}`);
    commit(db, 0, 120);
    commit(db, 1000, 1);
    expect(walFrames(db)).toBeGreaterThanOrEqual(120);
    db.close();
  });

  it("a file the worker cannot open (moved away) goes back to the appending connection's inline checkpoints", async () => {
    const db = walFile(tmp.file("c.db"));
    const checkpoints = walCheckpointer(db, "normal", { pages: 10 });
    commit(db, 0, 10);
    renameSync(tmp.file("c.db"), tmp.file("moved.db")); // the connection keeps its descriptor
    checkpoints?.wrote(10);
    await vi.waitFor(() => expect(checkpoints?.stats.failed).toMatch(/c\.db: the checkpoint worker failed/), {
      timeout: 10_000,
      interval: 10,
    });
    expect(db.pragma("wal_autocheckpoint", { simple: true })).toBe(CHECKPOINT_PAGES);
    await checkpoints?.close();
    db.close();
  });

  it("only a WAL file Loom opened at normal gets one: full, in-memory and read-only do not", () => {
    const full = walFile(tmp.file("d.db"));
    expect(walCheckpointer(full, "full")).toBeUndefined();
    expect(walCheckpointer(full, undefined)).toBeUndefined(); // a database handed in: its settings are the caller's
    expect(full.pragma("wal_autocheckpoint", { simple: true })).toBe(1000);
    full.close();
    const memory = new Database(":memory:");
    expect(walCheckpointer(memory, "normal")).toBeUndefined();
    memory.close();
    const readonly = new Database(tmp.file("d.db"), { readonly: true });
    expect(walCheckpointer(readonly, "normal")).toBeUndefined();
    readonly.close();
  });

  it("a journal at normal: every entry is kept through the worker's checkpoints, and its close removes the WAL", async () => {
    const path = tmp.file("journal.db");
    const journal = openSqliteJournal(path, { synchronous: "normal" });
    const { db } = (journal.store as SqliteEventStore)[sqliteFileOf];
    expect(db.pragma("wal_autocheckpoint", { simple: true })).toBe(INLINE_LIMIT_PAGES);
    const big = "y".repeat(8000);
    await journal.store.append("r", [runStarted()], { expectedVersion: 0 });
    // About 1,200 pages: past the first request, so the worker holds a connection to the file.
    for (let v = 1; v <= 400; v++) {
      await journal.store.append("r", [decision(`d${v}`, { note: big })], { expectedVersion: v });
    }
    // Another connection sees each entry whatever the worker has copied.
    const reader = new Database(path, { readonly: true });
    expect(reader.prepare("SELECT count(*) FROM loom_entries").pluck().get()).toBe(401);
    reader.close();
    await journal.close();
    expect(existsSync(`${path}-wal`)).toBe(false);
    const again = openSqliteJournal(path, { readonly: true });
    const entries = await again.store.read("r");
    expect(entries).toHaveLength(401);
    expect(entries[400]?.data).toMatchObject({ choice: { note: big } });
    await again.close();
  });

  it("checkpoints: inline keeps SQLite's own checkpoints at normal", async () => {
    const journal = openSqliteJournal(tmp.file("inline.db"), { synchronous: "normal", checkpoints: "inline" });
    await journal.store.append("r", [runStarted()], { expectedVersion: 0 });
    const { db } = (journal.store as SqliteEventStore)[sqliteFileOf];
    expect(db.pragma("wal_autocheckpoint", { simple: true })).toBe(1000);
    await journal.close();
  });

  it("a journal at full keeps SQLite's own inline checkpoints", async () => {
    const path = tmp.file("full.db");
    const journal = openSqliteJournal(path);
    await journal.store.append("r", [runStarted()], { expectedVersion: 0 });
    const { db } = (journal.store as SqliteEventStore)[sqliteFileOf];
    expect(db.pragma("wal_autocheckpoint", { simple: true })).toBe(1000);
    await journal.close();
  });
});
