/**
 * Worker processes on one PostgreSQL (needs a server: LOOM_PG_URL), through 1, 2, 4 and 8
 * processes (`startWorker`, this file run with `--worker`, 8 runs in hand each, warmed up on an
 * in-memory journal and then with 100 one-turn runs each through PostgreSQL, untimed):
 * - 1,000 one-turn runs (a tool call, then the answer) submitted, held, then released at once
 *   (one UPDATE and one NOTIFY): runs/s until the last completes;
 * - the same loop at a steady submit rate of half that throughput for 4 s: time from submit to
 *   pickup, p50 and p99 (the run's `run.started` time, written by `submitRun`, to its next entry's,
 *   written by the worker that claimed it: an upper bound on the claim itself);
 * - 200 twenty-turn runs released at once: runs/s and turns/s;
 * - storage: the database bytes of the twenty-turn runs' tables (entries and runs, with their
 *   TOAST and indexes) per turn, against the floor (the tool outputs' own JSON bytes): as stored
 *   (PostgreSQL compresses texts over ~2 kB; the bench's outputs compress ~2×), for outputs of the
 *   same sizes that do not compress (random text), and with compression off (STORAGE EXTERNAL).
 * Targets (issue 21): 4 workers ≥ 300 one-turn runs/s, 2 workers ≥ 1.6× 1 worker, p99 pickup ≤
 * 50 ms at half the throughput, storage ≤ 1.3× the floor.
 *
 *   LOOM_PG_URL=postgres://… [LOOM_BENCH_PROCESSES=1,2] [LOOM_BENCH_CONCURRENCY=8] [LOOM_BENCH_WARM_RUNS=100] \
 *     [LOOM_BENCH_PARTS=one,twenty,storage] node --import tsx bench/workers.ts [--storage]
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { loadavg } from "node:os";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { createJournal } from "../src/events/journal.ts";
import { memoryStore } from "../src/events/memory.ts";
import { scriptedModel } from "../src/models/scripted.ts";
import { tablesIn } from "../src/postgres/schema.ts";
import { openPostgresJournal, startWorker, submitRun } from "../src/postgres.ts";
import { agentLoop$ } from "../src/runtime/run/agentLoop.ts";
import { printResult, printTable, rng, serveUntilTerm, toolOutput } from "./support.ts";

const url = process.env.LOOM_PG_URL;
const next = rng(21);
const outputs = Array.from({ length: 64 }, () => toolOutput(next, 1500 + Math.floor(next() * 2500)));
const outputBytes = outputs.map((o) => Buffer.byteLength(JSON.stringify(o)));
/** Outputs of the same sizes that do not compress (random text): real outputs compress less than the bench's. */
const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const rawOutputs = outputBytes.map((bytes) => {
  const text = Array.from({ length: bytes - 11 }, () => ALPHABET[Math.floor(next() * 64)]).join("");
  return { data: text }; // {"data":"…"}: 11 bytes beside the text, so the same sizes as `outputs`
});
const CONCURRENCY = Number(process.env.LOOM_BENCH_CONCURRENCY ?? 8);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const WARM_RUNS = Number(process.env.LOOM_BENCH_WARM_RUNS ?? 100);

/** A loop whose runs make `turns` tool calls (one a turn, 1.5–4 kB outputs), then answer. */
const loopOf = (id: string, turns: number, outs: readonly unknown[] = outputs) =>
  agentLoop$({
    id,
    maxIterations: turns + 1,
    model: scriptedModel(({ turn }) =>
      turn < turns
        ? { toolCalls: [{ id: `c${turn}`, name: "search", input: { q: turn } }] }
        : { content: "done", toolCalls: [] },
    ),
    tools: { search: { description: "search", execute: (input) => outs[(input as { q: number }).q % 64] } },
  });
const one = loopOf("one", 1);
const twenty = loopOf("twenty", 20);
const twentyRaw = loopOf("twenty-raw", 20, rawOutputs);

