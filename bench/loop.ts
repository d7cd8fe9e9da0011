/**
 * The loop's own cost: a 200-turn run with an instant model and instant tools, per turn, with a
 * journal that keeps nothing, the memory journal, the SQLite journal, and raw better-sqlite3
 * inserts of the very rows the SQLite run wrote, in the same transactions (the storage floor);
 * plus the time to resume a completed 200-turn run, and the appends (commits) a turn costs. A turn
 * is one model call: the 200 tool turns and the final answer, 201 in all, and the run's every
 * append (its start and end included) counts.
 * Targets (issue 15): at most 2 appends a turn; SQLite within 1.3× of the floor at synchronous=full
 * and within 2× at normal. Each SQLite run alternates with the floor of the rows it wrote.
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
 *
 * It ends with one line `RESULT {json}` of the same figures (µs a turn; ratios of wall times).
 * Issue 33's codec target: the loop with gzip within 1.3× of the same journal without it
 * (`gzip.vsNormal`).
 *
 *   node --import tsx bench/loop.ts
 */

import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { type PayloadCodecOptions, payloadCodec, staticKeys } from "../src/events/codec.ts";
import { withCodec } from "../src/events/codecStore.ts";
import { createJournal, openSqliteJournal } from "../src/events/journal.ts";
import { memoryStore } from "../src/events/memory.ts";
import { encodeRow } from "../src/events/sqliteRows.ts";
import type { EventStore } from "../src/events/store.ts";
import { type NewEntry, SCHEMA_VERSION } from "../src/events/types.ts";
import { scriptedModel } from "../src/models/scripted.ts";
import { agentLoop$ } from "../src/runtime/agentLoop.ts";
import type { Tool } from "../src/runtime/config.ts";
import { printTable, rng, toolOutput } from "./support.ts";

const TURNS = 200;
/** Model calls in the run: one a tool turn, and the answer. */
const MODEL_CALLS = TURNS + 1;
/** Runs measured per row (best of them); `LOOP_REPEATS` overrides. */
const REPEATS = Number(process.env.LOOP_REPEATS ?? 10);
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
function recording(
  inner: EventStore,
  batches: { runId: string; from: number; entries: readonly NewEntry[] }[],
): EventStore {
  return {
    ...inner,
    async append(runId, entries, options) {
      batches.push({ runId, from: options.expectedVersion + 1, entries });
      return inner.append(runId, entries, options);
    },
  };
}

/** CPU time of the process so far (user and system, every thread), in ms. */
const cpuNow = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
};

/** Best wall time and best CPU time (ms) of a few runs, each measured by `time`. */
async function bestOf(time: (i: number) => Promise<{ wall: number; cpu: number }>) {
  const best = { wall: Number.POSITIVE_INFINITY, cpu: Number.POSITIVE_INFINITY };
  for (let i = 0; i < REPEATS; i++) {
    const { wall, cpu } = await time(i);
    best.wall = Math.min(best.wall, wall);
    best.cpu = Math.min(best.cpu, cpu);
  }
  return best;
}

function timeRuns(
  make: (i: number) => { journal: Parameters<typeof loop.run>[0]["journal"]; done?: () => Promise<void> },
) {
  return bestOf(async (i) => {
    const { journal, done } = make(i);
    const t = performance.now();
    const c = cpuNow();
    await loop.run({ runId: `run-${i}`, input: "go", journal });
    const took = { wall: performance.now() - t, cpu: cpuNow() - c };
    await done?.();
    return took;
  });
}

const dir = mkdtempSync(join(tmpdir(), "loom-bench-loop-"));
type Batch = { runId: string; from: number; entries: readonly NewEntry[] };

/**
 * The SQLite journal at one synchronous level, and the raw inserts of its rows at the same level,
 * alternated (a run, then the floor of the rows that run wrote, and again): the disk's latency
 * drifts by minutes on a shared machine, and both sides of the ratio must see the same drift.
 */
async function sqliteAndFloor(synchronous: "full" | "normal") {
  const best = { wall: Number.POSITIVE_INFINITY, cpu: Number.POSITIVE_INFINITY };
  const floorBest = { wall: Number.POSITIVE_INFINITY, cpu: Number.POSITIVE_INFINITY };
  let lastDb = "";
  let appends = 0;
  let entries = 0;
  for (let i = 0; i < REPEATS; i++) {
    const batches: Batch[] = [];
    lastDb = join(dir, `loop-${synchronous}-${i}.db`);
    const j = openSqliteJournal(lastDb, { synchronous });
    const t = performance.now();
    const c = cpuNow();
    await loop.run({ runId: `run-${i}`, input: "go", journal: { ...j, store: recording(j.store, batches) } });
    best.wall = Math.min(best.wall, performance.now() - t);
    best.cpu = Math.min(best.cpu, cpuNow() - c);
    await j.close();
    const floor = rawInserts(join(dir, `raw-${synchronous}-${i}.db`), synchronous, batches);
    floorBest.wall = Math.min(floorBest.wall, floor.wall);
    floorBest.cpu = Math.min(floorBest.cpu, floor.cpu);
    appends = batches.length;
    entries = batches.reduce((n, b) => n + b.entries.length, 0);
  }
  return { ours: best, floor: floorBest, lastDb, appends, entries };
}

