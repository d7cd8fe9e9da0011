/**
 * The loop's own cost: a 200-turn run with an instant model and instant tools, per turn, with a
 * journal that keeps nothing, the memory journal, the SQLite journal, and raw better-sqlite3
 * inserts of the very rows the SQLite run wrote, in the same transactions (the storage floor);
 * plus the time to resume a completed 200-turn run, and the appends (commits) a turn costs. A turn
 * is one model call: the 200 tool turns and the final answer, 201 in all, and the run's every
 * append (its start and end included) counts.
 * Targets (issue 15): at most 2 appends a turn; SQLite within 1.3× of the floor at synchronous=full
 * and within 2× at normal. Every row runs in turn, once each per repeat (each SQLite run followed
 * by the floor of the rows it wrote), in several rounds: a round keeps each row's best run, and the
 * table gives the median and range of the rounds' figures, ratios taken within a round. On a
 * shared machine the load drifts by minutes; rows measured one after the other (as this bench did
 * before) put that drift into their ratios.
 * The floor runs at the journal's own synchronous level (full, the default, and normal): the
 * same durability, or it would not be the same work. It writes the rows in the journal's own
 * layout (sqliteRows.ts: an integer run key, type codes, `at` and `v` as integers, a frame's id,
 * effect and digest in their columns, the rest of the data text), into a table of the same
 * shape and key, each row made from its entry's JSON text inside the timing as the store makes
 * it: rows of another layout (text keys and JSON meta, as it wrote before) are not the rows the
 * store writes, and their cost differs.
 * The floor makes each row's text with `JSON.stringify`, as a raw insert of the entries would, and
 * so does the store: a tool output is stored in its own member order (ADR 0142 D1), not as the
 * canonical text the loop writes for its digest (D2), so the run writes each output twice (the
 * canonical text in the loop's own work, row "none"; the stored text in the store) where the floor
 * writes it once.
 * What the ratio counts beside the store: the loop's own work (row "none"), which the floor does
 * not do, and at synchronous=full that work runs after each fsync has put the thread to sleep,
 * on cold caches (on a shared 2-core machine the same JS work took 1.3–1.7× its CPU time when
 * each piece followed an fsync or a sleep). The store alone, its appends replayed back to back,
 * costs what the floor costs within a few %.
 * At `normal` the store checkpoints its WAL on a worker thread (sqliteCheckpoint.ts), while the
 * floor's connection checkpoints inside the commit that takes the WAL past 1,000 pages, as
 * better-sqlite3 does by default: two more rows show what that part is, measured in the same
 * rounds: the store set to checkpoint inline (`checkpoints: "inline"`, as it did before), and the
 * floor given the store's worker; the run's ratio to that floor is printed too.
 * Where the rest goes is measured in the run itself (row "normal, split"): a `normal` run whose
 * appends are each timed (CPU), split into the store's appends and everything else (the loop's
 * own work), beside the store alone and the loop alone: how much more each part costs when the two
 * run interleaved than when each runs apart. CPU time is the process's, every thread: the
 * collector's helpers and, at `normal`, the checkpoint worker count in whichever part they run
 * beside (the worker's copies mostly in the rest, as they run while the loop works).
 *
 * It ends with one line `RESULT {json}` of the same figures (medians; µs a turn; ratios of wall
 * times unless named CPU). Issue 33's codec target: the loop with gzip within 1.3× of the CPU time
 * of the same journal without it (`gzip.cpuVsNormal`; the codec rows alternate with that row).
 *
 *   node --import tsx bench/loop.ts
 *   LOOP_ROUNDS=9 LOOP_REPEATS=3 node --import tsx bench/loop.ts
 */

import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { payloadCodec, staticKeys } from "../src/events/codec/codec.ts";
import { withCodec } from "../src/events/codec/codecStore.ts";
import { createJournal, openSqliteJournal } from "../src/events/journal.ts";
import { memoryStore } from "../src/events/memory.ts";
import { walCheckpointer, walPages } from "../src/events/sqlite/sqliteCheckpoint.ts";
import { encodeRow } from "../src/events/sqlite/sqliteRows.ts";
import type { EventStore } from "../src/events/store.ts";
import { type NewEntry, SCHEMA_VERSION } from "../src/events/types.ts";
import { scriptedModel } from "../src/models/scripted.ts";
import type { Tool } from "../src/runtime/base/config.ts";
import { agentLoop$ } from "../src/runtime/run/agentLoop.ts";
import { printTable, rng, toolOutput } from "./support.ts";

