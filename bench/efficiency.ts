/**
 * What one run costs through `startWorker` on PostgreSQL: one-turn runs (a tool call, then the
 * answer) and twenty-turn runs, one warmed-up worker in this process with 8 runs in hand, the
 * runs submitted and held, then released at once. Per run and per turn (a tool-call round):
 *
 * - worker CPU: `process.cpuUsage` of this process while the batch runs (the worker, and the
 *   bench's once-every-20-ms poll for completion);
 * - server CPU: utime + stime from `/proc/<pid>/stat` of the backends serving the worker's
 *   connections (found in `pg_stat_activity` by `application_name`), and of the WAL writer;
 * - round trips and statements the worker's connections sent (counted at `pg.Client.query`),
 *   and among them the commits that wait for a WAL flush (writes not marked
 *   `synchronous_commit = off`);
 * - WAL bytes (`pg_current_wal_lsn` before and after) and WAL syncs (`pg_stat_wal.wal_sync`):
 *   both are the whole cluster's, so anything else writing to it meanwhile is counted too.
 *
 * Targets (issue 34): ≤ 3 round trips a turn; `durability: "written"` honoured (fewer flushed
 * commits than appends); CPU per one-turn run 1.5× lower than before (compare by running this
 * file against the other code in the same sitting).
 *
 *   LOOM_PG_URL=postgres://… node --import tsx bench/efficiency.ts [oneTurnRuns] [twentyTurnRuns]
 *   PROF=out.cpuprofile …   writes a CPU profile of the one-turn batch
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
import { type AgentLoop, agentLoop$ } from "../src/runtime/run/agentLoop.ts";
import { printTable, rng, toolOutput } from "./support.ts";

const url = process.env.LOOM_PG_URL;
const oneTurnRuns = Number(process.argv[2] ?? 600);
const twentyTurnRuns = Number(process.argv[3] ?? 60);
const concurrency = Number(process.env.CONC ?? 8);
const next = rng(34);
const outputs = Array.from({ length: 64 }, () => toolOutput(next, 1500 + Math.floor(next() * 2500)));

/** A loop whose scripted model asks for one search a turn for `turns` turns, then answers. */
const loopOf = (id: string, turns: number) =>
  agentLoop$({
    id,
    maxIterations: turns + 1,
    model: scriptedModel(({ turn }) =>
      turn < turns
        ? { toolCalls: [{ id: `c${turn}`, name: "search", input: { q: turn } }] }
        : { content: "done", toolCalls: [] },
    ),
    tools: { search: { description: "search", execute: (input) => outputs[(input as { q: number }).q % 64] } },
  });

// ---- counting at the pg client: every query is one round trip (pg sends one at a time per connection)
const counted = new WeakSet<object>();
const tally = { roundTrips: 0, statements: 0, writes: 0, relaxed: 0 };
const kinds = new Map<string, { write: boolean; relaxed: boolean; control: boolean }>();
const kindOf = (text: string) => {
  let k = kinds.get(text);
  if (k === undefined) {
    const control = /^\s*(BEGIN|COMMIT|ROLLBACK)\b/i.test(text);
    const write = /\b(INSERT|UPDATE|DELETE)\b/i.test(text) || /^\s*COMMIT\b/i.test(text);
    kinds.set(text, (k = { write, relaxed: /synchronous_commit/.test(text), control }));
  }
  return k;
};
const clientQuery = pg.Client.prototype.query as (...a: unknown[]) => unknown;
(pg.Client.prototype as unknown as { query: unknown }).query = function (this: object, ...a: unknown[]) {
  if (counted.has(this)) {
    const q = a[0] as string | { text?: string } | undefined;
    const text = typeof q === "string" ? q : (q?.text ?? "");
    const k = kindOf(text);
    tally.roundTrips++;
    if (!k.control) tally.statements++;
    // A write outside BEGIN…COMMIT commits by itself; inside one, the COMMIT is the write that flushes.
    if (k.write && !k.relaxed) tally.writes++;
    if (k.relaxed) tally.relaxed++;
  }
  return clientQuery.apply(this, a);
};

