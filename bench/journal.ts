/**
 * Journal throughput, in one run:
 * - appends to `sqliteStore` (single-entry and 20-entry appends of frame.completed entries with
 *   2 kB tool outputs) beside raw better-sqlite3 inserts of the same rows in the same
 *   transactions: same table and pragmas, `JSON.stringify` of the same data, a plain
 *   transaction with no version check (the storage floor);
 * - `readJournal` (store read + parse + validate) beside `JSON.parse` of the same stored text
 *   (each entry's data and meta, results discarded: the floor of any JSON read), and beside
 *   JSON.parse keeping its results (what any read that returns entries pays in GC).
 * Ours and the floor alternate step by step, so load from other processes hits both alike.
 * Targets: 20-entry appends at 0.8× or better of raw; read+validate at 0.5× or better of JSON.parse.
 *
 *   node --import tsx bench/journal.ts [appends|reads]   (both by default)
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { createJournal, readJournal } from "../src/events/journal.ts";
import { memoryStore } from "../src/events/memory.ts";
import { sqliteStore } from "../src/events/sqlite/sqlite.ts";
import { openSqliteFile, type SqliteOptions } from "../src/events/sqlite/sqliteFile.ts";
import { TYPE_CODES } from "../src/events/sqlite/sqliteRows.ts";
import type { EventStore } from "../src/events/store.ts";
import { type NewEntry, SCHEMA_VERSION } from "../src/events/types.ts";
import { printResult, printTable, rng, toolOutput } from "./support.ts";

const dir = mkdtempSync(join(tmpdir(), "loom-bench-journal-"));
const next = rng(42);
const outputs = Array.from({ length: 200 }, () => toolOutput(next, 2048));
const completed = (k: number): NewEntry => ({
  type: "frame.completed",
  data: { frameId: `bench#turn:${k}:tool:0`, output: outputs[k % outputs.length] },
});
/** A valid run for the read benchmark: each frame started, then completed with its 2 kB output. */
const pairAt = (k: number): NewEntry =>
  k % 2 === 1
    ? completed(k >> 1)
    : {
        type: "frame.started",
        data: { frameId: `bench#turn:${k >> 1}:tool:0`, effect: "tool:x", inputDigest: "0".repeat(64) },
      };

/** Times the functions step by step, rotating which goes first; returns total ms of each. */
async function paired(steps: number, ...fns: ((i: number) => unknown)[]): Promise<number[]> {
  const totals = fns.map(() => 0);
  for (let i = 0; i < steps; i++) {
    for (let j = 0; j < fns.length; j++) {
      const which = (i + j) % fns.length;
      const start = performance.now();
      await fns[which]!(i);
      totals[which]! += performance.now() - start;
    }
  }
  return totals;
}

async function appends(sync: NonNullable<SqliteOptions["synchronous"]>, batch: number, count: number, rounds = 3) {
  const entries = Array.from({ length: count }, (_, k) => completed(k));
  const bytes = entries.reduce((n, e) => n + Buffer.byteLength(JSON.stringify(e.data)), 0);
  let ours = 0;
  let raw = 0;
  for (let round = 0; round < rounds; round++) {
    const store = sqliteStore(join(dir, `ours-${sync}-${batch}-${round}.db`), { synchronous: sync });
    const db = openSqliteFile(join(dir, `raw-${sync}-${batch}-${round}.db`), { synchronous: sync }).db;
    // The raw baseline: the same rows, each entry's JSON text whole in `data`, no check, no layout.
    const insert = db.prepare("INSERT INTO loom_entries (run, seq, type, at, v, data) VALUES (1, ?, ?, ?, ?, ?)");
    const write = db.transaction((k: number) => {
      const at = Date.now();
      for (let i = k; i < k + batch; i++) {
        const e = entries[i]!;
        insert.run(i + 1, TYPE_CODES[e.type], at, SCHEMA_VERSION, JSON.stringify(e.data));
      }
    });
    const [o = 0, r = 0] = await paired(
      count / batch,
      (i) => store.append("run", entries.slice(i * batch, (i + 1) * batch), { expectedVersion: i * batch }),
      (i) => write(i * batch),
    );
    ours += o;
    raw += r;
    await store.close();
    db.close();
  }
  const perS = (ms: number) => ((rounds * count) / batch / ms) * 1000;
  const mbPerS = (ms: number) => ((rounds * bytes) / 1e6 / ms) * 1000;
  return {
    workload: `${batch === 1 ? "single-entry" : `${batch}-entry`} appends, synchronous=${sync}`,
    "appends/s": perS(ours),
    "MB/s": mbPerS(ours),
    "raw appends/s": perS(raw),
    "raw MB/s": mbPerS(raw),
    "ours / raw": raw / ours,
  };
}

