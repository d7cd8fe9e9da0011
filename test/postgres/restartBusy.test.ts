import { type ChildProcess, execFile, spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { rmSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { readJournal } from "../../src/events/journal.ts";
import type { JournalEntry } from "../../src/events/types.ts";
import { openPostgresJournal, submitRun } from "../../src/postgres.ts";
import { restartLoop } from "./fixtures/restartWorker.ts";

/**
 * The server stopped while two worker processes are each inside a tool call, and kept down past
 * their leases (the calls finish while there is no server to journal them to): a throwaway
 * cluster of the test's own (scripts/pg-test-cluster.sh on a free port and a fresh directory,
 * never the suites' shared one). Both workers stay up and go on once it is back, every run
 * completes, nothing journaled before the stop is lost, and no step whose completion was
 * journaled runs again.
 */

const root = join(import.meta.dirname, "../..");
const script = join(root, "scripts/pg-test-cluster.sh");
const RUNS = 4;
const TURNS = 4;
/** Each tool call's length: long enough that the stop lands inside calls on both workers. */
const STEP_MS = 800;
/** How long the server stays down: past the workers' 1.5 s leases, so every lease runs out meanwhile. */
const OUTAGE_MS = 3_000;
const run = promisify(execFile);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// Skipped when the PostgreSQL server binaries are not installed, or when run as root without a
// `postgres` user to run the server as: the test starts and stops a server of its own.
const probe = spawnSync("bash", [script, "url"], { encoding: "utf8" });
const rootWithoutUser =
  process.getuid?.() === 0 && spawnSync("id", ["postgres"], { encoding: "utf8" }).status !== 0
    ? "running as root with no 'postgres' user to run the server"
    : undefined;
const SKIP = probe.status !== 0 ? probe.stderr.trim() : rootWithoutUser;
if (SKIP !== undefined) console.log(`busy restart test skipped: ${SKIP}`);

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });

async function until(what: string, check: () => Promise<boolean> | boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

interface Worker {
  readonly child: ChildProcess;
  readonly ready: Promise<void>;
  readonly exited: Promise<unknown>;
  readonly lines: (prefix: string) => string[];
  readonly err: () => string;
}

function spawnWorker(url: string, schema: string): Worker {
  const child = spawn(process.execPath, ["--import", "tsx", "test/postgres/fixtures/restartWorker.ts"], {
    cwd: root,
    env: {
      ...process.env,
      LOOM_PG_URL: url,
      LOOM_PG_SCHEMA: schema,
      LOOM_TURNS: String(TURNS),
      LOOM_STEP_MS: String(STEP_MS),
      LOOM_CONCURRENCY: "2",
    },
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
  const lines = (prefix: string) =>
    out.split("\n").flatMap((l) => (l.startsWith(`${prefix} `) ? [l.slice(prefix.length + 1)] : []));
  return { child, ready, exited, lines, err: () => err };
}

/** The tool calls a worker is inside now: begun, not yet finished. */
const inside = (w: Worker) => {
  const done = new Set(w.lines("exec"));
  return w.lines("begin").filter((x) => !done.has(x));
};

const port = SKIP === undefined ? await freePort() : 0;
const dir = `/tmp/loom-pg-busy-${randomBytes(4).toString("hex")}`;
const env = { ...process.env, LOOM_PG_PORT: String(port), LOOM_PG_DIR: dir };
const cluster = async (verb: "start" | "stop") => (await run("bash", [script, verb], { env })).stdout.trim();
afterAll(async () => {
  if (SKIP !== undefined) return;
  await cluster("stop").catch(() => {});
  rmSync(dir, { recursive: true, force: true });
  rmSync(`${dir}.initdb.log`, { force: true });
});

describe.skipIf(SKIP !== undefined)("a PostgreSQL restart with two workers inside tool calls", () => {
  it(`${RUNS} runs through 2 busy workers, the server down ${OUTAGE_MS} ms: all complete, nothing lost, 0 completed steps re-run`, async () => {
    const workers: Worker[] = [];
    try {
      const url = await cluster("start");
      const schema = "loom_restart_busy";
      let journal = openPostgresJournal(url, { schema });
      await journal.store.listRuns(); // creates the schema and Loom's tables
      for (let i = 0; i < 2; i++) workers.push(spawnWorker(url, schema));
      await Promise.all(workers.map((w) => w.ready));
      const runIds = Array.from({ length: RUNS }, (_, i) => `busy-${i}`);
      for (const runId of runIds) await submitRun(journal, { runId, loop: restartLoop, input: runId });

      // Both workers inside a tool call, past their first turn: the stop lands mid-call on each.
      await until(
        "both workers to be inside a tool call of a later turn",
        () => workers.every((w) => w.lines("exec").length >= 2 && inside(w).length > 0),
        60_000,
      );
      const before = new Map<string, readonly JournalEntry[]>();
      for (const runId of runIds) before.set(runId, await readJournal(journal, runId));
      await journal.close();
      const busyAtStop = workers.map((w) => inside(w).length);
      await cluster("stop"); // fast shutdown: every connection is cut
      await sleep(OUTAGE_MS); // the calls finish meanwhile, with nowhere to journal them
      const finishedInOutage = workers.flatMap((w) => w.lines("exec")).length;
      await cluster("start");

      journal = openPostgresJournal(url, { schema });
      await until(
        "every run to complete after the restart",
        async () => (await journal.store.listRuns()).filter((r) => r.lastType === "run.completed").length === RUNS,
        90_000,
      ).catch((e: Error) => {
        throw new Error(`${e.message}; worker stderr:\n${workers.map((w) => w.err()).join("\n")}`);
      });
      // Recovered: both workers are still up, and take the stop request as usual.
      expect(workers.map((w) => w.child.exitCode)).toEqual([null, null]);
      for (const w of workers) w.child.kill("SIGTERM");
      await Promise.all(workers.map((w) => w.exited));
      expect(workers.map((w) => w.child.exitCode)).toEqual([0, 0]);

      const executions = new Map<string, number>();
      for (const x of workers.flatMap((w) => w.lines("exec"))) executions.set(x, (executions.get(x) ?? 0) + 1);
      let reRunUnjournaled = 0;
      for (const runId of runIds) {
        const entries = await readJournal(journal, runId);
        const kept = before.get(runId) ?? [];
        // Nothing lost: what was journaled before the stop is the start of the run's journal, byte for byte.
        expect(JSON.stringify(entries.slice(0, kept.length)), `${runId} kept its entries`).toBe(JSON.stringify(kept));
        expect(entries.at(-1), runId).toMatchObject({
          type: "run.completed",
          data: { output: { content: `done ${runId}` } },
        });
        const completed = new Set<string>();
        for (const e of entries) {
          if (e.type === "frame.started") {
            expect(completed.has(e.data.frameId), `${runId}: ${e.data.frameId} started again after it completed`).toBe(
              false,
            );
          }
          if (e.type === "frame.completed") {
            expect(completed.has(e.data.frameId), `${runId}: ${e.data.frameId} completed twice`).toBe(false);
            completed.add(e.data.frameId);
          }
        }
        expect(completed.size, runId).toBe(2 * TURNS + 1);
        // A step whose completion was journaled before the stop ran once; only a call the outage
        // kept out of the journal may run again.
        for (const e of kept) {
          if (e.type === "frame.completed")
            expect(executions.get(`${runId} ${e.data.frameId}`), e.data.frameId).toBe(1);
        }
        for (const [x, n] of executions) if (x.startsWith(`${runId} `)) reRunUnjournaled += n - 1;
      }
      expect(busyAtStop.every((n) => n > 0)).toBe(true);
      console.log(
        `busy restart: 1 stop of ${OUTAGE_MS} ms with ${busyAtStop.join(" + ")} tool calls in flight on 2 workers (${finishedInOutage} executions done by the end of the outage); all ${RUNS} runs completed, ${reRunUnjournaled} executions re-run whose completion the outage kept out of the journal, 0 completed steps re-run`,
      );
      await journal.close();
    } finally {
      for (const w of workers) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill("SIGKILL");
      await Promise.all(workers.map((w) => w.exited));
    }
  }, 180_000);
});