/** utime + stime of these processes, in ms (clock ticks of 10 ms). */
function cpuMsOf(pids: readonly number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      ticks += Number(f[11]) + Number(f[12]);
    } catch {
      // the process is gone
    }
  }
  return ticks * 10;
}

interface Measured {
  readonly runs: number;
  readonly turns: number;
  readonly seconds: number;
  readonly workerMs: number;
  readonly workerSysMs: number;
  readonly serverMs: number;
  readonly walWriterMs: number;
  readonly roundTrips: number;
  readonly statements: number;
  readonly flushedCommits: number;
  readonly relaxedCommits: number;
  readonly walBytes: number;
  readonly walSyncs: number;
}

async function measure(admin: pg.Client, loop: AgentLoop, turns: number, runs: number): Promise<Measured> {
  const schema = `loom_bench_eff_${randomBytes(4).toString("hex")}`;
  const journal = openPostgresJournal(url!, { schema, pool: { max: 10, application_name: schema } });
  const db = databaseOf(journal, "bench");
  db.pool.on("connect", (client) => counted.add(client));
  const loopId = loop.config.id;
  const held = async (prefix: string, n: number) => {
    const ids = Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
    for (let i = 0; i < ids.length; i += 8)
      await Promise.all(ids.slice(i, i + 8).map((runId) => submitRun(journal, { runId, loop, input: "go" })));
    await admin.query(`UPDATE "${schema}".loom_leases SET expires_at = now() + interval '1 hour'`);
  };
  const release = async (prefix: string, n: number) => {
    await admin.query(`UPDATE "${schema}".loom_leases SET expires_at = now() WHERE run_id LIKE $1`, [`${prefix}-%`]);
    await admin.query("SELECT pg_notify($1, $2)", [db.tables.channel, loopId]);
    for (;;) {
      const { rows } = await admin.query(
        `SELECT count(*)::int AS n FROM "${schema}".loom_runs WHERE last_type = 6 AND run_id LIKE $1`,
        [`${prefix}-%`],
      );
      if (rows[0].n >= n) return;
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  const wal = async () =>
    (
      await admin.query<{ lsn: string; syncs: string }>(
        "SELECT pg_current_wal_lsn()::text AS lsn, (SELECT wal_sync FROM pg_stat_wal)::text AS syncs",
      )
    ).rows[0]!;
  const pidsOf = async () =>
    (
      await admin.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE application_name = $1", [schema])
    ).rows.map((r) => r.pid);
  const walWriter = (
    await admin.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'")
  ).rows.map((r) => r.pid);
  try {
    const warmRuns = Math.max(50, Math.floor(runs / 4));
    await held("warm", warmRuns);
    await held("m", runs);
    const worker = startWorker({ journal, loops: { [loopId]: loop }, concurrency, onError: (e) => console.error(e) });
    await release("warm", warmRuns); // prepared statements, generic plans, JIT
    await new Promise((r) => setTimeout(r, 300));
    const profiler = process.env.PROF && turns === 1 ? new Session() : undefined;
    if (profiler) {
      profiler.connect();
      await profiler.post("Profiler.enable");
      await profiler.post("Profiler.start");
    }
    Object.assign(tally, { roundTrips: 0, statements: 0, writes: 0, relaxed: 0 });
    const wal0 = await wal();
    const pids0 = await pidsOf();
    const server0 = new Map(pids0.map((pid) => [pid, cpuMsOf([pid])]));
    const walWriter0 = cpuMsOf(walWriter);
    const cpu0 = process.cpuUsage();
    const start = performance.now();
    await release("m", runs);
    const seconds = (performance.now() - start) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const counts = { ...tally };
    const pids1 = await pidsOf();
    // A backend opened meanwhile counts from its start; one closed meanwhile is not counted.
    let serverMs = 0;
    for (const pid of pids1) serverMs += cpuMsOf([pid]) - (server0.get(pid) ?? 0);
    const walWriterMs = cpuMsOf(walWriter) - walWriter0;
    const wal1 = await wal();
    if (profiler) {
      const { profile } = await profiler.post("Profiler.stop");
      writeFileSync(process.env.PROF!, JSON.stringify(profile));
    }
    await worker.stop();
    const walBytes = Number(
      (await admin.query<{ d: string }>("SELECT pg_wal_lsn_diff($1, $2)::text AS d", [wal1.lsn, wal0.lsn])).rows[0]!.d,
    );
    return {
      runs,
      turns,
      seconds,
      workerMs: (cpu.user + cpu.system) / 1000,
      workerSysMs: cpu.system / 1000,
      serverMs,
      walWriterMs,
      roundTrips: counts.roundTrips,
      statements: counts.statements,
      flushedCommits: counts.writes,
      relaxedCommits: counts.relaxed,
      walBytes,
      walSyncs: Number(wal1.syncs) - Number(wal0.syncs),
    };
  } finally {
    await journal.close();
    if (!process.env.LOOM_BENCH_KEEP) await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  }
}

if (url === undefined) {
  console.log("bench/efficiency.ts skipped: set LOOM_PG_URL");
  console.log(`RESULT ${JSON.stringify({ bench: "efficiency", skipped: "LOOM_PG_URL is not set" })}`);
} else {
  const one = loopOf("one", 1);
  const twenty = loopOf("twenty", 20);
  const warm = createJournal({ store: memoryStore() });
  for (let i = 0; i < 200; i++) await one.run({ runId: `warm-${i}`, journal: warm, input: "go" });
  for (let i = 0; i < 20; i++) await twenty.run({ runId: `warm-20-${i}`, journal: warm, input: "go" });
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    const results = [await measure(admin, one, 1, oneTurnRuns), await measure(admin, twenty, 20, twentyTurnRuns)];
    const rows = results.map((m) => {
      const turns = m.runs * m.turns;
      return {
        run: m.turns === 1 ? "one turn" : `${m.turns} turns`,
        runs: m.runs,
        "runs/s": m.runs / m.seconds,
        "worker CPU ms/run": m.workerMs / m.runs,
        "server CPU ms/run": m.serverMs / m.runs,
        "WAL writer ms/run": m.walWriterMs / m.runs,
        "round trips/turn": m.roundTrips / turns,
        "statements/turn": m.statements / turns,
        "flushed commits/turn": m.flushedCommits / turns,
        "relaxed commits/turn": m.relaxedCommits / turns,
        "WAL syncs/turn": m.walSyncs / turns,
        "WAL bytes/turn": Math.round(m.walBytes / turns),
      };
    });
    printTable(`one worker in this process, ${concurrency} runs in hand, runs released at once`, rows);
    const [o, t] = results as [Measured, Measured];
    const summary = (m: Measured) => ({
      runs: m.runs,
      turns: m.turns,
      runsPerSecond: +(m.runs / m.seconds).toFixed(1),
      workerCpuMsPerRun: +(m.workerMs / m.runs).toFixed(3),
      workerSystemCpuMsPerRun: +(m.workerSysMs / m.runs).toFixed(3),
      serverCpuMsPerRun: +(m.serverMs / m.runs).toFixed(3),
      cpuMsPerRun: +((m.workerMs + m.serverMs) / m.runs).toFixed(3),
      walWriterCpuMsPerRun: +(m.walWriterMs / m.runs).toFixed(3),
      roundTripsPerTurn: +(m.roundTrips / (m.runs * m.turns)).toFixed(3),
      statementsPerTurn: +(m.statements / (m.runs * m.turns)).toFixed(3),
      flushedCommitsPerTurn: +(m.flushedCommits / (m.runs * m.turns)).toFixed(3),
      relaxedCommitsPerTurn: +(m.relaxedCommits / (m.runs * m.turns)).toFixed(3),
      walSyncsPerTurn: +(m.walSyncs / (m.runs * m.turns)).toFixed(3),
      walBytesPerTurn: Math.round(m.walBytes / (m.runs * m.turns)),
    });
    console.log(
      `RESULT ${JSON.stringify({
        bench: "efficiency",
        concurrency,
        oneTurn: summary(o),
        twentyTurns: summary(t),
        roundTripsPerTurnAtMost3: t.roundTrips / (t.runs * t.turns) <= 3,
        writtenHonoured: o.relaxedCommits > 0 && t.relaxedCommits > 0,
      })}`,
    );
  } finally {
    await admin.end();
  }
}
