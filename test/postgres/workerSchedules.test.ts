import { afterEach, describe, expect, it } from "vitest";
import { isAgentLoopConfigError } from "../../src/core/errors.ts";
import { readJournal } from "../../src/events/journal.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { openPostgresJournal, startWorker, type Worker } from "../../src/postgres.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import type { FiredTick } from "../../src/runtime/run/runSchedules.ts";
import { schedule } from "../../src/runtime/run/schedule.ts";
import { dropSchema, freshSchema, PG_URL, sleep, sql, until } from "./pg.ts";

const T0 = Date.UTC(2026, 0, 1);
const TICKS = 20;
const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A loop whose model records each call's user input: one entry per tick it ran. */
function tickerLoop() {
  const inputs: string[] = [];
  const loop = agentLoop$({
    id: "ticker",
    model: scriptedModel(async ({ messages }) => {
      const first = messages.find((m) => m.role === "user");
      inputs.push(first?.role === "user" ? String(first.content) : "?");
      return { content: "ok", toolCalls: [] };
    }),
  });
  return { loop, inputs };
}

const scheduleRuns = async (schema: string) =>
  (
    await sql<{ run_id: string }>(`SELECT run_id FROM "${schema}".loom_runs WHERE run_id LIKE 'tick@%' ORDER BY run_id`)
  ).map((r) => r.run_id);

describe.skipIf(PG_URL === undefined)("startWorker({ schedules })", () => {
  it(`3 workers firing the same schedule run each of ${TICKS} ticks once, and fire nothing once stopped`, async () => {
    const url = PG_URL as string;
    const schema = freshSchema("workersched");
    const { loop, inputs } = tickerLoop();
    const ticks = schedule({
      id: "tick",
      cron: "* * * * * *",
      loop,
      input: (t) => t.toISOString(),
      missed: "all",
      startAt: new Date(T0 + 1000),
    });
    let clock = T0;
    const fired: FiredTick[] = [];
    const journals = Array.from({ length: 3 }, () => openPostgresJournal(url, { schema, pool: { max: 4 } }));
    cleanups.push(
      () => dropSchema(schema),
      () => Promise.all(journals.map((j) => j.close())),
    );
    await journals[0]?.store.listRuns(); // the tables exist before three pools race to make them
    const errors: unknown[] = [];
    const workers: Worker[] = journals.map((journal) =>
      startWorker({
        journal,
        loops: { ticker: loop },
        schedules: [ticks],
        scheduleNow: () => new Date(clock),
        pollMs: 10,
        onTicks: (r) => fired.push(...r.fired),
        onError: (e) => errors.push(e),
      }),
    );
    cleanups.push(() => Promise.all(workers.map((w) => w.stop({ abort: true }))));

    const expected = Array.from({ length: TICKS }, (_, i) => `tick@${new Date(T0 + (i + 1) * 1000).toISOString()}`);
    for (let second = 1; second <= TICKS; second++) {
      clock = T0 + second * 1000;
      const runId = expected[second - 1] as string;
      await until(`${runId} fired`, async () => (await scheduleRuns(schema)).includes(runId), 30_000);
    }
    const journal = journals[0]!;
    const ended = async () => {
      let n = 0;
      for (const runId of expected) if ((await readJournal(journal, runId)).at(-1)?.type === "run.completed") n++;
      return n;
    };
    await until(`${TICKS} runs completed`, async () => (await ended()) === TICKS, 60_000);

    // Each tick was handed over by one worker and ran once: one model call each, with its tick.
    expect(fired.map((f) => f.runId).sort()).toEqual(expected);
    expect(await scheduleRuns(schema)).toEqual(expected);
    expect(inputs.map((i) => `tick@${i}`).sort()).toEqual(expected);
    expect(errors).toEqual([]);

    // Stopped workers fire no more ticks, though the clock goes on.
    await Promise.all(workers.map((w) => w.stop()));
    clock = T0 + (TICKS + 5) * 1000;
    await sleep(200);
    expect(await scheduleRuns(schema)).toEqual(expected);
    expect(await sql(`SELECT cursor_ms::text FROM "${schema}".loom_schedules`)).toEqual([
      { cursor_ms: String(T0 + TICKS * 1000) },
    ]);
  }, 120_000);

  it("refuses a schedule whose loop the worker cannot run, naming the schedule and the fix", () => {
    const schema = freshSchema("workerschedbad");
    const journal = openPostgresJournal(PG_URL as string, { schema });
    cleanups.push(
      () => dropSchema(schema),
      () => journal.close(),
    );
    const { loop } = tickerLoop();
    const other = agentLoop$({ id: "other", model: scriptedModel(async () => ({ content: "ok", toolCalls: [] })) });
    const s = schedule({ id: "tick", cron: "* * * * * *", loop, input: (t) => t.toISOString() });
    let caught: unknown;
    try {
      startWorker({ journal, loops: { other }, schedules: [s] });
    } catch (e) {
      caught = e;
    }
    expect(isAgentLoopConfigError(caught)).toBe(true);
    expect((caught as { code: string }).code).toBe("workerLoops");
    expect((caught as Error).message).toContain('schedule "tick"');
    expect((caught as Error).message).toContain('add loops["ticker"]');
  });
});
