/**
 * CPU and round trips per one-turn run through one worker (in this process, warmed up):
 * 1,000 one-turn runs submitted and held, then released at once; the worker's CPU
 * (`process.cpuUsage`), the server's (utime + stime from /proc of the backends serving the
 * worker's connections: not the WAL writer's and checkpointer's share), and the statements the
 * worker's pool sent, per run.
 *
 *   LOOM_PG_URL=postgres://… node --import tsx bench/workerCpu.ts [runs]
 */
import { randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import pg from "pg";
import { createJournal } from "../src/events/journal.ts";
import { memoryStore } from "../src/events/memory.ts";
import { scriptedModel } from "../src/models/scripted.ts";
import { databaseOf } from "../src/postgres/submit.ts";
import { openPostgresJournal, startWorker, submitRun } from "../src/postgres.ts";
import { agentLoop$ } from "../src/runtime/run/agentLoop.ts";
import { printResult, printTable, rng, toolOutput } from "./support.ts";

const url = process.env.LOOM_PG_URL;
const runs = Number(process.argv[2] ?? 1000);
const next = rng(21);
const outputs = Array.from({ length: 64 }, () => toolOutput(next, 1500 + Math.floor(next() * 2500)));
const one = agentLoop$({
  id: "one",
  maxIterations: 2,
  model: scriptedModel(({ turn }) =>
    turn < 1
      ? { toolCalls: [{ id: `c${turn}`, name: "search", input: { q: turn } }] }
      : { content: "done", toolCalls: [] },
  ),
  tools: { search: { description: "search", execute: (input) => outputs[(input as { q: number }).q % 64] } },
});

/** utime + stime of the given server processes (the worker's connections), in ms (ticks of 10 ms). */
function serverCpuMs(pids: readonly number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const close = stat.lastIndexOf(")");
      if (!stat.slice(stat.indexOf("(") + 1, close).startsWith("postgres")) continue;
      const f = stat.slice(close + 2).split(" ");
      ticks += Number(f[11]) + Number(f[12]);
    } catch {
      // gone
    }
  }
  return ticks * 10;
}

if (url === undefined) {
  console.log("bench/workerCpu.ts skipped: set LOOM_PG_URL");
  printResult("workerCpu", { skipped: "LOOM_PG_URL is not set" });
} else {
  const warm = createJournal({ store: memoryStore() });
  for (let i = 0; i < 200; i++) await one.run({ runId: `warm-${i}`, journal: warm, input: "go" });
  const schema = `loom_bench_cpu_${randomBytes(4).toString("hex")}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  const journal = openPostgresJournal(url, { schema, pool: { max: 10, application_name: schema } });
  try {
    const ids = Array.from({ length: runs }, (_, i) => `c-${i}`);
    for (let i = 0; i < ids.length; i += 8) {
      await Promise.all(ids.slice(i, i + 8).map((runId) => submitRun(journal, { runId, loop: one, input: "go" })));
    }
    await admin.query(`UPDATE "${schema}".loom_leases SET expires_at = now() + interval '1 hour'`);
    const pool = databaseOf(journal, "bench").pool;
    const counts = new Map<string, number>();
    let statements = 0;
    const query = pool.query.bind(pool) as (...a: unknown[]) => unknown;
    (pool as unknown as { query: unknown }).query = (...a: unknown[]) => {
      statements++;
      const q = a[0] as string | { text: string };
      const text = (typeof q === "string" ? q : q.text).replace(/\s+/g, " ").trim().slice(0, 60);
      counts.set(text, (counts.get(text) ?? 0) + 1);
      return query(...a);
    };
    const worker = startWorker({
      journal,
      loops: { one },
      concurrency: Number(process.env.CONC ?? 8),
      onError: (e) => console.error(String(e)),
    });
    await new Promise((r) => setTimeout(r, 500));
    statements = 0;
    counts.clear();
    const profiler = process.env.PROF ? new Session() : undefined;
    if (profiler) {
      profiler.connect();
      await profiler.post("Profiler.enable");
      await profiler.post("Profiler.start");
    }
    const cpu0 = process.cpuUsage();
    // The worker's backends: its pool's and its listening connection (named after the schema).
    const backends = async () =>
      (
        await admin.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE application_name = $1", [schema])
      ).rows.map((r) => r.pid);
    const server0 = serverCpuMs(await backends());
    const start = performance.now();
    await admin.query(`UPDATE "${schema}".loom_leases SET expires_at = now()`);
    await admin.query(`SELECT pg_notify($1, 'one')`, [databaseOf(journal, "bench").tables.channel]);
    for (;;) {
      const { rows } = await admin.query(`SELECT count(*)::int AS n FROM "${schema}".loom_runs WHERE last_type = 6`);
      if (rows[0].n >= runs) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    const seconds = (performance.now() - start) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const after = await backends();
    const server = serverCpuMs(after) - server0; // a backend opened meanwhile counts from its start
    if (profiler) {
      const { profile } = await profiler.post("Profiler.stop");
      writeFileSync(process.env.PROF!, JSON.stringify(profile));
    }
    await worker.stop();
    printTable(`one worker, ${runs} one-turn runs`, [
      {
        "runs/s": runs / seconds,
        "worker CPU ms/run": (cpu.user + cpu.system) / 1000 / runs,
        "server CPU ms/run": server / runs,
        "statements/run": statements / runs,
      },
    ]);
    for (const [text, n] of [...counts].sort((a, b) => b[1] - a[1])) console.log(`${(n / runs).toFixed(2)}  ${text}`);
    // No target of its own: bench/efficiency.ts holds issue 34's; this is the profile's companion.
    printResult("workerCpu", { runs });
  } finally {
    await journal.close();
    if (!process.env.LOOM_BENCH_KEEP) await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  }
}