async function reads(name: string, store: EventStore, count: number, texts: () => string[], ms = 3000) {
  const journal = createJournal({ store });
  let version = 0;
  for (let k = 0; k < count; k += 500) {
    const batch = Array.from({ length: Math.min(500, count - k) }, (_, i) => pairAt(k + i));
    ({ version } = await store.append("run", batch, { expectedVersion: version }));
  }
  const stored = texts();
  const bytes = stored.reduce((n, t) => n + Buffer.byteLength(t), 0);
  const read = async () => {
    if ((await readJournal(journal, "run")).length !== count) throw new Error("short read");
  };
  const parse = () => {
    for (const t of stored) JSON.parse(t);
  };
  // JSON.parse keeping what it parsed, as a read must: the GC cost of a large result shows here.
  const parseKept = () => stored.map((t) => JSON.parse(t));
  await paired(5, read, parse, parseKept); // warm-up
  let steps = 0;
  const totals = [0, 0, 0];
  while (totals[0]! + totals[1]! + totals[2]! < ms) {
    (await paired(4, read, parse, parseKept)).forEach((t, i) => {
      totals[i]! += t;
    });
    steps += 4;
  }
  const [ours = 0, floor = 0, kept = 0] = totals;
  await store.close();
  const mbPerS = (t: number) => ((steps * bytes) / 1e6 / t) * 1000;
  return {
    workload: `${count.toLocaleString("en-US")} entries (${(bytes / 1e6).toFixed(1)} MB), ${name}`,
    "read+validate MB/s": mbPerS(ours),
    "JSON.parse MB/s": mbPerS(floor),
    "ours / JSON.parse": floor / ours,
    "JSON.parse, kept MB/s": mbPerS(kept),
  };
}

const only = process.argv[2];
try {
  const appendRows =
    only === "reads"
      ? []
      : [
          await appends("full", 1, 300),
          await appends("full", 20, 6_000),
          await appends("normal", 1, 3_000),
          await appends("normal", 20, 20_000),
        ];
  if (appendRows.length > 0)
    printTable("sqliteStore appends, 2 kB outputs (target: 20-entry ours/raw ≥ 0.8)", appendRows);

  const readRows = [];
  for (const count of only === "appends" ? [] : [1_000, 10_000]) {
    const path = join(dir, `read-${count}.db`);
    const sqliteTexts = () => {
      const db = new Database(path, { readonly: true });
      const rows = db.prepare("SELECT data, meta FROM loom_journal ORDER BY seq").raw().all() as string[][];
      db.close();
      return rows.flat();
    };
    const memoryTexts = () => {
      const meta = JSON.stringify({ v: SCHEMA_VERSION, at: new Date().toISOString() });
      return Array.from({ length: count }, (_, k) => [JSON.stringify(pairAt(k).data), meta]).flat();
    };
    readRows.push(await reads("sqlite", sqliteStore(path), count, sqliteTexts));
    readRows.push(await reads("memory (json)", memoryStore({ json: true }), count, memoryTexts));
  }
  if (readRows.length > 0) printTable("readJournal: read + parse + validate (target: ours/JSON.parse ≥ 0.5)", readRows);
  const lowest = (rows: Record<string, string | number>[], key: string) =>
    rows.length > 0 ? Math.min(...rows.map((r) => Number(r[key]))) : null;
  const twentyEntry = lowest(
    appendRows.filter((r) => String(r.workload).startsWith("20-entry")),
    "ours / raw",
  );
  const reading = lowest(readRows, "ours / JSON.parse");
  printResult("journal", {
    targets: { twentyEntryVsRaw: "≥ 0.8", readVsJsonParse: "≥ 0.5" },
    twentyEntryVsRaw: twentyEntry,
    readVsJsonParse: reading,
    met: (twentyEntry === null || twentyEntry >= 0.8) && (reading === null || reading >= 0.5),
  });
} finally {
  rmSync(dir, { recursive: true, force: true });
}