const TURNS = 200;
/** Model calls in the run: one a tool turn, and the answer. */
const MODEL_CALLS = TURNS + 1;
/** Rounds of the whole set of rows (median and range over them); `LOOP_ROUNDS` overrides. */
const ROUNDS = Number(process.env.LOOP_ROUNDS ?? 5);
/** Runs of each row per round (the round keeps each row's best); `LOOP_REPEATS` overrides. */
const REPEATS = Number(process.env.LOOP_REPEATS ?? 5);
const next = rng(7);
const outputs = Array.from({ length: TURNS }, () => toolOutput(next, 1500 + Math.floor(next() * 2500)));
const lookup: Tool = { description: "looks things up", execute: (input) => outputs[(input as { n: number }).n] };
const model = scriptedModel(({ turn }) =>
  turn < TURNS
    ? { toolCalls: [{ id: `c${turn}`, name: "lookup", input: { n: turn } }] }
    : { content: "done", toolCalls: [] },
);
const loop = agentLoop$({ id: "bench", model, tools: { lookup }, maxIterations: TURNS + 1 });

/** A store that keeps nothing: the loop's cost alone. */
function nullStore(): EventStore {
  const versions = new Map<string, number>();
  const owners = memoryStore(); // ownership only: its appends are not fenced here
  return {
    acquire: owners.acquire,
    renew: owners.renew,
    release: owners.release,
    requestCancel: owners.requestCancel,
    async append(runId, entries) {
      const v = (versions.get(runId) ?? 0) + entries.length;
      versions.set(runId, v);
      return { version: v };
    },
    async read() {
      return [];
    },
    async listRuns() {
      return [];
    },
    async compact(_, request) {
      return { version: request.expectedVersion + 1 };
    },
    async close() {},
  };
}

/** Wraps a store to keep every batch appended, to replay them as raw inserts. */
function recording(inner: EventStore, batches: Batch[]): EventStore {
  return {
    ...inner,
    async append(runId, entries, options) {
      batches.push({ runId, from: options.expectedVersion + 1, entries, durability: options.durability });
      return inner.append(runId, entries, options);
    },
  };
}

/**
 * Wraps a store to sum the CPU time spent inside its appends (each runs synchronously in a SQLite
 * store, so the time between the call and its return is the store's).
 */
function timedAppends(inner: EventStore, spent: { cpu: number }): EventStore {
  return {
    ...inner,
    append(runId, entries, options) {
      const c = cpuNow();
      const done = inner.append(runId, entries, options);
      spent.cpu += cpuNow() - c;
      return done;
    },
  };
}

/** CPU time of the process so far (user and system, every thread), in ms. */
const cpuNow = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
};

/** Wall and CPU time (ms) of one measured piece of work. */
type Took = { wall: number; cpu: number };

/** Times one loop run on `journal` (wall and CPU). */
async function timeRun(runId: string, journal: Parameters<typeof loop.run>[0]["journal"]): Promise<Took> {
  const t = performance.now();
  const c = cpuNow();
  await loop.run({ runId, input: "go", journal });
  return { wall: performance.now() - t, cpu: cpuNow() - c };
}

const dir = mkdtempSync(join(tmpdir(), "loom-bench-loop-"));
type Batch = { runId: string; from: number; entries: readonly NewEntry[]; durability?: "written" | undefined };

/**
 * The storage floor: the same rows, the same transactions, straight into better-sqlite3, which
 * checkpoints its WAL inside the commit that takes it past 1,000 pages (SQLite's default); with
 * `background`, on the worker thread the store uses at `normal` (sqliteCheckpoint.ts), told of
 * each commit's pages as the store tells it.
 */
async function rawInserts(
  file: string,
  synchronous: "full" | "normal",
  batches: readonly Batch[],
  background = false,
): Promise<Took> {
  const db = new Database(file);
  db.pragma("journal_mode = WAL");
  db.pragma(`synchronous = ${synchronous.toUpperCase()}`);
  const checkpoints = background ? walCheckpointer(db, synchronous) : undefined;
  db.exec(
    "CREATE TABLE entries (run INTEGER NOT NULL, seq INTEGER NOT NULL, type INTEGER NOT NULL, at INTEGER NOT NULL, v INTEGER NOT NULL, frame TEXT, effect TEXT, digest BLOB, data TEXT, UNIQUE (run, seq))",
  );
  const insert = db.prepare(
    "INSERT INTO entries (run, seq, type, at, v, frame, effect, digest, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
  );
  const write = db.transaction((b: Batch) => {
    const at = Date.now();
    const texts = b.entries.map((e) => JSON.stringify(e.data));
    b.entries.forEach((e, k) => {
      const c = encodeRow(e.type, texts[k] as string, at, SCHEMA_VERSION);
      insert.run(1, b.from + k, c.type, c.at, c.v, c.frame, c.effect, c.digest, c.data);
    });
    return walPages(texts);
  });
  const t = performance.now();
  const c = cpuNow();
  if (checkpoints === undefined) for (const b of batches) write(b);
  else for (const b of batches) checkpoints.wrote(write(b));
  const took = { wall: performance.now() - t, cpu: cpuNow() - c };
  await checkpoints?.close();
  db.close();
  return took;
}

