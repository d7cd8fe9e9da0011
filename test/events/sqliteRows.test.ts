import Database from "better-sqlite3";
import fc from "fast-check";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createJournal, readJournal } from "../../src/events/journal.ts";
import { sqliteStore } from "../../src/events/sqlite/sqlite.ts";
import { SQLITE_SCHEMA_VERSION } from "../../src/events/sqlite/sqliteFile.ts";
import {
  decodeStoredRows,
  encodeRow,
  rowText,
  type StoredRow,
  TYPE_CODES,
  v1RowColumns,
} from "../../src/events/sqlite/sqliteRows.ts";
import type { EntryType, JournalEntry } from "../../src/events/types.ts";
import { decision, frameCompleted, frameFailed, frameStarted, runCompleted, runStarted } from "./entries.ts";
import { tempDir } from "./tmp.ts";

/** The text a row gives back, after checking that the entry it decodes to is that text parsed (keys in order). */
const roundTrip = (type: EntryType, text: string): string => {
  const c = encodeRow(type, text, 0, 1);
  const row: StoredRow = [1, c.type, c.at, c.v, c.frame, c.effect, c.digest, c.data];
  const out: JournalEntry[] = [];
  decodeStoredRows("r", [row], out, "a test");
  expect(JSON.stringify(out[0]?.data)).toBe(JSON.stringify(JSON.parse(text)));
  expect(out[0]?.data).toEqual(JSON.parse(text));
  return rowText("r", row, "a test");
};

describe("the SQLite row layout (sqliteRows.ts)", () => {
  it("gives back every data text byte for byte, whatever the frame id, effect and output hold", () => {
    const anyString = fc.string({ unit: "binary" });
    fc.assert(
      fc.property(anyString, anyString, fc.jsonValue(), fc.boolean(), (frameId, effect, output, hexDigest) => {
        const inputDigest = hexDigest ? "ab".repeat(32) : frameId;
        for (const [type, data] of [
          ["frame.started", { frameId, effect, inputDigest }],
          ["frame.completed", { frameId, output }],
          ["frame.completed", { frameId, digest: inputDigest, bytes: output === null ? 0 : 12, output }],
          ["frame.completed", { frameId, digest: inputDigest, bytes: 1.5, output }],
          ["frame.completed", { frameId, digest: inputDigest, bytes: 7, claimChecked: true, output }],
          ["frame.completed", { frameId, digest: inputDigest, bytes: 7, claimChecked: true, output, after: effect }],
          ["frame.completed", { frameId, digest: inputDigest, bytes: 7, claimChecked: effect, output }],
          ["frame.completed", { frameId, output, after: effect }],
          ["frame.completed", { frameId, digest: inputDigest, bytes: 3, output, after: effect }],
          ["frame.completed", { frameId, failed: true }],
          ["frame.completed", { output, frameId }],
          ["decision.recorded", { decisionId: frameId, source: effect, choice: output }],
        ] as const) {
          const text = JSON.stringify(data);
          expect(roundTrip(type, text)).toBe(text);
        }
      }),
      { numRuns: 500 },
    );
  });

  it("splits only the frame texts of the exact form, and keeps anything else whole", () => {
    const started = `{"frameId":"a#turn:0:model","effect":"model","inputDigest":"${"0f".repeat(32)}"}`;
    expect(encodeRow("frame.started", started, 5, 1)).toMatchObject({ frame: "a#turn:0:model", data: null });
    expect(encodeRow("frame.started", started.replace("0f", "0F"), 5, 1)).toMatchObject({ frame: null });
    expect(encodeRow("frame.started", started.replace("}", ',"x":1}'), 5, 1)).toMatchObject({ frame: null });
    expect(encodeRow("frame.completed", '{"frameId":"f","output":{"a":1}}', 5, 1)).toMatchObject({
      frame: "f",
      data: '{"a":1}',
    });
    expect(encodeRow("frame.completed", '{"frameId":"f","failed":true}', 5, 1)).toMatchObject({ frame: null });
    expect(encodeRow("run.started", '{"frameId":"f","output":1}', 5, 1)).toMatchObject({ frame: null });
  });

  it("stores the two frame types, four rows of every turn, as the codes SQLite stores in no bytes", () => {
    expect([TYPE_CODES["frame.started"], TYPE_CODES["frame.completed"]]).toEqual([0, 1]);
    expect(new Set(Object.values(TYPE_CODES)).size).toBe(Object.keys(TYPE_CODES).length);
  });
});

