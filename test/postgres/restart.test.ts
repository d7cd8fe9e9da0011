import { type ChildProcess, execFile, spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { rmSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { readJournal } from "../../src/events/journal.ts";
import { openPostgresJournal, submitRun } from "../../src/postgres.ts";
import { restartLoop } from "./fixtures/restartWorker.ts";

/**
 * A real server restart under worker processes (issue 21): a throwaway cluster of the test's own
 * (scripts/pg-test-cluster.sh on a free port and a fresh directory), runs of several turns
 * through three worker processes, `pg_ctl stop -m fast` then start while they are mid-run. Every
 * run completes, no frame is journaled twice, and no step whose completion was journaled runs again.
 */

const root = join(import.meta.dirname, "../..");
const script = join(root, "scripts/pg-test-cluster.sh");
const RUNS = 12;
const TURNS = 6;
const run = promisify(execFile);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// Skipped when the PostgreSQL server binaries (initdb, pg_ctl) are not installed: the test starts
// and restarts a server of its own, which a LOOM_PG_URL alone does not allow.
const probe = spawnSync("bash", [script, "url"], { encoding: "utf8" });
const SERVER_BINARIES = probe.status === 0;
if (!SERVER_BINARIES) console.log(`restart test skipped: ${probe.stderr.trim()}`);

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });

async function until(what: string, probe: () => Promise<boolean> | boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

interface Worker {
  readonly child: ChildProcess;
  readonly ready: Promise<void>;
  readonly exited: Promise<unknown>;
  readonly out: () => string;
  readonly err: () => string;
}

function spawnWorker(url: string, schema: string): Worker {
  const child = spawn(process.execPath, ["--import", "tsx", "test/postgres/fixtures/restartWorker.ts"], {
    cwd: root,
    env: { ...process.env, LOOM_PG_URL: url, LOOM_PG_SCHEMA: schema, LOOM_TURNS: String(TURNS) },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout?.on("data", (d) => {
    out += String(d);
  });
  child.stderr?.on("data", (d) => {
    err += String(d);
  });
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const ready = until("a worker to be ready", () => out.includes("ready\n"), 30_000);
  return { child, ready, exited, out: () => out, err: () => err };
}

describe.skipIf(!SERVER_BINARIES)("a PostgreSQL server restart under worker processes", () => {
  it(`${RUNS} runs of ${TURNS} turns through 3 workers all complete: 0 duplicate frames, 0 completed steps re-run`, async () => {
    const port = await freePort();
    const dir = `/tmp/loom-pg-restart-${randomBytes(4).toString("hex")}`;
    const env = { ...process.env, LOOM_PG_PORT: String(port), LOOM_PG_DIR: dir };
    const cluster = async (verb: "start" | "stop") => (await run("bash", [script, verb], { env })).stdout.trim();
    const workers: Worker[] = [];
    try {
      const url = await cluster("start");
      const schema = "loom_restart";
      let journal = openPostgresJournal(url, { schema });
      await journal.store.listRuns(); // creates the schema and Loom's tables
      for (let i = 0; i < 3; i++) workers.push(spawnWorker(url, schema));
      await Promise.all(workers.map((w) => w.ready));
      const runIds = Array.from({ length: RUNS }, (_, i) => `run-${String(i).padStart(2, "0")}`);
      for (const runId of runIds) await submitRun(journal, { runId, loop: restartLoop, input: runId });

      const executions = () =>
        workers.flatMap((w) => w.out().split("\n")).flatMap((l) => (l.startsWith("exec ") ? [l.slice(5)] : []));
      const toolExecutions = () => executions().filter((x) => x.includes(":tool:"));
      // Mid-run: a good part of the work done, and runs still going.
      await until("the runs to be under way", () => toolExecutions().length >= RUNS * 2, 30_000);
      const completedAtRestart = (await journal.store.listRuns()).filter((r) => r.lastType === "run.completed");
      const executedAtRestart = toolExecutions().length;
      await journal.close();

      await cluster("stop"); // fast shutdown: every connection is cut, in-flight statements fail
      await sleep(1_000); // the workers find no server for a while
      await cluster("start");

      journal = openPostgresJournal(url, { schema });
      await until(
        "every run to complete after the restart",
        async () => (await journal.store.listRuns()).filter((r) => r.lastType === "run.completed").length === RUNS,
        60_000,
      ).catch((e: Error) => {
        throw new Error(`${e.message}; worker stderr:\n${workers.map((w) => w.err()).join("\n")}`);
      });
      expect(completedAtRestart.length, "the restart came mid-run").toBeLessThan(RUNS);
      expect(toolExecutions().length, "work went on after the restart").toBeGreaterThan(executedAtRestart);

      for (const w of workers) w.child.kill("SIGTERM");
      await Promise.all(workers.map((w) => w.exited));

      const executedBy = new Map<string, number>();
      for (const x of executions()) executedBy.set(x.replace(" ", "/"), (executedBy.get(x.replace(" ", "/")) ?? 0) + 1);
      let unknownReRuns = 0;
      for (const runId of runIds) {
        const entries = await readJournal(journal, runId); // validated: seqs in order, no gap
        expect(entries.at(-1), runId).toMatchObject({
          type: "run.completed",
          data: { output: { content: `done ${runId}` } },
        });
        const starts = new Map<string, number>();
        const completions = new Map<string, number>();
        for (const e of entries) {
          if (e.type === "frame.started") {
            // 0 completed steps re-run: no attempt starts once the frame's completion is journaled.
            expect(completions.has(e.data.frameId), `${runId}: ${e.data.frameId} started after it completed`).toBe(
              false,
            );
            starts.set(e.data.frameId, (starts.get(e.data.frameId) ?? 0) + 1);
          }
          if (e.type === "frame.completed") completions.set(e.data.frameId, (completions.get(e.data.frameId) ?? 0) + 1);
        }
        // 0 duplicate frames: each of the run's 2 × TURNS + 1 frames completed exactly once.
        expect(completions.size, runId).toBe(2 * TURNS + 1);
        expect(
          [...completions.values()].every((n) => n === 1),
          runId,
        ).toBe(true);
        // Every execution had its own durable frame.started first (write-ahead): a second one
        // only for an attempt whose outcome the outage kept out of the journal.
        for (const [frameId, n] of starts) {
          const executed = executedBy.get(`${runId}/${frameId}`) ?? 0;
          expect(executed, `${runId}/${frameId} executions`).toBeGreaterThanOrEqual(1);
          expect(executed, `${runId}/${frameId} executions against its attempts`).toBeLessThanOrEqual(n);
          unknownReRuns += executed - 1;
        }
      }
      console.log(
        `restart: ${completedAtRestart.length}/${RUNS} runs completed and ${executedAtRestart} tool calls made at the restart; all ${RUNS} completed after it, ${unknownReRuns} executions re-run whose outcome the outage left unjournaled, none completed`,
      );
      await journal.close();
    } finally {
      for (const w of workers) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill("SIGKILL");
      await Promise.all(workers.map((w) => w.exited));
      await cluster("stop").catch(() => {});
      rmSync(dir, { recursive: true, force: true });
      rmSync(`${dir}.initdb.log`, { force: true });
    }
  }, 150_000);
});
