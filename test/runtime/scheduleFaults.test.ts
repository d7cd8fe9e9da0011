import { readFileSync, writeFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openSqliteJournal } from "../../src/events/journal.ts";
import { tempDir } from "../events/tmp.ts";
import { startWorker, type Worker } from "../support/processes.ts";

/**
 * Faults around the embedded scheduler on SQLite: 50 ticks of an every-second schedule read from a
 * clock the test sets, fired by a chain of processes, each SIGKILLed while a tick's run waits on
 * its model; one of them reads a clock 30 s ahead. Each tick must be fired once, its run started
 * once and completed (a run the kill cut off is finished by the next process), and no tick fired
 * after its time by the process whose clock is right.
 */

const SCRIPT = "test/runtime/workers/scheduleProcess.ts";
const T0 = Date.UTC(2026, 0, 1);
const TICKS = 50;
const SKEW = 30_000;
const HOLD_MS = 150;
const tick = (second: number) => `tick@${new Date(T0 + second * 1000).toISOString()}`;

let tmp: ReturnType<typeof tempDir>;
beforeAll(() => {
  tmp = tempDir("loom-schedule-faults-");
});
afterAll(() => tmp.remove());

async function until(what: string, check: () => Promise<boolean>, ms = 20_000) {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe("schedules on SQLite with workers killed mid-tick and a clock 30 s ahead", () => {
  it(`fires each of ${TICKS} ticks once, and each tick's run starts once and completes`, async () => {
    const db = tmp.file("loom.db");
    const clock = tmp.file("clock");
    const execLog = tmp.file("executions");
    writeFileSync(execLog, "");
    const setClock = (second: number) => writeFileSync(clock, String(T0 + second * 1000));
    const journal = openSqliteJournal(db);
    const lastTypes = async () =>
      new Map((await journal.store.listRuns({ prefix: "tick@" })).map((r) => [r.runId, r.lastType]));
    const workers: Worker[] = [];
    const start = async (skewMs: number) => {
      const w = startWorker(SCRIPT, [db, clock, String(skewMs), String(T0 + 1000), execLog, String(HOLD_MS)]);
      workers.push(w);
      await w.waitFor((l) => l === "ready", `worker ${workers.length} ready`, 60_000);
      return w;
    };
    // At each of these seconds the process looking is SIGKILLed while the run of the tick it just
    // fired waits on its model; the next one starts with the clock skew given.
    const kills = new Map([
      [7, 0],
      [14, SKEW], // the next process reads a clock 30 s ahead: it fires ticks 15 to 44 at once
      [17, 0], // killed mid-tick 47 (its clock says 47), then a process with the right clock, which waits for 48
      [49, 0],
    ]);
    let skew = 0;
    let current: Worker | undefined;
    try {
      setClock(0);
      current = await start(0);
      for (let second = 1; second <= TICKS; second++) {
        setClock(second);
        const fired = second + skew / 1000;
        if (kills.has(second)) {
          const w = current;
          await w.waitFor((l) => l === `calling ${new Date(T0 + fired * 1000).toISOString()}`, `tick ${fired} called`);
          w.child.kill("SIGKILL");
          expect((await w.exited).signal).toBe("SIGKILL");
          skew = kills.get(second) as number;
          current = await start(skew);
        } else {
          await until(
            `${tick(second)} completed`,
            async () => (await lastTypes()).get(tick(second)) === "run.completed",
          );
        }
      }
      await until(`${TICKS} runs completed`, async () => {
        const types = [...(await lastTypes()).values()];
        return types.length >= TICKS && types.every((t) => t === "run.completed");
      });
      current.child.kill("SIGTERM");
      expect(await current.exited).toEqual({ code: 0, signal: null });
    } finally {
      for (const w of workers) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill("SIGKILL");
    }

    const expected = Array.from({ length: TICKS }, (_, i) => tick(i + 1));
    for (const w of workers) expect(w.stderr()).toBe("");
    // Each tick fired by one process, once; the runs the kills cut off resumed by the next process.
    const fired = workers.flatMap((w) => w.lines.filter((l) => l.startsWith("fired ")).map((l) => l.slice(6)));
    expect(fired.sort()).toEqual(expected);
    // The process whose clock ran 30 s ahead fired ticks early (15 to 47), each once all the same.
    expect(workers[2]?.lines.filter((l) => l.startsWith("fired ")).length).toBe(33);
    const resumed = workers.flatMap((w) => w.lines.filter((l) => l.startsWith("resumed ")).map((l) => l.slice(8)));
    expect(resumed).toEqual(expect.arrayContaining([tick(7), tick(14), tick(47), tick(49)]));
    // One run per tick, started once, completed once.
    expect([...(await lastTypes()).keys()].sort()).toEqual(expected);
    for (const runId of expected) {
      const types = (await journal.store.read(runId)).map((e) => e.type);
      expect(
        types.filter((t) => t === "run.started"),
        runId,
      ).toHaveLength(1);
      expect(
        types.filter((t) => t === "run.completed"),
        runId,
      ).toHaveLength(1);
    }
    // The model was asked once per tick, and again only after a kill cut a call off: every call of
    // a tick but its last was made by a process that was then killed.
    const killed = new Set(workers.filter((w) => w !== current).map((w) => String(w.child.pid)));
    const calls = readFileSync(execLog, "utf8")
      .trim()
      .split("\n")
      .map((line) => ({ runId: `tick@${line.split(" ")[0]}`, pid: line.split(" ")[1] as string }));
    expect([...new Set(calls.map((c) => c.runId))].sort()).toEqual(expected);
    for (const runId of expected) {
      const pids = calls.filter((c) => c.runId === runId).map((c) => c.pid);
      expect(
        pids.slice(0, -1).every((pid) => killed.has(pid)),
        `${runId} called by ${pids.join(", ")}`,
      ).toBe(true);
    }
    await journal.close();
  }, 180_000);
});
