import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { openSqliteJournal } from "../../src/events/journal.ts";
import type { SqliteEventStore } from "../../src/events/sqlite/sqlite.ts";
import { CHECKPOINT_PAGES, checkpointStatsOf } from "../../src/events/sqlite/sqliteCheckpoint.ts";
import { sqliteFileOf } from "../../src/events/sqlite/sqliteFile.ts";
import { decision, runStarted } from "./entries.ts";
import { tempDir } from "./tmp.ts";

// A process where no worker thread can start (a permission model without --allow-worker, a
// runtime without threads): the constructor throws, as Node's does there.
vi.mock("node:worker_threads", () => ({
  Worker: class {
    constructor() {
      throw Object.assign(new Error("Access to this API has been restricted"), { code: "ERR_ACCESS_DENIED" });
    }
  },
}));

describe("WAL checkpoints when no worker thread can start", () => {
  let tmp: ReturnType<typeof tempDir>;
  beforeEach(() => {
    tmp = tempDir();
  });
  afterEach(() => tmp.remove());

  it("every append still succeeds, and the file goes back to SQLite's inline checkpoints", async () => {
    const journal = openSqliteJournal(tmp.file("j.db"), { synchronous: "normal" });
    const { db } = (journal.store as SqliteEventStore)[sqliteFileOf];
    await journal.store.append("r", [runStarted()], { expectedVersion: 0 });
    const text = "w".repeat(8000);
    // Past the first checkpoint request (about 6 pages an append): the worker cannot start there.
    for (let v = 1; v <= 250; v++) {
      await expect(journal.store.append("r", [decision(`d${v}`, text)], { expectedVersion: v })).resolves.toEqual({
        version: v + 1,
      });
    }
    expect(checkpointStatsOf(db)?.failed).toMatch(/j\.db: the checkpoint worker cannot start \(Access to this API/);
    expect(db.pragma("wal_autocheckpoint", { simple: true })).toBe(CHECKPOINT_PAGES);
    expect(await journal.store.read("r")).toHaveLength(251);
    await journal.close();
  });
});
