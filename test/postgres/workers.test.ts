import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readJournal } from "../../src/events/journal.ts";
import { openPostgresJournal, submitRun } from "../../src/postgres.ts";
import { SLOW_RUN, SLOW_STEP, workerLoop } from "./fixtures/loop.ts";
import { dropSchema, freshSchema, PG_URL, sql } from "./pg.ts";

const root = join(import.meta.dirname, "../..");
const RUNS = 50;

interface Spawned {
  readonly child: ChildProcess;
  readonly ready: Promise<void>;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  readonly stderr: () => string;
  readonly stdout: () => string;
}

function spawnWorker(index: number, schema: string, env: Record<string, string> = {}): Spawned {
  const child = spawn(process.execPath, ["--import", "tsx", "test/postgres/fixtures/worker.ts"], {
    cwd: root,
    env: { ...process.env, LOOM_PG_SCHEMA: schema, LOOM_WORKER: String(index), LOOM_LEASE_MS: "1500", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  child.stdout?.on("data", (d) => {
    stdout += String(d);
  });
  let stderr = "";
  child.stderr?.on("data", (d) => {
    stderr += String(d);
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  const ready = new Promise<void>((resolve, reject) => {
    child.stdout?.on("data", (d) => {
      if (String(d).includes("ready")) resolve();
    });
    void exited.then(({ code }) =>
      reject(new Error(`worker ${index} exited (${code}) before it was ready: ${stderr}`)),
    );
  });
  return { child, ready, exited, stderr: () => stderr, stdout: () => stdout };
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, ms: number): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

// Skipped without LOOM_PG_URL (store.test.ts prints the one line saying so): workers need a server.
describe.skipIf(PG_URL === undefined)("startWorker, across processes", () => {
  it("4 worker processes finish 50 runs, each frame journaled once, while one is SIGKILLed inside a tool", async () => {
    const url = PG_URL as string;
    const schema = freshSchema("workers");
    const journal = openPostgresJournal(url, { schema });
    const workers: Spawned[] = [];
    try {
      await journal.store.listRuns(); // creates the schema and Loom's tables
      await sql(
        `CREATE TABLE "${schema}".executions (id serial PRIMARY KEY, run_id text NOT NULL, step_id text NOT NULL, pid integer NOT NULL)`,
      );
      for (let i = 0; i < 4; i++) workers.push(spawnWorker(i, schema));
      await Promise.all(workers.map((w) => w.ready));

      const loop = workerLoop(async () => {
        throw new Error("the test process submits runs; workers run them");
      });
      const runIds = Array.from({ length: RUNS }, (_, i) => `run-${String(i).padStart(2, "0")}`);
      for (const runId of runIds)
        expect(await submitRun(journal, { runId, loop, input: runId })).toEqual({ started: true });

      // The slow step's first attempt sleeps: its worker is inside the tool when it is killed.
      const victimPid = await until(
        "the slow step to start",
        async () =>
          (
            await sql<{ pid: number }>(`SELECT pid FROM "${schema}".executions WHERE run_id = $1 AND step_id = $2`, [
              SLOW_RUN,
              SLOW_STEP,
            ])
          )[0]?.pid,
        30_000,
      );
      const victim = workers.find((w) => w.child.pid === victimPid);
      expect(victim, "the slow step runs in one of the worker processes").toBeDefined();
      victim!.child.kill("SIGKILL");
      expect(await victim!.exited).toEqual({ code: null, signal: "SIGKILL" });

      const completed = async () => {
        const runs = await journal.store.listRuns();
        return runs.filter((r) => r.lastType === "run.completed").length === RUNS ? runs : undefined;
      };
      const runs = await until("every run to complete", completed, 40_000).catch((e: Error) => {
        throw new Error(`${e.message}; worker stderr:\n${workers.map((w) => w.stderr()).join("\n")}`);
      });
      expect(runs.map((r) => r.runId)).toEqual(runIds);

      // The killed worker's rows run out; a run it had completed just before dying is swept off the queue.
      await until(
        "the queue to empty",
        async () => ((await sql(`SELECT run_id FROM "${schema}".loom_leases`)).length === 0 ? true : undefined),
        10_000,
      );
      const others = workers.filter((w) => w !== victim);
      for (const w of others) w.child.kill("SIGTERM");
      expect(await Promise.all(others.map((w) => w.exited))).toEqual(others.map(() => ({ code: 0, signal: null })));

      // No frame journaled twice; every completed tool frame's tool ran once, but the killed one twice.
      const toolFrames: string[] = [];
      const recordedPid = new Map<string, number>(); // the process whose execution the frame records
      const starts = new Map<string, number>(); // frame.started entries per run/frame: one per attempt
      for (const runId of runIds) {
        const entries = await readJournal(journal, runId);
        const completions = new Map<string, number>();
        for (const e of entries) {
          if (e.type === "frame.started") {
            const key = `${runId}/${e.data.frameId}`;
            starts.set(key, (starts.get(key) ?? 0) + 1);
          }
          if (e.type !== "frame.completed") continue;
          completions.set(e.data.frameId, (completions.get(e.data.frameId) ?? 0) + 1);
          if (!e.data.frameId.includes(":tool:")) continue;
          toolFrames.push(`${runId}/${e.data.frameId}`);
          recordedPid.set(`${runId}/${e.data.frameId}`, (e.data.output as { pid: number }).pid);
        }
        expect(
          [...completions.values()].every((n) => n === 1),
          runId,
        ).toBe(true);
        expect(completions.size, runId).toBe(6); // 3 model frames, 3 tool frames
        expect(entries.at(-1)).toMatchObject({ type: "run.completed", data: { output: { content: `done ${runId}` } } });
      }
      const executions = await sql<{ run_id: string; step_id: string; pid: number }>(
        `SELECT run_id, step_id, pid FROM "${schema}".executions ORDER BY id`,
      );
      const pidsByStep = new Map<string, number[]>();
      for (const x of executions) {
        const key = `${x.run_id}/${x.step_id}`;
        pidsByStep.set(key, [...(pidsByStep.get(key) ?? []), x.pid]);
      }
      expect([...pidsByStep.keys()].sort()).toEqual([...toolFrames].sort());
      // Twice only for a tool the killed worker was inside (the slow one, and any other it had in
      // flight): its attempt never reached the journal, another worker's did, with the same stepId.
      expect(pidsByStep.get(`${SLOW_RUN}/${SLOW_STEP}`)?.length).toBe(2);
      for (const [key, pids] of pidsByStep) {
        // Each execution was preceded by its own fenced frame.started (a retry journals a new attempt);
        // one more only if the killed worker died between an attempt's append and its tool.
        expect(starts.get(key), key).toBeGreaterThanOrEqual(pids.length);
        expect(starts.get(key), key).toBeLessThanOrEqual(pids.length + 1);
        const journaled = recordedPid.get(key);
        if (pids.length === 1) expect(journaled, key).toBe(pids[0]);
        else {
          expect(pids.length, key).toBe(2);
          expect(pids[0], key).toBe(victimPid);
          expect(pids[1], key).not.toBe(victimPid);
          expect(journaled, key).toBe(pids[1]);
        }
      }
    } finally {
      for (const w of workers) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill("SIGKILL");
      await Promise.all(workers.map((w) => w.exited));
      await journal.close();
      await dropSchema(schema);
    }
  }, 90_000);
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.skipIf(PG_URL === undefined)("startWorker, a worker paused past its lease", () => {
  it("runs no model or tool call once its successor has the run (SIGSTOP 5 s, lease 2 s): its append is refused", async () => {
    const url = PG_URL as string;
    const schema = freshSchema("paused");
    const journal = openPostgresJournal(url, { schema });
    const workers: Spawned[] = [];
    const env = { LOOM_LEASE_MS: "2000", LOOM_RECORD_MODEL: "1" };
    try {
      await journal.store.listRuns();
      await sql(
        `CREATE TABLE "${schema}".executions (id serial PRIMARY KEY, run_id text NOT NULL, step_id text NOT NULL, pid integer NOT NULL)`,
      );
      const executions = () =>
        sql<{ step_id: string; pid: number }>(`SELECT step_id, pid FROM "${schema}".executions ORDER BY id`);
      // 1. A worker is killed inside the slow step: the run is left with a step whose outcome is unknown.
      const killed = spawnWorker(0, schema, env);
      workers.push(killed);
      await killed.ready;
      const loop = workerLoop(async () => {
        throw new Error("the test process submits runs; workers run them");
      });
      await submitRun(journal, { runId: SLOW_RUN, loop, input: SLOW_RUN });
      await until(
        "the slow step to start",
        async () => ((await executions()).some((x) => x.step_id === SLOW_STEP) ? true : undefined),
        20_000,
      );
      killed.child.kill("SIGKILL");
      await killed.exited;

      // 2. The next worker takes the run over, reads it, and stalls (SIGSTOP) before re-running the step.
      const paused = spawnWorker(1, schema, { ...env, LOOM_PAUSE_ON_OPEN_FRAME: "1" });
      workers.push(paused);
      await until("the worker to pause", async () => (paused.stdout().includes("paused") ? true : undefined), 20_000);
      const pausedAt = Date.now();

      // 3. Its lease runs out; a third worker takes the run and completes it.
      const successor = spawnWorker(2, schema, env);
      workers.push(successor);
      await until(
        "the successor to complete the run",
        async () =>
          (await journal.store.listRuns()).find((r) => r.runId === SLOW_RUN)?.lastType === "run.completed"
            ? true
            : undefined,
        30_000,
      );
      const completedAfterMs = Date.now() - pausedAt;
      const before = await journal.store.read(SLOW_RUN);

      // 4. The paused worker wakes after 5 s and goes on where it stood.
      await sleep(pausedAt + 5_000 - Date.now());
      paused.child.kill("SIGCONT");
      const stoppedMs = Date.now() - pausedAt;
      await sleep(2_000);
      for (const w of [paused, successor]) w.child.kill("SIGTERM");
      expect(await Promise.all([paused.exited, successor.exited])).toEqual([
        { code: 0, signal: null },
        { code: 0, signal: null },
      ]);

      const ran = await executions();
      const byPaused = ran.filter((x) => x.pid === paused.child.pid);
      expect(byPaused, "effects the paused worker ran").toEqual([]);
      expect(await journal.store.read(SLOW_RUN)).toEqual(before); // it appended nothing either
      const entries = await readJournal(journal, SLOW_RUN);
      expect(entries.at(-1)).toMatchObject({ type: "run.completed" });
      const bySuccessor = ran.filter((x) => x.pid === successor.child.pid).map((x) => x.step_id);
      expect(bySuccessor).toContain(SLOW_STEP); // the step cut off by the kill ran again, once, there
      console.log(
        `paused worker: stopped ${stoppedMs} ms with a 2000 ms lease; the successor completed the run ${completedAfterMs} ms into the pause; effects by the paused worker after SIGCONT: ${byPaused.length} (of ${ran.length} in all)`,
      );
    } finally {
      for (const w of workers) {
        if (w.child.exitCode === null && w.child.signalCode === null) {
          w.child.kill("SIGCONT");
          w.child.kill("SIGKILL");
        }
      }
      await Promise.all(workers.map((w) => w.exited));
      await journal.close();
      await dropSchema(schema);
    }
  }, 90_000);
});