if (process.argv[2] === "--worker") {
  // Warm up (JIT) on an in-memory journal first, as a long-lived worker would be: the measured
  // runs are few per process at 8 processes, and a cold process would spend them compiling.
  const warm = createJournal({ store: memoryStore() });
  for (let i = 0; i < 40; i++) await one.run({ runId: `warm-${i}`, journal: warm, input: "go" });
  for (let i = 0; i < 4; i++) await twenty.run({ runId: `warm-t-${i}`, journal: warm, input: "go" });
  const journal = openPostgresJournal(url!, { schema: process.argv[3]!, pool: { max: 10 } });
  const worker = startWorker({
    journal,
    loops: { one, twenty, "twenty-raw": twentyRaw },
    concurrency: CONCURRENCY,
    onError: (e, runId) => console.error(`worker ${process.pid} ${runId ?? ""}: ${String(e)}`),
  });
  await serveUntilTerm(journal, worker);
} else if (url === undefined) {
  console.log("bench/workers.ts skipped: set LOOM_PG_URL (see README)");
  printResult("workers", { skipped: "LOOM_PG_URL is not set" });
} else {
  const load = loadavg(); // the machine's load when the bench starts (it shares its cores)
  const admin = new pg.Pool({ connectionString: url, max: 2 });
  const schemas: string[] = [];
  try {
    const rows: Record<string, string | number>[] = [];
    const long: Record<string, string | number>[] = [];
    let single = 0;
    const parts = new Set(
      process.argv[2] === "--storage" ? ["storage"] : (process.env.LOOM_BENCH_PARTS ?? "one,twenty,storage").split(","),
    );
    const counts = process.env.LOOM_BENCH_PROCESSES?.split(",").map(Number) ?? [1, 2, 4, 8];
    for (const processes of counts) {
      if (!parts.has("one")) break;
      const r = await oneTurn(processes);
      if (processes === 1) single = r.perS;
      rows.push({
        "worker processes": processes,
        "one-turn runs/s (1,000 at once)": r.perS,
        "vs 1 process": r.perS / single,
        "steady rate, runs/s": r.rate,
        "pickup p50 ms": r.p50,
        "pickup p99 ms": r.p99,
      });
    }
    for (const processes of counts) {
      if (!parts.has("twenty")) break;
      const t = await twentyTurns(processes);
      long.push({ "worker processes": processes, "twenty-turn runs/s (200 at once)": t.perS, "turns/s": t.perS * 20 });
    }
    console.log(`(load average at the start: ${load.map((x) => x.toFixed(1)).join(", ")})`);
    printTable(`one-turn runs through worker processes (${CONCURRENCY} runs in hand each, pool of 10)`, rows);
    printTable("twenty-turn runs through worker processes", long);
    const stored = parts.has("storage")
      ? [await storage("default"), await storage("incompressible"), await storage("external")]
      : [];
    if (stored.length > 0) {
      printTable("database bytes per turn of the twenty-turn runs, against the tool outputs' own bytes", stored);
    }
    const of = (n: number) => rows.find((r) => r["worker processes"] === n);
    const four = of(4)?.["one-turn runs/s (1,000 at once)"];
    const two = of(2)?.["vs 1 process"];
    const p99 = rows.length > 0 ? Math.max(...rows.map((r) => Number(r["pickup p99 ms"]))) : null;
    const storageVsFloor = stored[0] ? Number(stored[0]["total / floor"]) : null;
    printResult("workers", {
      targets: { fourWorkersRunsPerS: "≥ 300", twoVsOne: "≥ 1.6", pickupP99Ms: "≤ 50", storageVsFloor: "≤ 1.3" },
      fourWorkersRunsPerS: four ?? null,
      twoVsOne: two ?? null,
      pickupP99Ms: p99,
      storageVsFloor,
      loadAverage: load,
    });
  } finally {
    for (const s of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
    await admin.end();
  }

  /** A fresh schema, its runs submitted and held (not due), and `processes` workers waiting. */
  async function setUp(processes: number, runs: number, loop: typeof one, prefix: string) {
    const schema = `loom_bench_w_${randomBytes(4).toString("hex")}`;
    schemas.push(schema);
    const journal = openPostgresJournal(url!, { schema, pool: { max: 8 } });
    const ids = Array.from({ length: runs }, (_, i) => `${prefix}-${i}`);
    for (let i = 0; i < ids.length; i += 8) {
      await Promise.all(ids.slice(i, i + 8).map((runId) => submitRun(journal, { runId, loop, input: "go" })));
    }
    await admin.query(`UPDATE "${schema}".loom_leases SET expires_at = now() + interval '1 hour'`);
    const children = await spawnWorkers(processes, schema);
    // Warm-up through PostgreSQL, untimed: 100 one-turn runs a process, so each has run the pg
    // driver's, the claim's and the append's code enough for the JIT, as a long-lived worker has.
    const warm = WARM_RUNS * processes;
    for (let i = 0; i < warm; i += 8) {
      const batch = Array.from({ length: Math.min(8, warm - i) }, (_, k) => `warm-${i + k}`);
      await Promise.all(batch.map((runId) => submitRun(journal, { runId, loop: one, input: "go" })));
    }
    await completed(schema, warm);
    await sleep(500); // each has looked again, found nothing due, and listens
    return { schema, journal, children, warm };
  }

  /** Releases every held run at once; resolves with the seconds until `count` runs completed. */
  async function release(schema: string, loopId: string, count: number) {
    const start = performance.now();
    await admin.query(`WITH due AS (UPDATE "${schema}".loom_leases SET expires_at = now()) SELECT pg_notify($1, $2)`, [
      tablesIn(schema).channel,
      loopId,
    ]);
    await completed(schema, count);
    return (performance.now() - start) / 1000;
  }

  async function completed(schema: string, count: number) {
    for (;;) {
      const { rows } = await admin.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM "${schema}".loom_runs WHERE last_type = 6`,
      );
      if ((rows[0]?.n ?? 0) >= count) return;
      await sleep(20);
    }
  }

  async function oneTurn(processes: number) {
    const { schema, journal, children, warm } = await setUp(processes, 1000, one, "b");
    try {
      const seconds = await release(schema, "one", warm + 1000);
      const perS = 1000 / seconds;
      // Steady: half the throughput, for 4 s, each submit on its schedule.
      const rate = perS / 2;
      const count = Math.round(rate * 4);
      const start = performance.now();
      for (let i = 0; i < count; i++) {
        const wait = start + (i * 1000) / rate - performance.now();
        if (wait > 0) await sleep(wait);
        await submitRun(journal, { runId: `s-${i}`, loop: one, input: "go" });
      }
      await completed(schema, warm + 1000 + count);
      const { rows } = await admin.query<{ ms: number }>(
        `SELECT (b.at - a.at)::float8 AS ms FROM "${schema}".loom_runs r
           JOIN "${schema}".loom_entries a ON a.run = r.run AND a.seq = 1
           JOIN "${schema}".loom_entries b ON b.run = r.run AND b.seq = 2
          WHERE r.run_id LIKE 's-%' ORDER BY 1`,
      );
      const at = (q: number) => rows[Math.min(rows.length - 1, Math.floor(q * rows.length))]?.ms ?? 0;
      return { perS, rate, p50: at(0.5), p99: at(0.99) };
    } finally {
      await stopWorkers(children);
      await journal.close();
    }
  }

  async function twentyTurns(processes: number) {
    const { schema, journal, children, warm } = await setUp(processes, 200, twenty, "t");
    try {
      return { perS: 200 / (await release(schema, "twenty", warm + 200)) };
    } finally {
      await stopWorkers(children);
      await journal.close();
    }
  }

  /**
   * 100 twenty-turn runs in a fresh schema, run by 2 workers; then the bytes of their tables.
   * "incompressible": outputs of the same sizes in random text; "external": the bench's outputs
   * with compression turned off (`STORAGE EXTERNAL`: every text over ~2 kB in TOAST as it is).
   */
  async function storage(kind: "default" | "incompressible" | "external") {
    const loop = kind === "incompressible" ? twentyRaw : twenty;
    const schema = `loom_bench_s_${randomBytes(4).toString("hex")}`;
    schemas.push(schema);
    const journal = openPostgresJournal(url!, { schema });
    await journal.store.listRuns();
    if (kind === "external") {
      await admin.query(`ALTER TABLE "${schema}".loom_entries ALTER COLUMN data SET STORAGE EXTERNAL`);
    }
    const runs = 100;
    for (let i = 0; i < runs; i++) await submitRun(journal, { runId: `st-${i}`, loop, input: "go" });
    const children = await spawnWorkers(2, schema);
    try {
      await completed(schema, runs);
    } finally {
      await stopWorkers(children);
      await journal.close();
    }
    await admin.query(`VACUUM FULL "${schema}".loom_runs`);
    const { rows } = await admin.query<Record<"heap" | "toast" | "index" | "runs", string>>(
      `SELECT pg_relation_size(c.oid) AS heap, coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)), 0) AS toast,
              pg_indexes_size(c.oid) AS index, pg_total_relation_size('"${schema}".loom_runs') AS runs
         FROM pg_class c WHERE c.oid = '"${schema}".loom_entries'::regclass`,
    );
    const [heap, toast, index, runRows] = (["heap", "toast", "index", "runs"] as const).map((k) =>
      Number(rows[0]?.[k]),
    );
    const turns = runs * 20;
    const floor = Array.from({ length: 20 }, (_, q) => outputBytes[q % 64] as number).reduce((a, b) => a + b, 0) / 20;
    const total = (heap! + toast! + index! + runRows!) / turns;
    return {
      "outputs, storage": {
        default: "the bench's (compress ~2×), default storage",
        incompressible: "random text (no compression), default storage",
        external: "the bench's, STORAGE EXTERNAL (no compression)",
      }[kind],
      "heap B/turn": heap! / turns,
      "TOAST B/turn": toast! / turns,
      "indexes B/turn": index! / turns,
      "runs B/turn": runRows! / turns,
      "total B/turn": total,
      "floor B/turn": floor,
      "total / floor": total / floor,
    };
  }

  async function spawnWorkers(processes: number, schema: string): Promise<ChildProcess[]> {
    const children: ChildProcess[] = [];
    const ready: Promise<void>[] = [];
    for (let i = 0; i < processes; i++) {
      const child = spawn(process.execPath, ["--import", "tsx", fileURLToPath(import.meta.url), "--worker", schema], {
        stdio: ["ignore", "pipe", "inherit"],
      });
      children.push(child);
      ready.push(new Promise((resolve) => child.stdout?.on("data", (d) => String(d).includes("ready") && resolve())));
    }
    await Promise.all(ready);
    return children;
  }

  async function stopWorkers(children: ChildProcess[]) {
    for (const child of children) child.kill("SIGTERM");
    await Promise.all(children.map((c) => (c.exitCode === null ? new Promise((r) => c.once("exit", r)) : undefined)));
  }
}
