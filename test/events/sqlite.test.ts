import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { isJournalFormatError, type JournalFormatError } from "../../src/core/errors.ts";
import { createJournal, readJournal } from "../../src/events/journal.ts";
import { sqliteStore } from "../../src/events/sqlite/sqlite.ts";
import { SQLITE_SCHEMA_VERSION } from "../../src/events/sqlite/sqliteFile.ts";
import { decision, frameCompleted, frameStarted, runStarted } from "./entries.ts";
import { storeContract } from "./storeContract.ts";
import { tempDir } from "./tmp.ts";

storeContract("sqlite", async () => {
  const tmp = tempDir();
  return { store: sqliteStore(tmp.file("journal.db")), cleanup: async () => tmp.remove() };
});

describe("sqliteStore", () => {
  let tmp: ReturnType<typeof tempDir>;
  let path: string;
  beforeEach(() => {
    tmp = tempDir();
    path = tmp.file("journal.db");
  });
  afterEach(() => tmp.remove());

  it("creates its tables on open, in WAL mode, and records the schema version in loom_meta", async () => {
    await sqliteStore(path).close();
    const db = new Database(path);
    expect(db.pragma("journal_mode", { simple: true })).toBe("wal");
    expect(db.prepare("SELECT value FROM loom_meta WHERE key = 'schema_version'").pluck().get()).toBe(
      String(SQLITE_SCHEMA_VERSION),
    );
    db.close();
  });

  it("refuses to open a file whose Loom tables are newer than this Loom", async () => {
    await sqliteStore(path).close();
    const db = new Database(path);
    db.prepare("UPDATE loom_meta SET value = '99' WHERE key = 'schema_version'").run();
    db.close();
    expect(() => sqliteStore(path)).toThrow(/schema version 99, newer than this Loom knows/);
  });

  it("stores each entry's data as the exact text JSON.stringify wrote", async () => {
    const store = sqliteStore(path);
    const output = { z: 1, a: [true, null], s: "é\u2028🎉", d: new Date(0) };
    await store.append("r", [frameStarted("f"), frameCompleted("f", output)], { expectedVersion: 0 });
    await store.close();
    const db = new Database(path, { readonly: true });
    const text = db.prepare("SELECT data FROM loom_journal WHERE run_id = 'r' AND seq = 2").pluck().get();
    const row = db.prepare("SELECT frame, data FROM loom_entries WHERE seq = 2").get();
    db.close();
    expect(text).toBe(JSON.stringify({ frameId: "f", output }));
    expect(row).toEqual({ frame: "f", data: JSON.stringify(output) }); // the frame id in its column
  });

  it("keeps a frame.started in columns (digest as 32 bytes) and the loom_journal view shows its text and meta", async () => {
    const store = sqliteStore(path);
    const started = frameStarted("l#turn:0:tool:0");
    await store.append("r", [runStarted(), started], { expectedVersion: 0 });
    const [, live] = await store.read("r");
    await store.close();
    const db = new Database(path, { readonly: true });
    const row = db.prepare("SELECT frame, effect, length(digest) AS n, data FROM loom_entries WHERE seq = 2").get();
    const view = db.prepare("SELECT run_id, seq, type, data, meta FROM loom_journal ORDER BY seq").all();
    db.close();
    expect(row).toEqual({ frame: "l#turn:0:tool:0", effect: "tool:search", n: 32, data: null });
    expect(view[1]).toEqual({
      run_id: "r",
      seq: 2,
      type: "frame.started",
      data: JSON.stringify(started.data),
      meta: JSON.stringify(live?.meta),
    });
  });

  it("keeps a tool frame.completed's recorded digest in the digest column; the view rebuilds its text", async () => {
    const store = sqliteStore(path);
    const data = { frameId: "l#turn:0:tool:0", digest: "ab".repeat(32), bytes: 7, output: { ok: [1, "x"] } };
    await store.append("r", [runStarted(), frameStarted(data.frameId), { type: "frame.completed", data }], {
      expectedVersion: 0,
    });
    expect((await store.read("r"))[2]?.data).toEqual(data);
    await store.close();
    const db = new Database(path, { readonly: true });
    const row = db.prepare("SELECT frame, effect, hex(digest) AS d, data FROM loom_entries WHERE seq = 3").get();
    const text = db.prepare("SELECT data FROM loom_journal WHERE seq = 3").pluck().get();
    db.close();
    expect(row).toEqual({ frame: data.frameId, effect: null, d: "AB".repeat(32), data: '7,"output":{"ok":[1,"x"]}' });
    expect(text).toBe(JSON.stringify(data));
  });

  it("shares one file between two connections: each sees the other's appends and version", async () => {
    const a = sqliteStore(path);
    const b = sqliteStore(path);
    await a.append("r", [runStarted()], { expectedVersion: 0 });
    await expect(b.append("r", [decision("d", 1)], { expectedVersion: 0 })).rejects.toMatchObject({ actual: 1 });
    await b.append("r", [decision("d", 1)], { expectedVersion: 1 });
    expect((await a.read("r")).map((e) => e.seq)).toEqual([1, 2]);
    await a.close();
    await b.close();
  });

  it("reads a run longer than one page, and names the seq of a damaged row on a later page", async () => {
    const store = sqliteStore(path);
    const entries = [runStarted(), ...Array.from({ length: 599 }, (_, i) => decision(`d${i}`, i))];
    await store.append("r", entries, { expectedVersion: 0 });
    expect((await readJournal(createJournal({ store }), "r", { from: 2 })).map((e) => e.seq)).toEqual(
      Array.from({ length: 599 }, (_, i) => i + 2),
    );
    const db = new Database(path);
    db.exec("UPDATE loom_entries SET data = '{' WHERE seq = 555");
    db.close();
    await expect(store.read("r")).rejects.toMatchObject({ code: "journalFormat", seq: 555, field: "data" });
    await store.close();
  });

  describe("a hand-damaged row is reported by readJournal with run, seq and field", () => {
    const damage = async (sql: string): Promise<JournalFormatError> => {
      const store = sqliteStore(path);
      await store.append(
        "r",
        [runStarted(), frameStarted("l#turn:0:tool:0"), frameCompleted("l#turn:0:tool:0", { n: 1 }), decision("d", 1)],
        { expectedVersion: 0 },
      );
      const db = new Database(path);
      db.exec(sql);
      db.close();
      try {
        await readJournal(createJournal({ store }), "r");
      } catch (e) {
        if (isJournalFormatError(e)) return e;
        throw e;
      } finally {
        await store.close();
      }
      throw new Error("expected a JournalFormatError");
    };

    it("truncated JSON", async () => {
      const e = await damage("UPDATE loom_entries SET data = substr(data, 1, length(data) - 4) WHERE seq = 3");
      expect(e).toMatchObject({ code: "journalFormat", runId: "r", seq: 3, field: "data" });
      expect(e.message).toMatch(/^run r seq 3 \(data\): the stored text is not JSON/);
    });

    it("an unknown type", async () => {
      const e = await damage("UPDATE loom_entries SET type = 99 WHERE seq = 2");
      expect(e).toMatchObject({ runId: "r", seq: 2, field: "type" });
      expect(e.message).toMatch(/unknown entry type code 99/);
    });

    it("a future schema version", async () => {
      const e = await damage("UPDATE loom_entries SET v = 2 WHERE seq = 4");
      expect(e).toMatchObject({ runId: "r", seq: 4, field: "meta.v" });
      expect(e.message).toMatch(/schema version 2 is newer than this Loom reads \(1\)/);
    });

    it("a frame.started row whose digest is not 32 bytes", async () => {
      const e = await damage("UPDATE loom_entries SET digest = x'00ff' WHERE seq = 2");
      expect(e).toMatchObject({ runId: "r", seq: 2, field: "digest" });
    });

    it("a frame.completed row without its output", async () => {
      const e = await damage("UPDATE loom_entries SET data = NULL WHERE seq = 3");
      expect(e).toMatchObject({ runId: "r", seq: 3, field: "data" });
    });

    it("a seq gap that no frames.archived marker explains", async () => {
      const e = await damage("DELETE FROM loom_entries WHERE seq = 2");
      expect(e).toMatchObject({ runId: "r", seq: 2, field: "seq" });
    });

    it("a field of the wrong kind", async () => {
      const e = await damage(
        `UPDATE loom_entries SET frame = NULL, effect = NULL, digest = NULL, data = '{"frameId":42}' WHERE seq = 2`,
      );
      expect(e).toMatchObject({ runId: "r", seq: 2, field: "data.frameId" });
    });
  });
});
