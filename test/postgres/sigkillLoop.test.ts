import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { readJournal } from "../../src/events/journal.ts";
import type { Journal } from "../../src/events/spi.ts";
import { openPostgresJournal, submitRun } from "../../src/postgres.ts";
import { restartLoop } from "./fixtures/restartWorker.ts";
import { dropSchema, freshSchema, PG_URL } from "./pg.ts";

/**
 * Worker processes SIGKILLed over and over while they run: a 500-turn run through 100 kills, then
 * a batch of 50 short runs through more. Every run completes, and no step whose completion was
 * journaled runs again (an execution whose completion a kill kept out of the journal may).
 *
 * Slow (minutes: each kill waits out the dead worker's lease), so it runs only with LOOM_SLOW=1
 * (and LOOM_PG_URL): `LOOM_SLOW=1 npx vitest run test/postgres/sigkillLoop.test.ts`.
 * LOOM_KILLS sets the kills of the long run (default 100).
 */

const SLOW = process.env.LOOM_SLOW === "1";
const LONG_TURNS = 500;
const LONG_KILLS = Number(process.env.LOOM_KILLS ?? 100);
const BATCH = 50;
const BATCH_TURNS = 3;
const BATCH_KILLS = 20;
const root = join(import.meta.dirname, "../..");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(what: string, check: () => Promise<boolean> | boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

interface Worker {
  readonly child: ChildProcess;
  readonly exited: Promise<unknown>;
  /** The `exec <run> <step>` lines it printed (one per execution of a tool or the model). */
  readonly execs: string[];
  /** When it last printed one (ms since the epoch; 0: never). */
  readonly lastAt: () => number;
  readonly err: () => string;
}

function spawnWorker(schema: string, turns: number): Worker {
  const child = spawn(process.execPath, ["--import", "tsx", "test/postgres/fixtures/restartWorker.ts"], {
    cwd: root,
    env: { ...process.env, LOOM_PG_SCHEMA: schema, LOOM_TURNS: String(turns), LOOM_STEP_MS: "5" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const execs: string[] = [];
  let rest = "";
  let err = "";
  let lastAt = 0;
  child.stdout?.on("data", (d) => {
    const parts = (rest + String(d)).split("\n");
    rest = parts.pop() ?? "";
    for (const l of parts) {
      if (!l.startsWith("exec ")) continue;
      execs.push(l.slice(5));
      lastAt = Date.now();
    }
  });
  child.stderr?.on("data", (d) => {
    err += String(d);
  });
  const exited = new Promise((resolve) => child.once("exit", resolve));
  return { child, exited, execs, lastAt: () => lastAt, err: () => err };
}

/**
 * Keeps two workers up and SIGKILLs the busiest (the one that executed most recently) `kills`
 * times, each after a few more executions, respawning it at once; then lets the runs finish.
 */
async function killLoop(
  journal: Journal,
  schema: string,
  turns: number,
  runIds: readonly string[],
  kills: number,
): Promise<{ executions: string[]; killed: number }> {
  const all: Worker[] = [];
  const live: Worker[] = [];
  const spawnOne = () => {
    const w = spawnWorker(schema, turns);
    all.push(w);
    live.push(w);
  };
  spawnOne();
  spawnOne();
  const total = () => all.reduce((n, w) => n + w.execs.length, 0);
  const completed = async () =>
    (await journal.store.listRuns()).filter((r) => runIds.includes(r.runId) && r.lastType === "run.completed").length;
  let killed = 0;
  try {
    while (killed < kills && (await completed()) < runIds.length) {
      const at = total() + 1 + Math.floor(Math.random() * 6);
      await until("the workers to go on", () => total() >= at, 60_000);
      // The busiest: the live worker whose last execution came last (it holds the run now).
      const busiest = live.reduce((a, b) => (b.lastAt() > a.lastAt() ? b : a));
      busiest.child.kill("SIGKILL");
      live.splice(live.indexOf(busiest), 1);
      killed++;
      spawnOne();
    }
    await until("every run to complete", async () => (await completed()) === runIds.length, 180_000).catch(
      (e: Error) => {
        throw new Error(`${e.message}; worker stderr:\n${all.map((w) => w.err()).join("\n")}`);
      },
    );
    for (const w of live) w.child.kill("SIGTERM");
    await Promise.all(all.map((w) => w.exited));
    return { executions: all.flatMap((w) => w.execs), killed };
  } finally {
    for (const w of all) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill("SIGKILL");
    await Promise.all(all.map((w) => w.exited));
  }
}

/** Checks each run: completed, each frame completed once, none started after it completed, no execution without its own start. */
async function expectNoCompletedStepReRun(
  journal: Journal,
  runIds: readonly string[],
  executions: readonly string[],
  turns: number,
) {
  const executed = new Map<string, number>();
  for (const x of executions) executed.set(x, (executed.get(x) ?? 0) + 1);
  let reRun = 0;
  for (const runId of runIds) {
    const entries = await readJournal(journal, runId); // validated: seqs in order, no gap
    expect(entries.at(-1), runId).toMatchObject({
      type: "run.completed",
      data: { output: { content: `done ${runId}` } },
    });
    const starts = new Map<string, number>();
    const completed = new Set<string>();
    for (const e of entries) {
      if (e.type === "frame.started") {
        expect(completed.has(e.data.frameId), `${runId}: ${e.data.frameId} started after it completed`).toBe(false);
        starts.set(e.data.frameId, (starts.get(e.data.frameId) ?? 0) + 1);
      }
      if (e.type === "frame.completed") {
        expect(completed.has(e.data.frameId), `${runId}: ${e.data.frameId} completed twice`).toBe(false);
        completed.add(e.data.frameId);
      }
    }
    expect(completed.size, runId).toBe(2 * turns + 1);
    // Each execution had a durable frame.started of its own first (write-ahead): a completed step
    // ran at most once per attempt the journal shows, and never after its completion.
    for (const [frameId, n] of starts) {
      const ran = executed.get(`${runId} ${frameId}`) ?? 0;
      expect(ran, `${runId}/${frameId}`).toBeGreaterThanOrEqual(1);
      expect(ran, `${runId}/${frameId} executions against its attempts`).toBeLessThanOrEqual(n);
      reRun += ran - 1;
    }
  }
  return reRun;
}

const schemas: string[] = [];
afterAll(async () => {
  for (const s of schemas) await dropSchema(s);
});

// Slow: runs only with LOOM_SLOW=1, and needs a PostgreSQL server (LOOM_PG_URL).
describe.skipIf(!SLOW || PG_URL === undefined)("PostgreSQL workers SIGKILLed over and over", () => {
  it(`a ${LONG_TURNS}-turn run through ${LONG_KILLS} kills completes, 0 completed steps re-run`, async () => {
    const schema = freshSchema("killloop");
    schemas.push(schema);
    const journal = openPostgresJournal(PG_URL as string, { schema });
    try {
      await journal.store.listRuns(); // the tables, before the workers start
      await submitRun(journal, { runId: "long", loop: restartLoop, input: "long" });
      const { executions, killed } = await killLoop(journal, schema, LONG_TURNS, ["long"], LONG_KILLS);
      const reRun = await expectNoCompletedStepReRun(journal, ["long"], executions, LONG_TURNS);
      expect(killed).toBe(LONG_KILLS);
      console.log(
        `sigkill loop: ${killed} kills over a ${LONG_TURNS}-turn run; completed; ${reRun} executions re-run whose completion a kill kept out of the journal, 0 completed steps re-run`,
      );
    } finally {
      await journal.close();
    }
  }, 1_800_000);

  it(`a batch of ${BATCH} runs of ${BATCH_TURNS} turns through ${BATCH_KILLS} kills all complete, 0 completed steps re-run`, async () => {
    const schema = freshSchema("killbatch");
    schemas.push(schema);
    const journal = openPostgresJournal(PG_URL as string, { schema });
    try {
      await journal.store.listRuns();
      const runIds = Array.from({ length: BATCH }, (_, i) => `short-${String(i).padStart(2, "0")}`);
      for (const runId of runIds) await submitRun(journal, { runId, loop: restartLoop, input: runId });
      const { executions, killed } = await killLoop(journal, schema, BATCH_TURNS, runIds, BATCH_KILLS);
      const reRun = await expectNoCompletedStepReRun(journal, runIds, executions, BATCH_TURNS);
      console.log(
        `sigkill loop: ${killed} kills over ${BATCH} runs of ${BATCH_TURNS} turns; all completed; ${reRun} executions re-run whose completion a kill kept out of the journal, 0 completed steps re-run`,
      );
    } finally {
      await journal.close();
    }
  }, 1_800_000);
});
