import { spawn } from "node:child_process";
import { existsSync, renameSync } from "node:fs";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { openSqliteJournal } from "../../src/events/journal.ts";
import type { SqliteEventStore } from "../../src/events/sqlite/sqlite.ts";
import {
  CHECKPOINT_PAGES,
  checkpointStatsOf,
  INLINE_LIMIT_PAGES,
  walCheckpointer,
  walPages,
} from "../../src/events/sqlite/sqliteCheckpoint.ts";
import { sqliteFileOf } from "../../src/events/sqlite/sqliteFile.ts";
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

  it("the worker copies the WAL into the file once the appends pause, and SQLite then starts the WAL over", async () => {
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
    // The worker checkpointed the file (not the appending connection, whose limit is 4,000 pages).
    await vi.waitFor(() => expect(checkpointStatsOf(db)?.checkpoints).toBeGreaterThan(0), {
      timeout: 10_000,
      interval: 10,
    });
    expect(checkpointStatsOf(db)?.failed).toBeUndefined();
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

  it("two files share the one worker; closing one leaves the other checkpointed", async () => {
    const a = walFile(tmp.file("a2.db"));
    const b = walFile(tmp.file("b2.db"));
    const ca = walCheckpointer(a, "normal", { pages: 20 });
    const cb = walCheckpointer(b, "normal", { pages: 20 });
    commit(a, 0, 20);
    ca?.wrote(20);
    commit(b, 0, 20);
    cb?.wrote(20);
    await vi.waitFor(() => expect([ca?.stats.checkpoints, cb?.stats.checkpoints]).toEqual([1, 1]), {
      timeout: 10_000,
      interval: 10,
    });
    await ca?.close();
    a.close();
    expect(existsSync(tmp.file("a2.db-wal"))).toBe(false); // the worker's connection closed first
    commit(b, 20, 20);
    cb?.wrote(20);
    await vi.waitFor(() => expect(cb?.stats.checkpoints).toBe(2), { timeout: 10_000, interval: 10 });
    expect(cb?.stats.failed).toBeUndefined();
    await cb?.close();
    b.close();
  });

  it("asks nothing once closed: an append racing the close opens no connection in the worker", async () => {
    const db = walFile(tmp.file("race.db"));
    const checkpoints = walCheckpointer(db, "normal", { pages: 10 });
    commit(db, 0, 10);
    checkpoints?.wrote(10);
    const closing = checkpoints?.close();
    commit(db, 10, 10);
    checkpoints?.wrote(10); // after close began
    await closing;
    expect(checkpoints?.stats.requests).toBe(1);
    db.close();
    expect(existsSync(tmp.file("race.db-wal"))).toBe(false); // so this connection was the last
  });

  it("a process that leaves its journal open still exits (the worker does not hold it)", async () => {
    const fixture = fileURLToPath(new URL("./workers/leftOpen.ts", import.meta.url));
    const child = spawn(process.execPath, ["--import", "tsx", fixture, tmp.file("left.db")], {
      cwd: fileURLToPath(new URL("../..", import.meta.url)),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString();
    });
    child.stderr.on("data", (chunk: Buffer) => {
      err += chunk.toString();
    });
    const killer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    const [code, signal] = (await new Promise((done) => child.on("close", (c, s) => done([c, s])))) as [
      number | null,
      string | null,
    ];
    clearTimeout(killer);
    expect({ code, signal, err }).toEqual({ code: 0, signal: null, err: "" });
    const stats = JSON.parse(out.trim()) as { checkpoints: number; failed?: string };
    expect(stats.checkpoints).toBeGreaterThan(0); // the worker had started: it did not keep the process
    expect(stats.failed).toBeUndefined();
  }, 60_000);

  it("estimates a commit's WAL pages at or above what SQLite writes", () => {
    expect(walPages(["x".repeat(200)])).toBe(3); // measured 2.1 frames a commit
    expect(walPages(["x".repeat(3000)])).toBe(4); // 4
    expect(walPages(["x".repeat(8000)])).toBe(6); // 5
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
