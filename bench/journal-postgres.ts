/**
 * The journal on PostgreSQL, in one run (needs a server: LOOM_PG_URL, e.g. from
 * `bash scripts/pg-test-cluster.sh start`):
 * - appends through `postgresStore` (single-entry and 20-entry appends of frame.completed entries
 *   with 2 kB tool outputs) beside raw inserts of the same rows (one unchecked INSERT statement
 *   per append: the floor of a round trip and a commit);
 * - a 200-turn run (one 2 kB tool call per turn) run live, then `loop.run` on the completed run
 *   (a resume) and `readJournal` + `foldEntries`, on PostgreSQL beside the SQLite journal;
 * - runs completed per second by 1, 2 and 4 worker processes (`startWorker`, this file run with
 *   `--worker`), each run 3 model turns and 3 tool calls with no latency: the coordination cost.
 * Figures are medians of 5 rounds where a round is short.
 *
 *   LOOM_PG_URL=postgres://… node --import tsx bench/journal-postgres.ts
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { createJournal, type OpenJournal, openSqliteJournal, readJournal } from "../src/events/journal.ts";
import type { NewEntry } from "../src/events/types.ts";
import { scriptedModel } from "../src/models/scripted.ts";
import { openPostgresJournal, postgresStore, startWorker, submitRun } from "../src/postgres.ts";
import { foldEntries } from "../src/projections/runState.ts";
import { agentLoop$ } from "../src/runtime/run/agentLoop.ts";
import { printResult, printTable, rng, serveUntilTerm, toolOutput } from "./support.ts";

const url = process.env.LOOM_PG_URL;
const next = rng(42);
const outputs = Array.from({ length: 200 }, () => toolOutput(next, 2048));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
const time = async (fn: () => Promise<unknown>) => {
  const start = performance.now();
  await fn();
  return performance.now() - start;
};

/** The worker benchmark's loop: turn 0 asks for two tool calls, turn 1 for one, turn 2 answers. */
const workerLoop = () =>
  agentLoop$({
    id: "bench",
    model: scriptedModel(({ turn }) =>
      turn === 0
        ? { toolCalls: [0, 1].map((n) => ({ id: `c${n}`, name: "search", input: { n } })) }
        : turn === 1
          ? { toolCalls: [{ id: "c2", name: "search", input: { n: 2 } }] }
          : { content: "done", toolCalls: [] },
    ),
    tools: { search: { description: "search", execute: (input) => outputs[(input as { n: number }).n] } },
  });

