/**
 * Many runs in flight through ONE worker process on PostgreSQL (needs a server: LOOM_PG_URL).
 * Each run's model answers after 1 s (a scripted model that awaits a 1 s timer), `turns` model
 * calls a run (a tool call each turn but the last, which answers). The runs are submitted first,
 * then one `startWorker` with `concurrency` in the thousands and a pool of at most 10 connections
 * runs them all. Measured: the wall time from the worker's start to the last run's completion
 * against the ideal (runs / concurrency × turns × 1 s; target ≤ 1.5×), the worker process's RSS
 * above its baseline per run in flight (at the peak of runs held at once), and the most connections the worker's pool
 * held at once (from `pg_stat_activity`, by the pool's `application_name`). Also counted: the
 * statements the worker's pool sent, the worker process's CPU (and its main thread's alone) and its connections' backends' CPU
 * (from /proc, so on a server on this machine), each per run.
 *
 *   LOOM_PG_URL=postgres://… [LOOM_BENCH_RUNS=10000] [LOOM_BENCH_CONCURRENCY=2000,10000] \
 *     [LOOM_BENCH_TURNS=2] [LOOM_BENCH_CPUPROF=/tmp/worker] node --import tsx bench/inflight.ts [--quick]
 *
 * `--quick`: 1,000 runs at a concurrency of 500 (about 5 s). Run with `node --expose-gc` to also
 * measure the live heap a run in flight holds: once the worker holds all the runs it can, a full
 * collection (one pause, which the wall time then includes) and the heap used above the baseline's.
 * RSS at the peak also counts garbage not yet collected.
 */
import { randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import pg from "pg";
import { scriptedModel } from "../src/models/scripted.ts";
import { openPostgresJournal, startWorker, submitRun } from "../src/postgres.ts";
import { agentLoop$ } from "../src/runtime/run/agentLoop.ts";
import { printTable } from "./support.ts";

const url = process.env.LOOM_PG_URL;
const quick = process.argv.includes("--quick");
const RUNS = Number(process.env.LOOM_BENCH_RUNS ?? (quick ? 1000 : 10_000));
const CONCURRENCIES = (process.env.LOOM_BENCH_CONCURRENCY ?? (quick ? "500" : "2000,10000")).split(",").map(Number);
const TURNS = Number(process.env.LOOM_BENCH_TURNS ?? 2);
const POOL = 10;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** `turns` model calls, each answered after 1 s: a tool call (answered at once) each turn but the last. */
const slow = agentLoop$({
  id: "slow",
  maxIterations: TURNS + 1,
  model: scriptedModel(async ({ turn }) => {
    await sleep(1000);
    return turn < TURNS - 1
      ? { toolCalls: [{ id: `c${turn}`, name: "look", input: { turn } }] }
      : { content: "done", toolCalls: [] };
  }),
  tools: { look: { description: "looks", execute: (input) => input } },
});

interface Measured {
  readonly concurrency: number;
  readonly seconds: number;
  readonly ideal: number;
  readonly rssMbPeak: number;
  readonly kbPerRun: number;
  readonly maxConnections: number;
  readonly completed: number;
  readonly errors: number;
  /** The most runs the worker held at once (sampled). */
  readonly peakInFlight: number;
  /** The first few errors the worker reported, as text. */
  readonly errorSamples: readonly string[];
  /** Live heap per run in flight after a full collection at the peak (KB), when `gc` is exposed. */
  readonly liveKbPerRun: number;
  /** Statements (queries and transactions) the worker's pool sent, per run. */
  readonly statementsPerRun: number;
  /** The worker process's CPU (user + system), ms per run. */
  readonly workerCpuMsPerRun: number;
  /**
   * The worker process's main thread's CPU alone, ms per run (NaN without /proc): without V8's
   * collector threads, whose share moves with what else runs on the cores.
   */
  readonly mainThreadCpuMsPerRun: number;
  /** The CPU of the worker's connections' PostgreSQL backends, ms per run (NaN when /proc shows none). */
  readonly serverCpuMsPerRun: number;
}

/** CPU ms a process (or with `task`, one of its threads) has used (utime + stime, from /proc), or undefined when it is not visible. */
function cpuMsOf(pid: number, task?: number): number | undefined {
  try {
    const stat = readFileSync(task === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${task}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // clock ticks of 10 ms
  } catch {
    return undefined;
  }
}

async function measure(concurrency: number): Promise<Measured> {
  const schema = `loom_bench_inflight_${randomBytes(4).toString("hex")}`;
  const appName = `loom-inflight-${randomBytes(3).toString("hex")}`;
  const monitor = new pg.Client({ connectionString: url });
  await monitor.connect();
  // Submitted through a journal of its own, closed before the worker starts.
  const submitter = openPostgresJournal(url!, { schema, pool: { max: 8 } });
  try {
    for (let i = 0; i < RUNS; i += 200) {
      await Promise.all(
        Array.from({ length: Math.min(200, RUNS - i) }, (_, k) =>
          submitRun(submitter, { runId: `r-${i + k}`, loop: slow, input: "go" }),
        ),
      );
    }
  } finally {
    await submitter.close();
  }
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  const baseline = process.memoryUsage().rss;
  const baseHeap = process.memoryUsage().heapUsed;
  let liveKbPerRun = Number.NaN;
  const pool = new pg.Pool({ connectionString: url, max: POOL, application_name: appName });
  pool.on("error", () => {});
  let statements = 0;
  const query = pool.query.bind(pool) as (...args: unknown[]) => unknown;
  const kinds = new Map<string, number>();
  (pool as { query: unknown }).query = (...args: unknown[]) => {
    statements++;
    if (process.env.LOOM_BENCH_TRACE) {
      const a = args[0] as string | { name?: string; text: string };
      const k = typeof a === "string" ? a : (a.name ?? a.text);
      const key = k.replace(/\s+/g, " ").slice(0, 90);
      kinds.set(key, (kinds.get(key) ?? 0) + 1);
    }
    return query(...args);
  };
  // `pool.query` checks a client out through `pool.connect`: a checkout beyond the queries is a
  // transaction (its statements counted as one).
  let checkouts = 0;
  const connect = pool.connect.bind(pool) as (...args: unknown[]) => unknown;
  (pool as { connect: unknown }).connect = (...args: unknown[]) => {
    checkouts++;
    return connect(...args);
  };
  const journal = openPostgresJournal(pool, { schema });
  await journal.store.read("r-0"); // the schema checked before the clock starts
  statements = 0;
  checkouts = 0;
  const backends = new Map<number, { first: number; last: number }>();
  const cpuStarted = process.cpuUsage();
  const mainStarted = cpuMsOf(process.pid, process.pid) ?? Number.NaN;
  let errors = 0;
  const errorSamples: string[] = [];
  // LOOM_BENCH_CPUPROF=<file>: a CPU profile of the worker's phase alone (not the submits), for DevTools.
  const profiler = process.env.LOOM_BENCH_CPUPROF === undefined ? undefined : new Session();
  if (profiler !== undefined) {
    profiler.connect();
    await profiler.post("Profiler.enable");
    await profiler.post("Profiler.start");
  }
  const started = performance.now();
  const worker = startWorker({
    journal,
    loops: { slow },
    concurrency,
    pollMs: 200,
    onError: (e, runId) => {
      errors++;
      if (errorSamples.length < 3) errorSamples.push(`${runId ?? "-"}: ${String(e).slice(0, 200)}`);
    },
  });
  let peakRss = baseline;
  let maxConnections = 0;
  let completed = 0;
  let peakInFlight = 0;
  for (;;) {
    await sleep(250);
    peakRss = Math.max(peakRss, process.memoryUsage().rss);
    peakInFlight = Math.max(peakInFlight, worker.active.length);
    if (gc !== undefined && Number.isNaN(liveKbPerRun) && worker.active.length >= Math.min(concurrency, RUNS)) {
      const held = worker.active.length;
      gc();
      liveKbPerRun = (process.memoryUsage().heapUsed - baseHeap) / 1024 / held;
    }
    if (process.env.LOOM_BENCH_TRACE)
      console.error(((performance.now() - started) / 1000).toFixed(2), worker.active.length, completed);
    const { rows } = await monitor.query<{ connections: number; queued: number; completed: number }>(
      `SELECT (SELECT count(*)::int FROM pg_stat_activity WHERE application_name = $1) AS connections,
              (SELECT count(*)::int FROM "${schema}".loom_leases) AS queued,
              (SELECT count(*)::int FROM "${schema}".loom_runs WHERE last_type = (
                 SELECT code FROM "${schema}".loom_entry_types WHERE type = 'run.completed')) AS completed`,
      [appName],
    );
    const row = rows[0]!;
    const pids = await monitor.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE application_name = $1", [
      appName,
    ]);
    for (const { pid } of pids.rows) {
      const ms = cpuMsOf(pid);
      if (ms === undefined) continue;
      const seen = backends.get(pid);
      if (seen === undefined) backends.set(pid, { first: ms, last: ms });
      else seen.last = ms;
    }
    maxConnections = Math.max(maxConnections, row.connections);
    completed = row.completed;
    if (row.queued === 0 && completed === RUNS) break;
    if (performance.now() - started > 600_000) break; // give up after 10 minutes: reported as incomplete
  }
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuStarted);
  const mainCpu = (cpuMsOf(process.pid, process.pid) ?? Number.NaN) - mainStarted;
  if (profiler !== undefined) {
    const { profile } = await profiler.post("Profiler.stop");
    writeFileSync(`${process.env.LOOM_BENCH_CPUPROF}.${concurrency}.cpuprofile`, JSON.stringify(profile));
    profiler.disconnect();
  }
  const sent = statements + Math.max(0, checkouts - statements);
  if (process.env.LOOM_BENCH_TRACE) console.error([...kinds].sort((a, b) => b[1] - a[1]));
  await worker.stop();
  await journal.close();
  await pool.end();
  let serverCpu = 0;
  for (const { first, last } of backends.values()) serverCpu += last - first;
  await monitor.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await monitor.end();
  return {
    concurrency,
    seconds,
    ideal: Math.ceil(RUNS / concurrency) * TURNS,
    rssMbPeak: (peakRss - baseline) / 2 ** 20,
    kbPerRun: (peakRss - baseline) / 1024 / Math.max(1, peakInFlight),
    maxConnections,
    completed,
    errors,
    peakInFlight,
    errorSamples,
    liveKbPerRun,
    statementsPerRun: sent / RUNS,
    workerCpuMsPerRun: (cpu.user + cpu.system) / 1000 / RUNS,
    mainThreadCpuMsPerRun: mainCpu / RUNS,
    serverCpuMsPerRun: backends.size === 0 ? Number.NaN : serverCpu / RUNS,
  };
}

