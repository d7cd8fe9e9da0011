import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { isJournalFormatError } from "../../src/core/errors.ts";
import { createJournal, openSqliteJournal, readJournal } from "../../src/events/journal.ts";
import type { EventStore } from "../../src/events/store.ts";
import type { JournalEntry } from "../../src/events/types.ts";
import { decision, runStarted } from "./entries.ts";
import { tempDir } from "./tmp.ts";

describe("readJournal", () => {
  it("reads a run's entries in order, from a seq", async () => {
    const journal = openSqliteJournal(":memory:");
    await journal.store.append("r", [runStarted(), decision("a", 1), decision("b", 2)], { expectedVersion: 0 });
    expect((await readJournal(journal, "r")).map((e) => e.seq)).toEqual([1, 2, 3]);
    expect((await readJournal(journal, "r", { from: 2 })).map((e) => e.seq)).toEqual([2, 3]);
    await journal.close();
  });

  it("never hands out what a store got wrong", async () => {
    const meta = { v: 1, at: "2024-01-01T00:00:00.000Z" };
    const liar: EventStore = {
      append: async () => ({ version: 0 }),
      read: async () => [
        { runId: "r", seq: 1, type: "run.started", data: { loopId: "l" }, meta } as unknown as JournalEntry,
      ],
      listRuns: async () => [],
      compact: async () => ({ version: 0 }),
      acquire: () => Promise.reject(new Error("not used")),
      renew: () => Promise.reject(new Error("not used")),
      release: async () => {},
      requestCancel: () => Promise.reject(new Error("not used")),
      close: async () => {},
    };
    const e = await readJournal(createJournal({ store: liar }), "r").catch((x: unknown) => x);
    expect(isJournalFormatError(e)).toBe(true);
    expect(e).toMatchObject({ runId: "r", seq: 1, field: "data.input" });
  });
});

describe("openSqliteJournal", () => {
  it("keeps entries, blobs and archive in one file, and close() releases it", async () => {
    const tmp = tempDir();
    const journal = openSqliteJournal(tmp.file("loom.db"));
    await journal.store.append("r", [runStarted()], { expectedVersion: 0 });
    const { ref } = await journal.blobs!.put(new TextEncoder().encode("big"));
    await journal.archive!.put("r", []);
    await journal.close();
    const db = new Database(tmp.file("loom.db"), { readonly: true });
    const count = (table: string) => db.prepare(`SELECT count(*) FROM ${table}`).pluck().get();
    expect([count("loom_entries"), count("loom_blobs"), count("loom_archive")]).toEqual([1, 1, 1]);
    db.close();
    const reopened = openSqliteJournal(tmp.file("loom.db"));
    expect(new TextDecoder().decode(await reopened.blobs!.get(ref))).toBe("big");
    await reopened.close();
    tmp.remove();
  });
});
