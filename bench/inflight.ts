/**
 * Many runs in flight through ONE worker process on PostgreSQL (needs a server: LOOM_PG_URL).
 * Each run's model answers after 1 s (a scripted model that awaits a 1 s timer), `turns` model
 * calls a run (a tool call each turn but the last, which answers). The runs are submitted first,
 * then one `startWorker` with `concurrency` in the thousands and a pool of at most 10 connections
 * runs them all. Measured: the wall time from the worker's start to the last run's completion
 * against the ideal (runs / concurrency × turns × 1 s; target ≤ 1.5×), the worker process's RSS
 * above its baseline per run in flight (at the peak of runs held at once), and the most connections the worker's pool
 * held at once (from `pg_stat_activity`, by the pool's `application_name`).
 *
 *   LOOM_PG_URL=postgres://… [LOOM_BENCH_RUNS=10000] [LOOM_BENCH_CONCURRENCY=2000,10000] \
 *     [LOOM_BENCH_TURNS=2] node --import tsx bench/inflight.ts [--quick]
 *
 * `--quick`: 1,000 runs at a concurrency of 500 (about 5 s).
 */
import { randomBytes } from "node:crypto";
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
  (globalThis as { gc?: () => void }).gc?.();
  const baseline = process.memoryUsage().rss;
  const journal = openPostgresJournal(url!, { schema, pool: { max: POOL, application_name: appName } });
  let errors = 0;
  const errorSamples: string[] = [];
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
    maxConnections = Math.max(maxConnections, row.connections);
    completed = row.completed;
    if (row.queued === 0 && completed === RUNS) break;
    if (performance.now() - started > 600_000) break; // give up after 10 minutes: reported as incomplete
  }
  const seconds = (performance.now() - started) / 1000;
  await worker.stop();
  await journal.close();
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
  };
}

if (url === undefined) {
  console.log("bench/inflight.ts skipped: set LOOM_PG_URL (see README)");
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
      "max connections": r.maxConnections,
      completed: r.completed,
      errors: r.errors,
    })),
  );
  console.log(
    `RESULT ${JSON.stringify({
      runs: RUNS,
      turns: TURNS,
      pool: POOL,
      results: results.map((r) => ({
        concurrency: r.concurrency,
        seconds: Number(r.seconds.toFixed(2)),
        ideal: r.ideal,
        ratio: Number((r.seconds / r.ideal).toFixed(2)),
        kbPerRun: Number(r.kbPerRun.toFixed(1)),
        maxConnections: r.maxConnections,
        completed: r.completed,
        errors: r.errors,
        peakInFlight: r.peakInFlight,
      })),
    })}`,
  );
  for (const r of results) for (const e of r.errorSamples) console.error(`concurrency ${r.concurrency}: ${e}`);
}
