import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { scriptedModel } from "../../src/models/scripted.ts";
import { isNotPostgresJournalError } from "../../src/postgres/errors.ts";
import { fireDueOnPostgres, openPostgresJournal, POSTGRES_SCHEMA_VERSION } from "../../src/postgres.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { type MissedTicks, schedule } from "../../src/runtime/run/schedule.ts";
import { loom } from "../cli/support.ts";
import { jsonJournal } from "../support/loop.ts";
import { cleanAfterEach, dropSchema, freshSchema, PG_URL, processScene, sql, until } from "./pg.ts";

const T0 = Date.UTC(2026, 0, 1);
const TICKS = 50;
const loop = agentLoop$({ id: "ticker", model: scriptedModel(async () => ({ content: "ok", toolCalls: [] })) });
const cleanups = cleanAfterEach();

/** Run ids in the journal that are runs of schedule `id`, sorted. */
const scheduled = async (schema: string, id: string) =>
  (
    await sql<{ run_id: string }>(`SELECT run_id FROM "${schema}".loom_runs WHERE run_id LIKE $1 ORDER BY run_id`, [
      `${id}@%`,
    ])
  ).map((r) => r.run_id);

describe.skipIf(PG_URL === undefined)("schedules on PostgreSQL", () => {
  it(`4 worker processes, 2 given the schedule and 2 with a scheduler beside, fire each of ${TICKS} ticks exactly once`, async () => {
    const { schema, dir, journal, processes, spawn } = processScene("schedules", cleanups);
    const clock = dir.file("clock");
    const setClock = (ms: number) => writeFileSync(clock, String(ms));
    await journal.store.listRuns(); // creates the schema and Loom's tables
    await sql(`CREATE TABLE "${schema}".executions (id serial PRIMARY KEY, input text NOT NULL, pid integer NOT NULL)`);
    setClock(T0); // before the first tick
    for (let i = 0; i < 4; i++)
      spawn("test/postgres/fixtures/scheduler.ts", [
        schema,
        clock,
        String(T0 + 1000),
        i % 2 === 0 ? "worker" : "scheduler", // startWorker({ schedules }), or startScheduler beside startWorker
      ]);
    await Promise.all(processes.map((p, i) => p.waitFor((l) => l === "ready", `process ${i} ready`, 60_000)));

    // The clock moves one second at a time; the 4 schedulers look every 10 ms, all at the same tick.
    for (let second = 1; second <= TICKS; second++) {
      setClock(T0 + second * 1000);
      const runId = `tick@${new Date(T0 + second * 1000).toISOString()}`;
      await until(`${runId} submitted`, async () => (await scheduled(schema, "tick")).includes(runId), 30_000);
    }
    const completed = async () =>
      Number(
        (
          await sql<{ n: string }>(
            `SELECT count(*) AS n FROM "${schema}".loom_journal WHERE type = 'run.completed' AND run_id LIKE 'tick@%'`,
          )
        )[0]?.n,
      );
    await until(`${TICKS} runs completed`, async () => (await completed()) === TICKS, 60_000);
    const exits = processes.map((p) => {
      p.child.kill("SIGTERM");
      return p.exited;
    });
    expect(await Promise.all(exits)).toEqual(processes.map(() => ({ code: 0, signal: null })));

    const expected = Array.from({ length: TICKS }, (_, i) => `tick@${new Date(T0 + (i + 1) * 1000).toISOString()}`);
    // Each tick was submitted by exactly one process (no tick fired twice, none missed)…
    const fired = processes.flatMap((p) => p.lines.filter((l) => l.startsWith("fired ")).map((l) => l.slice(6)));
    expect(fired.sort()).toEqual(expected);
    // …named one run, which one worker ran once: one model call per tick, with the tick's input.
    expect(await scheduled(schema, "tick")).toEqual(expected);
    const started = await sql<{ run_id: string; n: number }>(
      `SELECT run_id, count(*)::int AS n FROM "${schema}".loom_journal WHERE type = 'run.started' AND run_id LIKE 'tick@%'
        GROUP BY run_id ORDER BY run_id`,
    );
    expect(started).toEqual(expected.map((run_id) => ({ run_id, n: 1 }))); // each run started once
    const executions = await sql<{ input: string }>(`SELECT input FROM "${schema}".executions ORDER BY input`);
    expect(executions.map((e) => `tick@${e.input}`)).toEqual(expected);
    expect(await sql(`SELECT schedule_id, cursor_ms::text FROM "${schema}".loom_schedules`)).toEqual([
      { schedule_id: "tick", cursor_ms: String(T0 + TICKS * 1000) },
    ]);
    const byProcess = processes.map((p) => p.lines.filter((l) => l.startsWith("fired ")).length);
    console.log(`ticks fired per process: ${byProcess.join(", ")}`);
  }, 180_000);

  it("4 schedulers with separate pools looking at once submit each tick once", async () => {
    const url = PG_URL as string;
    const schema = freshSchema("schedpools");
    const journals = Array.from({ length: 4 }, () => openPostgresJournal(url, { schema, pool: { max: 3 } }));
    cleanups.push(
      () => dropSchema(schema),
      () => Promise.all(journals.map((j) => j.close())),
    );
    const s = schedule({
      id: "tick",
      cron: "* * * * * *",
      loop,
      input: (t) => t.toISOString(),
      missed: "all",
      startAt: new Date(T0 + 1000),
    });
    let submitted = 0;
    for (let second = 1; second <= TICKS; second++) {
      const now = () => new Date(T0 + second * 1000);
      const reports = await Promise.all(journals.map((j) => fireDueOnPostgres(j, [s], { now })));
      submitted += reports.reduce((n, r) => n + r.fired.length, 0);
    }
    expect(submitted).toBe(TICKS);
    expect(await scheduled(schema, "tick")).toHaveLength(TICKS);
    expect(await sql(`SELECT count(*)::int AS n FROM "${schema}".loom_leases`)).toEqual([{ n: TICKS }]);
  }, 60_000);

  const outage = async (missed: MissedTicks) => {
    const schema = freshSchema(`missed_${missed}`);
    const journal = openPostgresJournal(PG_URL as string, { schema });
    cleanups.push(
      () => dropSchema(schema),
      () => journal.close(),
    );
    const hourly = schedule({ id: "hourly", cron: "0 * * * *", loop, input: (t) => t.toISOString(), missed });
    const h = (n: number, plusMs = 0) => new Date(T0 + n * 3_600_000 + plusMs);
    const first = await fireDueOnPostgres(journal, [hourly], { now: () => h(0, 5000) });
    expect(first.fired.map((f) => f.tick)).toEqual([h(0)]);
    // Every process was down from 00:00 to 05:30.
    const after = await fireDueOnPostgres(journal, [hourly], { now: () => h(5, 1_800_000) });
    const again = await fireDueOnPostgres(journal, [hourly], { now: () => h(5, 1_900_000) });
    expect(again).toEqual({ fired: [], skipped: [] }); // the cursor moved past the outage
    const next = await fireDueOnPostgres(journal, [hourly], { now: () => h(6, 1000) });
    expect(next.fired.map((f) => f.tick)).toEqual([h(6)]);
    return { after, runs: await scheduled(schema, "hourly"), h };
  };
  const hour = (n: number) => `hourly@${new Date(T0 + n * 3_600_000).toISOString()}`;

  it("after an outage, skip submits none of the missed ticks", async () => {
    const { after, runs, h } = await outage("skip");
    expect(after.fired).toEqual([]);
    expect(after.skipped).toEqual([{ scheduleId: "hourly", first: h(1), last: h(5) }]);
    expect(runs).toEqual([hour(0), hour(6)]);
  });

  it("after an outage, latest submits the newest missed tick", async () => {
    const { after, runs, h } = await outage("latest");
    expect(after.skipped).toEqual([{ scheduleId: "hourly", first: h(1), last: h(4) }]);
    expect(runs).toEqual([hour(0), hour(5), hour(6)]);
  });

  it("after an outage, all submits every missed tick", async () => {
    const { after, runs } = await outage("all");
    expect(after.skipped).toEqual([]);
    expect(runs).toEqual([0, 1, 2, 3, 4, 5, 6].map(hour));
  });

  it("on a fresh database, latest submits one tick, not every tick of the last lateAfterMs", async () => {
    const schema = freshSchema("schedfirst");
    const journal = openPostgresJournal(PG_URL as string, { schema });
    cleanups.push(
      () => dropSchema(schema),
      () => journal.close(),
    );
    const s = schedule({ id: "five", cron: "*/5 * * * * *", loop, input: (t) => t.toISOString(), missed: "latest" });
    const first = await fireDueOnPostgres(journal, [s], { now: () => new Date(T0 + 59_500) });
    expect(first).toEqual({
      fired: [{ scheduleId: "five", tick: new Date(T0 + 55_000), runId: "five@2026-01-01T00:00:55.000Z" }],
      skipped: [],
    });
    expect(await scheduled(schema, "five")).toEqual(["five@2026-01-01T00:00:55.000Z"]);
    expect(await sql(`SELECT cursor_ms::text FROM "${schema}".loom_schedules`)).toEqual([
      { cursor_ms: String(T0 + 55_000) },
    ]);
  });

  it("a tick submitted again (a scheduler that died before moving the cursor) names the same run", async () => {
    const schema = freshSchema("schedretry");
    const journal = openPostgresJournal(PG_URL as string, { schema });
    cleanups.push(
      () => dropSchema(schema),
      () => journal.close(),
    );
    const s = schedule({ id: "hourly", cron: "0 * * * *", loop, input: (t) => t.toISOString() });
    const now = () => new Date(T0 + 3_600_000 + 1000);
    await fireDueOnPostgres(journal, [s], { now });
    // The cursor rolled back, as a crash between the submit and the commit leaves it.
    await sql(`UPDATE "${schema}".loom_schedules SET cursor_ms = $1`, [T0]);
    // Its input function changed since (a deploy): the recorded run is queued again, not a second one.
    const changed = schedule({ id: "hourly", cron: "0 * * * *", loop, input: (t) => `v2 ${t.toISOString()}` });
    const again = await fireDueOnPostgres(journal, [changed], { now });
    expect(again.fired.map((f) => f.runId)).toEqual([hour(1)]);
    expect(await scheduled(schema, "hourly")).toEqual([hour(1)]);
    const started = await sql(`SELECT seq FROM "${schema}".loom_journal WHERE run_id = $1 AND type = 'run.started'`, [
      hour(1),
    ]);
    expect(started).toHaveLength(1);
  });

  it("moves a version 4 database to 5: the schedules table is added", async () => {
    const schema = freshSchema("schedv4");
    const first = openPostgresJournal(PG_URL as string, { schema });
    await first.store.listRuns();
    await first.close();
    cleanups.push(() => dropSchema(schema));
    await sql(`DROP TABLE "${schema}".loom_schedules`);
    await sql(`UPDATE "${schema}".loom_meta SET value = '4' WHERE key = 'schema_version'`);
    const journal = openPostgresJournal(PG_URL as string, { schema });
    cleanups.push(() => journal.close());
    const s = schedule({ id: "hourly", cron: "0 * * * *", loop, input: (t) => t.toISOString() });
    await fireDueOnPostgres(journal, [s], { now: () => new Date(T0 + 1000) });
    expect(POSTGRES_SCHEMA_VERSION).toBe(6);
    expect(await sql(`SELECT value FROM "${schema}".loom_meta WHERE key = 'schema_version'`)).toEqual([{ value: "6" }]);
    expect(await scheduled(schema, "hourly")).toEqual([hour(0)]);
  });

  it("a tick whose input throws is reported and passed over; the schedule goes on", async () => {
    const schema = freshSchema("schedinput");
    const journal = openPostgresJournal(PG_URL as string, { schema });
    cleanups.push(
      () => dropSchema(schema),
      () => journal.close(),
    );
    const s = schedule({
      id: "hourly",
      cron: "0 * * * *",
      loop,
      missed: "all",
      startAt: new Date(T0),
      input: (t) => {
        if (t.getTime() === T0 + 3_600_000) throw new Error("no data");
        return t.toISOString();
      },
    });
    const errors: unknown[] = [];
    const report = await fireDueOnPostgres(journal, [s], {
      now: () => new Date(T0 + 2 * 3_600_000),
      onError: (e) => errors.push(e),
    });
    expect(errors).toMatchObject([{ code: "inputFailed", scheduleId: "hourly" }]);
    expect(report.fired.map((f) => f.runId)).toEqual([hour(0), hour(2)]);
    expect(await scheduled(schema, "hourly")).toEqual([hour(0), hour(2)]);
  });

  it("loom schedule run --pg submits the due ticks to the workers", async () => {
    const schema = freshSchema("schedcli");
    const journal = openPostgresJournal(PG_URL as string, { schema });
    cleanups.push(
      () => dropSchema(schema),
      () => journal.close(),
    );
    await journal.store.listRuns(); // the journal the CLI is pointed at exists
    const fixture = join(import.meta.dirname, "../fixtures/schedules.ts");
    const argv = ["schedule", "run", fixture, "--pg", PG_URL as string, "--pg-schema", schema];
    const r = await loom(tmpdir(), [...argv, "--now", "2026-01-02T08:00:10Z"]);
    expect(r.stderr).toBe("");
    expect(r.stdout).toBe("submitted hourly@2026-01-02T08:00:00.000Z\nsubmitted morning@2026-01-02T08:00:00.000Z\n");
    expect(await sql(`SELECT run_id FROM "${schema}".loom_leases ORDER BY run_id`)).toEqual([
      { run_id: "hourly@2026-01-02T08:00:00.000Z" },
      { run_id: "morning@2026-01-02T08:00:00.000Z" },
    ]);
    // The place is kept in loom_schedules: the same look again submits nothing.
    expect((await loom(tmpdir(), [...argv, "--now", "2026-01-02T08:00:20Z"])).stdout).toBe("");
  });

  it("refuses a journal that is not on PostgreSQL", async () => {
    const s = schedule({ id: "hourly", cron: "0 * * * *", loop, input: (t) => t.toISOString() });
    const e = await fireDueOnPostgres(jsonJournal(), [s]).catch((x: unknown) => x);
    expect(isNotPostgresJournalError(e)).toBe(true);
  });
});
