/**
 * The loop's own cost: a 200-turn run with an instant model and instant tools, per turn, with a
 * journal that keeps nothing, the memory journal, the SQLite journal, and raw better-sqlite3
 * inserts of the very rows the SQLite run wrote, in the same transactions (the storage floor);
 * plus the time to resume a completed 200-turn run, and the appends (commits) a turn costs. A turn
 * is one model call: the 200 tool turns and the final answer, 201 in all, and the run's every
 * append (its start and end included) counts.
 * Targets (issue 15): at most 2 appends a turn; SQLite within 1.3× of the floor at synchronous=full
 * and within 2× at normal.
 * The floor runs at the journal's own synchronous level (full, the default, and normal): the
 * same durability, or it would not be the same work.
 *
 *   node --import tsx bench/loop.ts
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { createJournal, openSqliteJournal } from "../src/events/journal.ts";
import { memoryStore } from "../src/events/memory.ts";
import type { EventStore } from "../src/events/store.ts";
import { type NewEntry, SCHEMA_VERSION } from "../src/events/types.ts";
import { scriptedModel } from "../src/models/scripted.ts";
import { agentLoop$ } from "../src/runtime/agentLoop.ts";
import type { Tool } from "../src/runtime/config.ts";
import { printTable, rng, toolOutput } from "./support.ts";

const TURNS = 200;
/** Model calls in the run: one a tool turn, and the answer. */
const MODEL_CALLS = TURNS + 1;
const REPEATS = 5;
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

async function timeRuns(
  make: (i: number) => { journal: Parameters<typeof loop.run>[0]["journal"]; done?: () => Promise<void> },
) {
  let best = Number.POSITIVE_INFINITY;
  for (let i = 0; i < REPEATS; i++) {
    const { journal, done } = make(i);
    const t = performance.now();
    await loop.run({ runId: `run-${i}`, input: "go", journal });
    best = Math.min(best, performance.now() - t);
    await done?.();
  }
  return best;
}

const dir = mkdtempSync(join(tmpdir(), "loom-bench-loop-"));
type Batch = { runId: string; from: number; entries: readonly NewEntry[] };

/** The SQLite journal at one synchronous level, and the raw inserts of its rows at the same level. */
async function sqliteAndFloor(synchronous: "full" | "normal") {
  const batches: Batch[] = [];
  let lastDb = "";
  const ours = await timeRuns((i) => {
    batches.length = 0;
    lastDb = join(dir, `loop-${synchronous}-${i}.db`);
    const j = openSqliteJournal(lastDb, { synchronous });
    return { journal: { ...j, store: recording(j.store, batches) }, done: () => j.close() };
  });
  // The storage floor: the same rows, the same transactions, straight into better-sqlite3.
  let floor = Number.POSITIVE_INFINITY;
  for (let i = 0; i < REPEATS; i++) {
    const db = new Database(join(dir, `raw-${synchronous}-${i}.db`));
    db.pragma("journal_mode = WAL");
    db.pragma(`synchronous = ${synchronous.toUpperCase()}`);
    db.exec(
      "CREATE TABLE entries (run_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL, meta TEXT NOT NULL, UNIQUE (run_id, seq))",
    );
    const insert = db.prepare("INSERT INTO entries (run_id, seq, type, data, meta) VALUES (?, ?, ?, ?, ?)");
    const write = db.transaction((b: Batch) => {
      const meta = JSON.stringify({ v: SCHEMA_VERSION, at: new Date().toISOString() });
      b.entries.forEach((e, k) => {
        insert.run(b.runId, b.from + k, e.type, JSON.stringify(e.data), meta);
      });
    });
    const t = performance.now();
    for (const b of batches) write(b);
    floor = Math.min(floor, performance.now() - t);
    db.close();
  }
  const entries = batches.reduce((n, b) => n + b.entries.length, 0);
  return { ours, floor, lastDb, appends: batches.length, entries };
}

try {
  await timeRuns(() => ({ journal: createJournal({ store: memoryStore() }) })); // warm-up: JIT, caches
  const none = await timeRuns(() => ({ journal: createJournal({ store: nullStore() }) }));
  const memory = await timeRuns(() => ({ journal: createJournal({ store: memoryStore() }) }));
  const full = await sqliteAndFloor("full");
  const normal = await sqliteAndFloor("normal");

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
  printTable(`Loop cost, ${TURNS} turns, one 1.5–4 kB tool output a turn (best of ${REPEATS}; µs per turn)`, [
    { journal: "none (the loop alone)", "µs/turn": perTurn(none), "× its floor": "" },
    { journal: "memory", "µs/turn": perTurn(memory), "× its floor": "" },
    {
      journal: "sqlite, synchronous=full (default)",
      "µs/turn": perTurn(full.ours),
      "× its floor": full.ours / full.floor,
    },
    { journal: "  raw inserts, same rows and transactions", "µs/turn": perTurn(full.floor), "× its floor": 1 },
    {
      journal: "sqlite, synchronous=normal",
      "µs/turn": perTurn(normal.ours),
      "× its floor": normal.ours / normal.floor,
    },
    { journal: "  raw inserts, same rows and transactions", "µs/turn": perTurn(normal.floor), "× its floor": 1 },
  ]);
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
} finally {
  rmSync(dir, { recursive: true, force: true });
}