/**
 * The store alone: the appends of the last `normal` run replayed back to back through a fresh
 * SQLite store at the same level, fenced as the run's were (its own lease), the same entries in
 * the same batches. Beside the floor it says how much of the run's ratio is the store's; the rest
 * is the loop's own work (row "none") and what that work costs beside SQLite's.
 */
async function storeReplay(file: string, batches: readonly Batch[]): Promise<Took> {
  const j = openSqliteJournal(file, { synchronous: "normal" });
  const runId = batches[0]?.runId ?? "replay";
  const { token } = await j.store.acquire(runId, { owner: "bench", leaseMs: 3_600_000 });
  const t = performance.now();
  const c = cpuNow();
  for (const b of batches) {
    const options = {
      expectedVersion: b.from - 1,
      fence: token,
      ...(b.durability ? { durability: b.durability } : {}),
    };
    await j.store.append(runId, b.entries, options);
  }
  const took = { wall: performance.now() - t, cpu: cpuNow() - c };
  await j.close();
  return took;
}

/** The rows, measured in this order once each per repeat of a round. */
const ROWS = [
  "none",
  "memory",
  "full",
  "fullFloor",
  "normal",
  "normalFloor",
  "normalInline",
  "normalFloorBackground",
  "normalStore",
  "normalSplit",
  "gzip",
  "gzipAes",
] as const;
type Row = (typeof ROWS)[number];
/** The two parts of the split run's CPU (row normalSplit): inside the store's appends, and the rest. */
type Part = "splitAppends" | "splitRest";
/** The split of the last normalSplit run (CPU ms). */
let lastSplit = { appends: 0, rest: 0 };

const keys = staticKeys({ current: "k1", keys: { k1: randomBytes(32) } });
const gzipCodec = payloadCodec({ compress: "gzip" });
const gzipAesCodec = payloadCodec({ compress: "gzip", encrypt: { keys } });
let files = 0;
const file = (name: string) => join(dir, `${name}-${files++}.db`);
/** The batches of the last SQLite run at each level: its floor inserts the same rows. */
const lastBatches: Record<"full" | "normal", Batch[]> = { full: [], normal: [] };
let lastFullDb = "";
let lastFullRunId = "";
let appends = 0;
let entries = 0;

/** One run of `row` (a loop run, or the floor of the rows the SQLite run before it wrote). */
async function measure(row: Row, runId: string): Promise<Took> {
  switch (row) {
    case "none":
      return timeRun(runId, createJournal({ store: nullStore() }));
    case "memory":
      return timeRun(runId, createJournal({ store: memoryStore() }));
    case "full":
    case "normal": {
      const batches: Batch[] = [];
      const path = file(row);
      const j = openSqliteJournal(path, { synchronous: row });
      const took = await timeRun(runId, { ...j, store: recording(j.store, batches) });
      await j.close();
      lastBatches[row] = batches;
      if (row === "full") {
        lastFullDb = path;
        lastFullRunId = runId;
        appends = batches.length;
        entries = batches.reduce((n, b) => n + b.entries.length, 0);
      }
      return took;
    }
    case "fullFloor":
      return rawInserts(file("raw-full"), "full", lastBatches.full);
    case "normalFloor":
      return rawInserts(file("raw-normal"), "normal", lastBatches.normal);
    case "normalInline": {
      const j = openSqliteJournal(file(row), { synchronous: "normal", checkpoints: "inline" });
      const took = await timeRun(runId, j);
      await j.close();
      return took;
    }
    case "normalFloorBackground":
      return rawInserts(file("raw-normal-bg"), "normal", lastBatches.normal, true);
    case "normalStore":
      return storeReplay(file("replay-normal"), lastBatches.normal);
    case "normalSplit": {
      const j = openSqliteJournal(file(row), { synchronous: "normal" });
      const spent = { cpu: 0 };
      const took = await timeRun(runId, { ...j, store: timedAppends(j.store, spent) });
      await j.close();
      lastSplit = { appends: spent.cpu, rest: took.cpu - spent.cpu };
      return took;
    }
    case "gzip":
    case "gzipAes": {
      const j = openSqliteJournal(file(row), { synchronous: "normal" });
      const took = await timeRun(runId, withCodec(j, row === "gzip" ? gzipCodec : gzipAesCodec));
      await j.close();
      return took;
    }
  }
}

