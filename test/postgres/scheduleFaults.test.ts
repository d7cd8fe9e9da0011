import { writeFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import type { Worker } from "../support/processes.ts";
import { cleanAfterEach, PG_URL, processScene, sql, until } from "./pg.ts";

/**
 * Faults around schedules on PostgreSQL: two worker processes, each given the every-second schedule
 * read from a clock the test sets, over 50 ticks. Some are SIGKILLed while a tick's run waits on
 * its model (a replacement starts), and for a while one reads a clock 30 s ahead. Each tick must
 * be fired by one process, its run started once and completed once (a run the kill cut off is
 * taken over by the other worker when its lease runs out).
 */

const T0 = Date.UTC(2026, 0, 1);
const TICKS = 50;
const SKEW = 30_000;
const FIXTURE = "test/postgres/fixtures/scheduleFaults.ts";
const tick = (second: number) => `tick@${new Date(T0 + second * 1000).toISOString()}`;
const cleanups = cleanAfterEach();

describe.skipIf(PG_URL === undefined)(
  "schedules on PostgreSQL with workers killed mid-tick and a clock 30 s ahead",
  () => {
    it(`two workers fire each of ${TICKS} ticks once; each run starts once and completes once`, async () => {
      const { schema, dir, journal, processes, spawn } = processScene("schedfaults", cleanups);
      const clock = dir.file("clock");
      const setClock = (second: number) => writeFileSync(clock, String(T0 + second * 1000));
      await journal.store.listRuns(); // creates the schema and Loom's tables
      await sql(
        `CREATE TABLE "${schema}".executions (id serial PRIMARY KEY, input text NOT NULL, pid integer NOT NULL)`,
      );
      const start = async (skewMs: number) => {
        const p = spawn(FIXTURE, [schema, clock, String(skewMs), String(T0 + 1000), "150"]);
        await p.waitFor((l) => l === "ready", `worker ${processes.length} ready`, 60_000);
        return p;
      };
      const lastType = async (runId: string) =>
        (await journal.store.listRuns({ prefix: runId })).find((r) => r.runId === runId)?.lastType;
      const kill = async (p: Worker) => {
        p.child.kill("SIGKILL");
        expect((await p.exited).signal).toBe("SIGKILL");
      };

      setClock(0);
      const live: Worker[] = [await start(0), await start(0)];
      let ahead: Worker | undefined;
      for (let second = 1; second <= TICKS; second++) {
        setClock(second);
        if (second === 8 || second === 15 || second === TICKS) {
          // The worker running this tick is killed while its model call waits; one takes its place.
          const calling = `calling ${new Date(T0 + second * 1000).toISOString()}`;
          await until(`${tick(second)} called`, () => live.some((p) => p.lines.includes(calling)), 30_000);
          const victim = live.find((p) => p.lines.includes(calling)) as Worker;
          await kill(victim);
          const next = await start(second === 15 ? SKEW : 0); // after 15: one reads a clock 30 s ahead
          if (second === 15) ahead = next;
          live.splice(live.indexOf(victim), 1, next);
        } else if (second === 19 && ahead !== undefined) {
          // By its clock it is 49 s: it goes (killed wherever it stands) before its clock passes the last tick.
          await until(`${tick(49)} fired`, () => ahead?.lines.includes(`fired ${tick(49)}`) ?? false, 30_000);
          await kill(ahead);
          live.splice(live.indexOf(ahead), 1, await start(0));
        }
        if (second !== TICKS) {
          await until(
            `${tick(second)} completed`,
            async () => (await lastType(tick(second))) === "run.completed",
            30_000,
          );
        }
      }
      const completed = async () =>
        (
          await sql<{ n: number }>(
            `SELECT count(*)::int AS n FROM "${schema}".loom_journal WHERE type = 'run.completed' AND run_id LIKE 'tick@%'`,
          )
        )[0]?.n;
      await until(`${TICKS} runs completed`, async () => (await completed()) === TICKS, 60_000);
      const exits = live.map((p) => {
        p.child.kill("SIGTERM");
        return p.exited;
      });
      expect(await Promise.all(exits)).toEqual(live.map(() => ({ code: 0, signal: null })));

      const expected = Array.from({ length: TICKS }, (_, i) => tick(i + 1));
      // Each tick was fired by one process, once, whatever the kills and the clock ahead.
      const fired = processes.flatMap((p) => p.lines.filter((l) => l.startsWith("fired ")).map((l) => l.slice(6)));
      expect(fired.sort()).toEqual(expected);
      const counts = await sql<{ run_id: string; started: number; completed: number }>(
        `SELECT run_id, count(*) FILTER (WHERE type = 'run.started')::int AS started,
              count(*) FILTER (WHERE type = 'run.completed')::int AS completed
         FROM "${schema}".loom_journal WHERE run_id LIKE 'tick@%' GROUP BY run_id ORDER BY run_id`,
      );
      expect(counts).toEqual(expected.map((run_id) => ({ run_id, started: 1, completed: 1 })));
      // The model was asked once per tick, and again only after a kill cut a call off: every call of
      // a tick but its last was made by a process that was then killed.
      const killed = new Set(processes.filter((p) => !live.includes(p)).map((p) => p.child.pid));
      const calls = await sql<{ input: string; pid: number }>(
        `SELECT input, pid FROM "${schema}".executions ORDER BY id`,
      );
      expect([...new Set(calls.map((c) => `tick@${c.input}`))].sort()).toEqual(expected);
      for (const runId of expected) {
        const pids = calls.filter((c) => `tick@${c.input}` === runId).map((c) => c.pid);
        expect(
          pids.slice(0, -1).every((pid) => killed.has(pid)),
          `${runId} called by ${pids.join(", ")}`,
        ).toBe(true);
      }
      expect(await sql(`SELECT cursor_ms::text FROM "${schema}".loom_schedules`)).toEqual([
        { cursor_ms: String(T0 + TICKS * 1000) },
      ]);
    }, 240_000);
  },
);