if (url === undefined) {
  console.log("bench/inflight.ts skipped: set LOOM_PG_URL (see README)");
  console.log(`RESULT ${JSON.stringify({ bench: "inflight", skipped: "LOOM_PG_URL is not set" })}`);
} else {
  const results: Measured[] = [];
  for (const concurrency of CONCURRENCIES) results.push(await measure(concurrency));
  printTable(
    `${RUNS} runs of ${TURNS} model calls (1 s each) through one worker, pool of ${POOL}`,
    results.map((r) => ({
      concurrency: r.concurrency,
      "wall s": r.seconds.toFixed(1),
      "ideal s": r.ideal,
      "× ideal": (r.seconds / r.ideal).toFixed(2),
      "RSS MB (peak, above baseline)": r.rssMbPeak.toFixed(0),
      "peak in flight": r.peakInFlight,
      "KB / run in flight (at peak)": r.kbPerRun.toFixed(1),
      "live heap KB / run": r.liveKbPerRun.toFixed(1),
      "max connections": r.maxConnections,
      "statements / run": r.statementsPerRun.toFixed(2),
      "worker CPU ms / run": r.workerCpuMsPerRun.toFixed(2),
      "main thread CPU ms / run": r.mainThreadCpuMsPerRun.toFixed(2),
      "server CPU ms / run": r.serverCpuMsPerRun.toFixed(2),
      completed: r.completed,
      errors: r.errors,
    })),
  );
  console.log(
    `RESULT ${JSON.stringify({
      bench: "inflight",
      runs: RUNS,
      turns: TURNS,
      pool: POOL,
      results: results.map((r) => ({
        concurrency: r.concurrency,
        seconds: Number(r.seconds.toFixed(2)),
        ideal: r.ideal,
        ratio: Number((r.seconds / r.ideal).toFixed(2)),
        kbPerRun: Number(r.kbPerRun.toFixed(1)),
        liveKbPerRun: Number.isNaN(r.liveKbPerRun) ? null : Number(r.liveKbPerRun.toFixed(1)),
        maxConnections: r.maxConnections,
        statementsPerRun: Number(r.statementsPerRun.toFixed(2)),
        workerCpuMsPerRun: Number(r.workerCpuMsPerRun.toFixed(2)),
        mainThreadCpuMsPerRun: Number(r.mainThreadCpuMsPerRun.toFixed(2)),
        serverCpuMsPerRun: Number(r.serverCpuMsPerRun.toFixed(2)),
        completed: r.completed,
        errors: r.errors,
        peakInFlight: r.peakInFlight,
      })),
    })}`,
  );
  for (const r of results) for (const e of r.errorSamples) console.error(`concurrency ${r.concurrency}: ${e}`);
}