if (process.argv[2] === "--worker") {
  const journal = openPostgresJournal(url!, { schema: process.argv[3]!, pool: { max: 3 } });
  const worker = startWorker({ journal, loops: { bench: workerLoop() }, pollMs: 10 });
  await serveUntilTerm(journal, worker);
} else if (url === undefined) {
  console.log("bench/journal-postgres.ts skipped: set LOOM_PG_URL (see README)");
  printResult("journal-postgres", { skipped: "LOOM_PG_URL is not set" });
} else {
  const schema = `loom_bench_${randomBytes(4).toString("hex")}`;
  const dir = mkdtempSync(join(tmpdir(), "loom-bench-pg-"));
  try {
    printTable("postgresStore appends, 2 kB outputs (fsync on, synchronous_commit on)", [
      await appends(schema, 1, 500),
      await appends(schema, 20, 10_000),
    ]);
    printTable("a 200-turn run (200 tool calls, 2 kB outputs), ms", await longRun(schema, dir));
    printTable(
      "runs completed per second by worker processes (3 model calls + 3 tool calls a run)",
      await workers(schema),
    );
    // No targets of its own: the figures beside SQLite's and the raw inserts', compared run to run.
    printResult("journal-postgres");
  } finally {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await client.end();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function appends(schema: string, batch: number, count: number) {
  const entries: NewEntry[] = Array.from({ length: count }, (_, k) => ({
    type: "frame.completed",
    data: { frameId: `bench#turn:${k}:tool:0`, output: outputs[k % outputs.length] },
  }));
  const bytes = entries.reduce((n, e) => n + Buffer.byteLength(JSON.stringify(e.data)), 0);
  const store = postgresStore(url!, { schema });
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  const ours: number[] = [];
  const raw: number[] = [];
  for (let round = 0; round < 3; round++) {
    let version = 0;
    const runId = `appends-${batch}-${round}`;
    ours.push(
      await time(async () => {
        for (let k = 0; k < count; k += batch) {
          ({ version } = await store.append(runId, entries.slice(k, k + batch), { expectedVersion: version }));
        }
      }),
    );
    raw.push(
      await time(async () => {
        for (let k = 0; k < count; k += batch) {
          const rows = entries.slice(k, k + batch);
          await pool.query(
            `INSERT INTO "${schema}".loom_entries (at, run, seq, type, v, data)
             SELECT $4, $1, $2::int + x.ord::int, 1, 1, x.d FROM unnest($3::text[]) WITH ORDINALITY AS x(d, ord)`,
            // A run key no store uses (negative), the whole text in `data`: one unchecked insert.
            [-(batch * 10 + round + 1), k, rows.map((e) => JSON.stringify(e.data)), Date.now()],
          );
        }
      }),
    );
  }
  await store.close();
  await pool.end();
  const [o, r] = [median(ours) / 1000, median(raw) / 1000];
  return {
    workload: batch === 1 ? "single-entry appends" : `${batch}-entry appends`,
    "appends/s": count / batch / o,
    "entries/s": count / o,
    "MB/s": bytes / 1e6 / o,
    "raw appends/s": count / batch / r,
    "ours / raw": r / o,
  };
}

async function longRun(schema: string, dir: string) {
  const TURNS = 200;
  const loop = agentLoop$({
    id: "long",
    maxIterations: TURNS + 1,
    model: scriptedModel(({ turn }) =>
      turn < TURNS
        ? { toolCalls: [{ id: `c${turn}`, name: "search", input: { q: turn } }] }
        : { content: "done", toolCalls: [] },
    ),
    tools: { search: { description: "search", execute: (input) => outputs[(input as { q: number }).q] } },
  });
  const measure = async (name: string, journal: OpenJournal) => {
    const live = await time(() => loop.run({ runId: "long", input: "go", journal }));
    const resumes: number[] = [];
    const folds: number[] = [];
    let entries = 0;
    for (let round = 0; round < 5; round++) {
      resumes.push(await time(() => loop.run({ runId: "long", journal })));
      folds.push(await time(async () => (entries = foldEntries(await readJournal(journal, "long")).version)));
    }
    await journal.close();
    return {
      journal: name,
      entries,
      "live run": live,
      "loop.run on the completed run": median(resumes),
      "readJournal + foldEntries": median(folds),
    };
  };
  return [
    await measure("postgres", openPostgresJournal(url!, { schema })),
    await measure("sqlite (synchronous=full)", openSqliteJournal(join(dir, "long.db"))),
  ];
}

async function workers(schema: string) {
  const RUNS = 200;
  const here = dirname(fileURLToPath(import.meta.url));
  const rows: Record<string, string | number>[] = [];
  let single = 0;
  for (const processes of [1, 2, 4]) {
    const children: ChildProcess[] = [];
    const ready: Promise<void>[] = [];
    for (let i = 0; i < processes; i++) {
      const child = spawn(
        process.execPath,
        ["--import", "tsx", join(here, "journal-postgres.ts"), "--worker", schema],
        {
          cwd: dirname(here),
          stdio: ["ignore", "pipe", "inherit"],
        },
      );
      children.push(child);
      ready.push(new Promise((resolve) => child.stdout?.on("data", (d) => String(d).includes("ready") && resolve())));
    }
    await Promise.all(ready);
    const journal = createJournal({ store: postgresStore(url!, { schema }) });
    const loop = workerLoop();
    const start = performance.now();
    for (let i = 0; i < RUNS; i++) await submitRun(journal, { runId: `w${processes}-${i}`, loop, input: "go" });
    const prefix = `w${processes}-`;
    for (;;) {
      const runs = await journal.store.listRuns();
      const done = runs.filter((r) => r.runId.startsWith(prefix) && r.lastType === "run.completed").length;
      if (done === RUNS) break;
      await new Promise((r) => setTimeout(r, 5));
    }
    const seconds = (performance.now() - start) / 1000;
    await journal.close();
    for (const child of children) child.kill("SIGTERM");
    await Promise.all(children.map((c) => new Promise((resolve) => c.once("exit", resolve))));
    const perS = RUNS / seconds;
    if (processes === 1) single = perS;
    rows.push({ "worker processes": processes, runs: RUNS, seconds, "runs/s": perS, "vs 1 process": perS / single });
  }
  return rows;
}