/** The storage floor: the same rows, the same transactions, straight into better-sqlite3. */
function rawInserts(file: string, synchronous: "full" | "normal", batches: readonly Batch[]) {
  const db = new Database(file);
  db.pragma("journal_mode = WAL");
  db.pragma(`synchronous = ${synchronous.toUpperCase()}`);
  db.exec(
    "CREATE TABLE entries (run INTEGER NOT NULL, seq INTEGER NOT NULL, type INTEGER NOT NULL, at INTEGER NOT NULL, v INTEGER NOT NULL, frame TEXT, effect TEXT, digest BLOB, data TEXT, UNIQUE (run, seq))",
  );
  const insert = db.prepare(
    "INSERT INTO entries (run, seq, type, at, v, frame, effect, digest, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
  );
  const write = db.transaction((b: Batch) => {
    const at = Date.now();
    b.entries.forEach((e, k) => {
      const c = encodeRow(e.type, JSON.stringify(e.data), at, SCHEMA_VERSION);
      insert.run(1, b.from + k, c.type, c.at, c.v, c.frame, c.effect, c.digest, c.data);
    });
  });
  const t = performance.now();
  const c = cpuNow();
  for (const b of batches) write(b);
  const took = { wall: performance.now() - t, cpu: cpuNow() - c };
  db.close();
  return took;
}

try {
  // Warm-up: JIT and caches, as in a process that has run a few runs already (an embedding server).
  // The SQLite path too (its store code), on a scratch file.
  for (let i = 0; i < 3; i++) await timeRuns(() => ({ journal: createJournal({ store: memoryStore() }) }));
  await timeRuns((i) => {
    const j = openSqliteJournal(join(dir, `warm-${i}.db`), { synchronous: "normal" });
    return { journal: j, done: () => j.close() };
  });
  const none = await timeRuns(() => ({ journal: createJournal({ store: nullStore() }) }));
  const memory = await timeRuns(() => ({ journal: createJournal({ store: memoryStore() }) }));
  const full = await sqliteAndFloor("full");
  const normal = await sqliteAndFloor("normal");
  // The payload codec (issue 33) on the SQLite journal at synchronous=normal (opt-in; off above).
  const keys = staticKeys({ current: "k1", keys: { k1: randomBytes(32) } });
  const coded = async (options: PayloadCodecOptions) =>
    timeRuns((i) => {
      const j = openSqliteJournal(join(dir, `codec-${Object.keys(options).join("-")}-${i}.db`), {
        synchronous: "normal",
      });
      return { journal: withCodec(j, payloadCodec(options)), done: () => j.close() };
    });
  const gzip = await coded({ compress: "gzip" });
  const gzipAes = await coded({ compress: "gzip", encrypt: { keys } });

  // Resume of a completed run: read, validate, fold, and return the recorded output.
  let resume = Number.POSITIVE_INFINITY;
  for (let i = 0; i < REPEATS; i++) {
    const j = openSqliteJournal(full.lastDb);
    const t = performance.now();
    await loop.run({ runId: `run-${REPEATS - 1}`, journal: j });
    resume = Math.min(resume, performance.now() - t);
    await j.close();
  }

  const perTurn = (ms: number) => (ms / TURNS) * 1000;
  const row = (journal: string, t: { wall: number; cpu: number }, floor?: { wall: number; cpu: number }) => ({
    journal,
    "µs/turn": perTurn(t.wall),
    "× its floor": floor === undefined ? "" : t.wall / floor.wall,
    "CPU µs/turn": perTurn(t.cpu),
    "CPU × floor": floor === undefined ? "" : t.cpu / floor.cpu,
  });
  const raw = "  raw inserts, same rows and transactions";
  printTable(
    `Loop cost, ${TURNS} turns, one 1.5–4 kB tool output a turn (best of ${REPEATS}; µs per turn, wall and CPU time)`,
    [
      row("none (the loop alone)", none),
      row("memory", memory),
      row("sqlite, synchronous=full (default)", full.ours, full.floor),
      row(raw, full.floor, full.floor),
      row("sqlite, synchronous=normal", normal.ours, normal.floor),
      row(raw, normal.floor, normal.floor),
      row("sqlite, normal, codec gzip", gzip, normal.floor),
      row("sqlite, normal, codec gzip + aes-256-gcm", gzipAes, normal.floor),
    ],
  );
  printTable(
    `Resume of a completed ${TURNS}-turn run (sqlite): read, validate, fold, return the recorded output; appends of the whole run per turn, a turn being a model call (${MODEL_CALLS})`,
    [
      {
        "resume ms": resume,
        "appends in the run": full.appends,
        "appends per turn (model call)": full.appends / MODEL_CALLS,
        "entries per append": full.entries / full.appends,
      },
    ],
  );
  const us = (t: { wall: number; cpu: number }) => ({ wallUs: perTurn(t.wall), cpuUs: perTurn(t.cpu) });
  console.log(
    `RESULT ${JSON.stringify({
      bench: "loop",
      turns: TURNS,
      repeats: REPEATS,
      none: us(none),
      memory: us(memory),
      full: { ...us(full.ours), floor: us(full.floor), ratio: full.ours.wall / full.floor.wall },
      normal: { ...us(normal.ours), floor: us(normal.floor), ratio: normal.ours.wall / normal.floor.wall },
      gzip: { ...us(gzip), ratio: gzip.wall / normal.floor.wall, vsNormal: gzip.wall / normal.ours.wall },
      gzipAes: { ...us(gzipAes), ratio: gzipAes.wall / normal.floor.wall },
      resumeMs: resume,
      appendsPerTurn: full.appends / MODEL_CALLS,
    })}`,
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