/**
 * One round: every row once per repeat, in turn (a run, then the floor of the rows it wrote,
 * then the next row), so each row and its floor, and the codec rows and the same journal without
 * the codec, see the same drift of a shared machine; each row keeps its best run of the round.
 */
async function round(r: number): Promise<Record<Row | Part, Took>> {
  const best = {} as Record<Row | Part, Took>;
  for (const row of [...ROWS, "splitAppends", "splitRest"] as const)
    best[row] = { wall: Number.POSITIVE_INFINITY, cpu: Number.POSITIVE_INFINITY };
  for (let i = 0; i < REPEATS; i++) {
    for (const row of ROWS) {
      const took = await measure(row, `run-${r}-${i}`);
      best[row].wall = Math.min(best[row].wall, took.wall);
      best[row].cpu = Math.min(best[row].cpu, took.cpu);
      if (row === "normalSplit") {
        best.splitAppends.cpu = Math.min(best.splitAppends.cpu, lastSplit.appends);
        best.splitRest.cpu = Math.min(best.splitRest.cpu, lastSplit.rest);
      }
    }
  }
  return best;
}

/** Median and range of some figures. */
function spread(values: readonly number[]): { median: number; min: number; max: number } {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  const median =
    sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
  return { median, min: sorted[0] as number, max: sorted[sorted.length - 1] as number };
}

const fmt = (n: number) => (n >= 100 ? n.toFixed(0) : n.toFixed(2));
const cell = (s: { median: number; min: number; max: number }) => `${fmt(s.median)} (${fmt(s.min)}–${fmt(s.max)})`;