describe("a schema version 1 file", () => {
  let tmp: ReturnType<typeof tempDir>;
  let path: string;
  beforeEach(() => {
    tmp = tempDir();
    path = tmp.file("v1.db");
  });
  afterEach(() => tmp.remove());

  /** Writes a file as Loom's schema version 1 laid it out: one text column each. */
  const writeV1 = (rows: [string, number, string, unknown, string][]) => {
    const db = new Database(path);
    db.exec(`
      CREATE TABLE loom_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      INSERT INTO loom_meta VALUES ('schema_version', '1');
      CREATE TABLE loom_entries (run_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL,
        data TEXT NOT NULL, meta TEXT NOT NULL, UNIQUE (run_id, seq));
      CREATE TABLE loom_blobs (digest TEXT PRIMARY KEY, size INTEGER NOT NULL, bytes BLOB NOT NULL);
      CREATE TABLE loom_archive (ref TEXT PRIMARY KEY, run_id TEXT NOT NULL, body TEXT NOT NULL);
      CREATE INDEX loom_archive_run ON loom_archive (run_id);`);
    const insert = db.prepare("INSERT INTO loom_entries VALUES (?, ?, ?, ?, ?)");
    for (const [runId, seq, type, data, at] of rows) {
      insert.run(runId, seq, type, JSON.stringify(data), JSON.stringify({ v: 1, at }));
    }
    db.close();
  };

  it("is migrated on open: every entry reads back as written, and appends go on after it", async () => {
    const at = "2026-11-30T10:00:00.123Z";
    const entries = [
      runStarted("l"),
      frameStarted("l#turn:0:tool:0"),
      frameCompleted("l#turn:0:tool:0", { z: 1, a: "é\u2028" }),
      frameStarted("l#turn:0:tool:1"),
      frameFailed("l#turn:0:tool:1"),
      decision("d", { n: 1 }),
      runCompleted(),
    ];
    writeV1([
      ...entries.map((e, i): [string, number, string, unknown, string] => ["a", i + 1, e.type, e.data, at]),
      ["b", 1, "run.started", runStarted("m").data, at],
    ]);
    const store = sqliteStore(path);
    const a = await readJournal(createJournal({ store }), "a");
    expect(a.map((e) => [e.seq, e.type, JSON.stringify(e.data), e.meta])).toEqual(
      entries.map((e, i) => [i + 1, e.type, JSON.stringify(e.data), { v: 1, at }]),
    );
    expect((await store.read("b")).map((e) => e.type)).toEqual(["run.started"]);
    await store.append("b", [decision("x", 2)], { expectedVersion: 1 });
    expect(await store.listRuns()).toEqual([
      { runId: "a", version: 7, lastType: "run.completed", entries: 7 },
      { runId: "b", version: 2, lastType: "decision.recorded", entries: 2 },
    ]);
    await store.close();
    const db = new Database(path, { readonly: true });
    expect(db.prepare("SELECT value FROM loom_meta WHERE key = 'schema_version'").pluck().get()).toBe(
      String(SQLITE_SCHEMA_VERSION),
    );
    expect(db.prepare("SELECT count(*) FROM sqlite_schema WHERE name = 'loom_entries_v1'").pluck().get()).toBe(0);
    db.close();
  });

  it("keeps its compacted runs' entry counts (loom_runs.removed set from the rows it kept)", async () => {
    const at = "2026-11-30T10:00:00.123Z";
    writeV1([
      ["a", 1, "run.started", runStarted("l").data, at],
      ["a", 4, "decision.recorded", decision("d", 1).data, at], // 2 and 3 were compacted away
      ["a", 5, "decision.recorded", decision("e", 2).data, at],
      ["b", 1, "run.started", runStarted("m").data, at],
    ]);
    const store = sqliteStore(path);
    expect(await store.listRuns()).toEqual([
      { runId: "a", version: 5, lastType: "decision.recorded", entries: 3 },
      { runId: "b", version: 1, lastType: "run.started", entries: 1 },
    ]);
    await store.append("a", [decision("f", 3)], { expectedVersion: 5 });
    expect((await store.listRuns({ prefix: "a" }))[0]?.entries).toBe(4);
    await store.close();
  });

  it("is left untouched when a row cannot be migrated, with the run and seq named", async () => {
    writeV1([
      ["a", 1, "run.started", runStarted("l").data, "2026-11-30T10:00:00.000Z"],
      ["a", 2, "decision.recorded", decision("d", 1).data, "yesterday"],
    ]);
    expect(() => sqliteStore(path)).toThrow(/run a seq 2 \(meta\)/);
    const db = new Database(path, { readonly: true });
    expect(db.prepare("SELECT value FROM loom_meta WHERE key = 'schema_version'").pluck().get()).toBe("1");
    expect(db.prepare("SELECT count(*) FROM loom_entries").pluck().get()).toBe(2);
    db.close();
  });
});

describe("v1RowColumns: a version 1 row migrated to the v2 columns", () => {
  const meta = JSON.stringify({ v: 1, at: "2026-12-03T10:00:00.000Z" });

  it("refuses a type that is only a name on Object.prototype (constructor, toString) with JournalFormatError", () => {
    for (const type of ["constructor", "toString", "__proto__", "run.begun"]) {
      expect(() => v1RowColumns("r", 3, type, "{}", meta, "the file", "restore it")).toThrow(
        expect.objectContaining({ code: "journalFormat", seq: 3, field: "type" }),
      );
    }
  });

  it("refuses a meta Loom did not write, and keeps a good row's time and version", () => {
    expect(() => v1RowColumns("r", 1, "run.completed", "{}", '{"v":1}', "the file", "restore it")).toThrow(/meta/);
    expect(v1RowColumns("r", 1, "run.completed", '{"output":{}}', meta, "the file", "x")).toMatchObject({
      at: Date.parse("2026-12-03T10:00:00.000Z"),
      v: 1,
    });
  });
});