try {
  // Warm-up: JIT and caches, as in a process that has run a few runs already (an embedding server),
  // every row's code included (one round, not counted).
  await round(-1);
  const rounds: Record<Row | Part, Took>[] = [];
  for (let r = 0; r < ROUNDS; r++) rounds.push(await round(r));

  // Resume of a completed run: read, validate, fold, and return the recorded output.
  let resume = Number.POSITIVE_INFINITY;
  for (let i = 0; i < REPEATS; i++) {
    const j = openSqliteJournal(lastFullDb);
    const t = performance.now();
    await loop.run({ runId: lastFullRunId, journal: j });
    resume = Math.min(resume, performance.now() - t);
    await j.close();
  }

  const perTurn = (ms: number) => (ms / TURNS) * 1000;
  const of = (f: (r: Record<Row | Part, Took>) => number) => spread(rounds.map(f));
  const wallUs = (row: Row) => of((r) => perTurn(r[row].wall));
  const cpuUs = (row: Row | Part) => of((r) => perTurn(r[row].cpu));
  const ratio = (row: Row | Part, floor: Row, what: "wall" | "cpu") => of((r) => r[row][what] / r[floor][what]);
  const line = (journal: string, row: Row, floor?: Row, base?: Row) => ({
    journal,
    "µs/turn": cell(wallUs(row)),
    "× raw inserts": floor === undefined ? "" : cell(ratio(row, floor, "wall")),
    "CPU µs/turn": cell(cpuUs(row)),
    "CPU × raw inserts": floor === undefined ? "" : cell(ratio(row, floor, "cpu")),
    "CPU × no codec": base === undefined ? "" : cell(ratio(row, base, "cpu")),
    "wall × no codec": base === undefined ? "" : cell(ratio(row, base, "wall")),
  });
  const raw = "  raw inserts, same rows and transactions";
  printTable(
    `Loop cost, ${TURNS} turns, one 1.5–4 kB tool output a turn: median (range) of ${ROUNDS} rounds, each row the best of ${REPEATS} runs a round, the rows run in turn (µs per turn, wall and CPU time)`,
    [
      line("none (the loop alone)", "none"),
      line("memory", "memory"),
      line("sqlite, synchronous=full (default)", "full", "fullFloor"),
      line(raw, "fullFloor", "fullFloor"),
      line("sqlite, synchronous=normal", "normal", "normalFloor"),
      line(raw, "normalFloor", "normalFloor"),
      line("  the store checkpointing inline (as SQLite does by default)", "normalInline", "normalFloor"),
      line("  raw inserts checkpointed on a worker, as the store does", "normalFloorBackground", "normalFloor"),
      line("sqlite, normal × raw inserts checkpointed on a worker", "normal", "normalFloorBackground"),
      line("  the store alone (the run's appends replayed)", "normalStore", "normalFloor"),
      line("sqlite, normal, codec gzip", "gzip", "normalFloor", "normal"),
      line("sqlite, normal, codec gzip + aes-256-gcm", "gzipAes", "normalFloor", "normal"),
    ],
  );
  printTable(
    `Where the normal run's CPU goes: a run whose appends are each timed, split into the store's appends and the rest (the loop's own work), each beside the same work done apart (µs per turn, CPU; median (range) of ${ROUNDS} rounds)`,
    [
      {
        part: "the store's appends, in the run",
        "CPU µs/turn": cell(cpuUs("splitAppends")),
        apart: `${cell(cpuUs("normalStore"))} (the store alone)`,
        "× apart": cell(ratio("splitAppends", "normalStore", "cpu")),
        "CPU × raw inserts": cell(ratio("splitAppends", "normalFloor", "cpu")),
      },
      {
        part: "the rest (the loop's own work), in the run",
        "CPU µs/turn": cell(cpuUs("splitRest")),
        apart: `${cell(cpuUs("none"))} (the loop alone)`,
        "× apart": cell(ratio("splitRest", "none", "cpu")),
        "CPU × raw inserts": cell(ratio("splitRest", "normalFloor", "cpu")),
      },
      {
        part: "the split run, whole",
        "CPU µs/turn": cell(cpuUs("normalSplit")),
        apart: "",
        "× apart": "",
        "CPU × raw inserts": cell(ratio("normalSplit", "normalFloor", "cpu")),
      },
    ],
  );
  printTable(
    `Resume of a completed ${TURNS}-turn run (sqlite): read, validate, fold, return the recorded output; appends of the whole run per turn, a turn being a model call (${MODEL_CALLS})`,
    [
      {
        "resume ms": resume,
        "appends in the run": appends,
        "appends per turn (model call)": appends / MODEL_CALLS,
        "entries per append": entries / appends,
      },
    ],
  );
  const us = (row: Row) => ({ wallUs: wallUs(row).median, cpuUs: cpuUs(row).median });
  const withFloor = (row: Row, floor: Row) => ({
    ...us(row),
    floor: us(floor),
    ratio: ratio(row, floor, "wall").median,
    ratioRange: [ratio(row, floor, "wall").min, ratio(row, floor, "wall").max],
  });
  const gzipCpu = ratio("gzip", "normal", "cpu");
  console.log(
    `RESULT ${JSON.stringify({
      bench: "loop",
      turns: TURNS,
      rounds: ROUNDS,
      repeats: REPEATS,
      none: us("none"),
      memory: us("memory"),
      full: withFloor("full", "fullFloor"),
      normal: withFloor("normal", "normalFloor"),
      normalInline: withFloor("normalInline", "normalFloor"),
      normalVsFloorBackground: withFloor("normal", "normalFloorBackground"),
      normalStore: {
        ...withFloor("normalStore", "normalFloor"),
        cpuRatio: ratio("normalStore", "normalFloor", "cpu").median,
      },
      normalCpuRatio: ratio("normal", "normalFloor", "cpu").median,
      normalSplit: {
        cpuUs: cpuUs("normalSplit").median,
        appendsCpuUs: cpuUs("splitAppends").median,
        restCpuUs: cpuUs("splitRest").median,
        appendsVsStoreAlone: ratio("splitAppends", "normalStore", "cpu").median,
        restVsLoopAlone: ratio("splitRest", "none", "cpu").median,
      },
      gzip: {
        ...us("gzip"),
        ratio: ratio("gzip", "normalFloor", "wall").median,
        vsNormal: ratio("gzip", "normal", "wall").median,
        cpuVsNormal: gzipCpu.median,
        cpuVsNormalRange: [gzipCpu.min, gzipCpu.max],
      },
      gzipAes: {
        ...us("gzipAes"),
        ratio: ratio("gzipAes", "normalFloor", "wall").median,
        cpuVsNormal: ratio("gzipAes", "normal", "cpu").median,
      },
      resumeMs: resume,
      appendsPerTurn: appends / MODEL_CALLS,
    })}`,
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
