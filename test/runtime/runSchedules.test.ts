import { afterEach, describe, expect, it } from "vitest";
import { openSqliteJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import type { Journal } from "../../src/events/spi.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { runActivity } from "../../src/runtime/control/activity.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { fireDueTicks, runSchedules, startSchedules } from "../../src/runtime/run/runSchedules.ts";
import { type MissedTicks, schedule } from "../../src/runtime/run/schedule.ts";
import { tempDir } from "../events/tmp.ts";
import { crashingStore, jsonJournal } from "../support/loop.ts";

/** A loop whose model answers at once, counting its calls per input (one input per tick). */
function countedLoop() {
  const calls = new Map<string, number>();
  const loop = agentLoop$({
    id: "digest",
    model: scriptedModel(async ({ messages }) => {
      const first = messages.find((m) => m.role === "user");
      const input = first?.role === "user" ? first.content : "?";
      calls.set(input, (calls.get(input) ?? 0) + 1);
      return { content: `done ${input}`, toolCalls: [] };
    }),
  });
  return { loop, calls };
}

const T0 = new Date("2026-01-01T00:00:00.000Z");
const hours = (h: number, plusMs = 0) => new Date(T0.getTime() + h * 3_600_000 + plusMs);
const runIds = async (journal: Journal) => (await journal.store.listRuns()).map((r) => r.runId).sort();

const dirs: { remove: () => void }[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) d.remove();
});

describe("fireDueTicks (the embedded scheduler, one look)", () => {
  const outage = async (missed: MissedTicks) => {
    const { loop, calls } = countedLoop();
    const s = schedule({ id: "hourly", cron: "0 * * * *", loop, input: (t) => `digest ${t.toISOString()}`, missed });
    const journal = jsonJournal();
    // Up at 00:00 (the tick on time runs), then down until 05:30.
    const first = await fireDueTicks(journal, [s], { now: () => hours(0, 10_000) });
    expect(first.fired.map((f) => f.runId)).toEqual(["hourly@2026-01-01T00:00:00.000Z"]);
    const after = await fireDueTicks(journal, [s], { now: () => hours(5, 1_800_000) });
    return { journal, calls, after, s };
  };

  it("skip: after an outage no missed tick runs; the next one does", async () => {
    const { journal, after, s } = await outage("skip");
    expect(after.fired).toEqual([]);
    expect(after.skipped).toEqual([{ scheduleId: "hourly", first: hours(1), last: hours(5) }]);
    expect(await runIds(journal)).toEqual(["hourly@2026-01-01T00:00:00.000Z"]);
    const next = await fireDueTicks(journal, [s], { now: () => hours(6, 1000) });
    expect(next.fired.map((f) => f.tick)).toEqual([hours(6)]);
  });

  it("latest: after an outage the newest missed tick runs once", async () => {
    const { journal, calls, after } = await outage("latest");
    expect(after.fired.map((f) => f.runId)).toEqual(["hourly@2026-01-01T05:00:00.000Z"]);
    expect(after.skipped).toEqual([{ scheduleId: "hourly", first: hours(1), last: hours(4) }]);
    expect(await runIds(journal)).toEqual(["hourly@2026-01-01T00:00:00.000Z", "hourly@2026-01-01T05:00:00.000Z"]);
    expect([...calls.values()]).toEqual([1, 1]);
  });

  it("all: after an outage every missed tick runs, each once", async () => {
    const { journal, calls, after, s } = await outage("all");
    expect(after.fired.map((f) => f.tick)).toEqual([hours(1), hours(2), hours(3), hours(4), hours(5)]);
    expect(await runIds(journal)).toHaveLength(6);
    expect([...calls.values()]).toEqual([1, 1, 1, 1, 1, 1]);
    // A look again at the same time, or later before the next tick, fires nothing.
    expect((await fireDueTicks(journal, [s], { now: () => hours(5, 1_900_000) })).fired).toEqual([]);
  });

  it("gives each run the input of its tick, and resumes from the journal in another process (SQLite)", async () => {
    const dir = tempDir("loom-schedules-");
    dirs.push(dir);
    const { loop, calls } = countedLoop();
    const s = schedule({
      id: "hourly",
      cron: "0 * * * *",
      loop,
      input: (t) => `digest ${t.toISOString()}`,
      missed: "all",
    });
    const a = openSqliteJournal(dir.file("loom.db"));
    await fireDueTicks(a, [s], { now: () => hours(1, 5_000) });
    await a.close();
    // A later look from a fresh journal (another process, `loom schedule run`) starts after the last run.
    const b = openSqliteJournal(dir.file("loom.db"));
    try {
      const report = await fireDueTicks(b, [s], { now: () => hours(3, 5_000) });
      expect(report.fired.map((f) => f.tick)).toEqual([hours(2), hours(3)]);
      expect(await runIds(b)).toEqual([
        "hourly@2026-01-01T01:00:00.000Z",
        "hourly@2026-01-01T02:00:00.000Z",
        "hourly@2026-01-01T03:00:00.000Z",
      ]);
      expect([...calls.keys()].sort()).toEqual([1, 2, 3].map((h) => `digest ${hours(h).toISOString()}`));
    } finally {
      await b.close();
    }
  });

  it("runs a tick fired by two looks at once once", async () => {
    const { loop, calls } = countedLoop();
    const s = schedule({ id: "hourly", cron: "0 * * * *", loop, input: (t) => `digest ${t.toISOString()}` });
    const journal = jsonJournal();
    const errors: unknown[] = [];
    const now = () => hours(2, 1000);
    await Promise.all([
      fireDueTicks(journal, [s], { now, onError: (e) => errors.push(e) }),
      fireDueTicks(journal, [s], { now, onError: (e) => errors.push(e) }),
    ]);
    expect(await runIds(journal)).toEqual(["hourly@2026-01-01T02:00:00.000Z"]);
    expect([...calls.values()]).toEqual([1]);
    // The second look found the run owned by the first (RunBusyError), or finished: never a second run.
    for (const e of errors) expect((e as { code?: string }).code).toBe("runBusy");
  });
});

describe("a run a process left part-way", () => {
  it("is resumed by the next look, once, and not fired again", async () => {
    const { loop, calls } = countedLoop();
    const s = schedule({ id: "hourly", cron: "0 * * * *", loop, input: (t) => `digest ${t.toISOString()}` });
    const store = memoryStore({ json: true });
    // The process that fired 01:00 died after the run's first entries: its journal does not end.
    const dying = jsonJournal(crashingStore(store, 1));
    await expect(
      loop.run({ runId: s.runIdOf(hours(1)), journal: dying, input: `digest ${hours(1).toISOString()}` }),
    ).rejects.toThrow("simulated crash");
    const journal = jsonJournal(store);
    expect((await runActivity(journal, s.runIdOf(hours(1)))).activity).toBe("stalled");

    const report = await fireDueTicks(journal, [s], { now: () => hours(1, 30_000) });
    expect(report).toEqual({
      fired: [],
      skipped: [],
      resumed: [{ scheduleId: "hourly", tick: hours(1), runId: "hourly@2026-01-01T01:00:00.000Z" }],
    });
    const types = (await journal.store.read(s.runIdOf(hours(1)))).map((e) => e.type);
    expect(types.filter((t) => t === "run.started")).toHaveLength(1);
    expect(types.at(-1)).toBe("run.completed");
    // Ended now: a later look neither resumes nor fires it again.
    expect(await fireDueTicks(journal, [s], { now: () => hours(1, 40_000) })).toEqual({ fired: [], skipped: [] });
    expect([...calls.values()]).toEqual([2]); // the crashed attempt's call, and the resume's
  });

  it("is left alone while a live owner holds it", async () => {
    const held = heldLoop();
    const s = schedule({ id: "hourly", cron: "0 * * * *", loop: held.loop, input: (t) => `digest ${t.toISOString()}` });
    const journal = jsonJournal();
    const running = held.loop.run({ runId: s.runIdOf(hours(1)), journal, input: "by hand" });
    for (let i = 0; held.started() === 0; i++) {
      if (i > 2000) throw new Error("the run never started");
      await new Promise((r) => setTimeout(r, 5));
    }
    expect(await fireDueTicks(journal, [s], { now: () => hours(1, 30_000) })).toEqual({ fired: [], skipped: [] });
    held.release();
    await running;
    expect(held.started()).toBe(1);
  });
});

describe("a tick whose input throws", () => {
  it("is reported as inputFailed, naming the schedule and tick, and later ticks still run", async () => {
    const { loop } = countedLoop();
    const s = schedule({
      id: "hourly",
      cron: "0 * * * *",
      loop,
      missed: "all",
      startAt: hours(1),
      input: (t) => {
        if (t.getTime() === hours(1).getTime()) throw new Error("no data for 01:00");
        return `digest ${t.toISOString()}`;
      },
    });
    const journal = jsonJournal();
    const errors: { e: unknown; runId: string }[] = [];
    await fireDueTicks(journal, [s], { now: () => hours(2, 1000), onError: (e, runId) => errors.push({ e, runId }) });
    expect(errors).toHaveLength(1);
    expect(errors[0]?.runId).toBe("hourly@2026-01-01T01:00:00.000Z");
    expect(errors[0]?.e).toMatchObject({ code: "inputFailed", scheduleId: "hourly" });
    expect(String((errors[0]?.e as Error | undefined)?.message)).toContain(
      "input(2026-01-01T01:00:00.000Z) threw (no data for 01:00)",
    );
    expect(await runIds(journal)).toEqual(["hourly@2026-01-01T02:00:00.000Z"]);
  });
});

describe("runSchedules (the embedded scheduler, running)", () => {
  it("fires each tick as the clock reaches it, once, and ends when aborted", async () => {
    const { loop, calls } = countedLoop();
    const s = schedule({
      id: "every-second",
      cron: "* * * * * *",
      loop,
      input: (t) => `tick ${t.toISOString()}`,
      missed: "all",
      startAt: new Date(T0.getTime() + 1000),
    });
    const journal = jsonJournal();
    let clock = T0.getTime();
    const stop = new AbortController();
    const running = runSchedules(journal, [s], { now: () => new Date(clock), pollMs: 5, signal: stop.signal });
    for (let second = 1; second <= 10; second++) {
      clock = T0.getTime() + second * 1000;
      const want = `every-second@${new Date(clock).toISOString()}`;
      for (let i = 0; !(await runIds(journal)).includes(want); i++) {
        if (i > 2000) throw new Error(`${want} never ran`);
        await new Promise((r) => setTimeout(r, 5));
      }
    }
    stop.abort();
    await running;
    expect(await runIds(journal)).toHaveLength(10);
    expect([...calls.values()].every((n) => n === 1)).toBe(true);
    expect(calls.size).toBe(10);
  });
});

/** A loop whose model waits for `release()` before it answers: a run held in hand. */
function heldLoop() {
  let release = () => {};
  const released = new Promise<void>((r) => {
    release = r;
  });
  let started = 0;
  const loop = agentLoop$({
    id: "digest",
    model: scriptedModel(async () => {
      started++;
      await released;
      return { content: "digest written", toolCalls: [] };
    }),
  });
  return { loop, release, started: () => started };
}

describe("startSchedules (the embedded scheduler, with a stop)", () => {
  const everySecond = (loop: ReturnType<typeof heldLoop>["loop"]) =>
    schedule({
      id: "every-second",
      cron: "* * * * * *",
      loop,
      input: (t) => `tick ${t.toISOString()}`,
      missed: "all",
      startAt: new Date(T0.getTime() + 1000),
    });
  const lastType = async (journal: Journal, runId: string) => (await journal.store.read(runId)).at(-1)?.type;
  const TICK = `every-second@${new Date(T0.getTime() + 1000).toISOString()}`;

  it("stop() fires no tick after it and lets the run in hand finish", async () => {
    const held = heldLoop();
    const journal = jsonJournal();
    let clock = T0.getTime() + 1000;
    const scheduler = startSchedules(journal, [everySecond(held.loop)], { now: () => new Date(clock), pollMs: 5 });
    for (let i = 0; held.started() === 0; i++) {
      if (i > 2000) throw new Error("the tick's run never started");
      await new Promise((r) => setTimeout(r, 5));
    }
    const stopped = scheduler.stop();
    clock += 5000; // ticks come due after the stop: none is fired
    held.release();
    await stopped;
    expect(await runIds(journal)).toEqual([TICK]);
    expect(await lastType(journal, TICK)).toBe("run.completed");
  });

  it("stop({ abort: true }) interrupts the run in hand, which a resume finishes", async () => {
    const held = heldLoop();
    const journal = jsonJournal();
    const errors: unknown[] = [];
    const scheduler = startSchedules(journal, [everySecond(held.loop)], {
      now: () => new Date(T0.getTime() + 1000),
      pollMs: 5,
      onError: (e) => errors.push(e),
    });
    for (let i = 0; held.started() === 0; i++) {
      if (i > 2000) throw new Error("the tick's run never started");
      await new Promise((r) => setTimeout(r, 5));
    }
    await scheduler.stop({ abort: true });
    expect(await lastType(journal, TICK)).toBe("run.interrupted");
    expect(errors).toHaveLength(1); // told to onError, as any run that stopped before its answer
    held.release();
    expect((await held.loop.run({ runId: TICK, journal })).content).toBe("digest written");
  });
});

describe("a schedule's first start", () => {
  it("latest fires one run on a fresh journal, not one per tick of the last lateAfterMs", async () => {
    const { loop, calls } = countedLoop();
    const s = schedule({
      id: "five",
      cron: "*/5 * * * * *",
      loop,
      input: (t) => `tick ${t.toISOString()}`,
      missed: "latest",
    });
    const journal = jsonJournal();
    const firstLook = new Date(T0.getTime() + 59_500);
    const report = await fireDueTicks(journal, [s], { now: () => firstLook });
    expect(report).toEqual({
      fired: [{ scheduleId: "five", tick: new Date(T0.getTime() + 55_000), runId: "five@2026-01-01T00:00:55.000Z" }],
      skipped: [],
    });
    expect(await runIds(journal)).toEqual(["five@2026-01-01T00:00:55.000Z"]);
    expect(calls.size).toBe(1);
    // The next look goes on from that run: the next tick, and only it.
    const next = await fireDueTicks(journal, [s], { now: () => new Date(T0.getTime() + 60_500) });
    expect(next.fired.map((f) => f.runId)).toEqual(["five@2026-01-01T00:01:00.000Z"]);
  });
});

describe("many runs in hand", () => {
  /** Runs `body` and returns the warnings the process emitted meanwhile (MaxListenersExceededWarning…). */
  async function warningsOf(body: () => Promise<void>): Promise<string[]> {
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`);
    process.on("warning", onWarning);
    try {
      await body();
      await new Promise((r) => setTimeout(r, 20)); // warnings are emitted on the next tick
    } finally {
      process.off("warning", onWarning);
    }
    return warnings;
  }
  const TICKS = 1000;
  const thousand = () => {
    const held = heldLoop();
    const s = schedule({
      id: "burst",
      cron: "* * * * * *",
      loop: held.loop,
      input: (t) => `tick ${t.toISOString()}`,
      missed: "all",
      maxMissed: TICKS,
      startAt: new Date(T0.getTime() + 1000),
    });
    return { held, s, now: () => new Date(T0.getTime() + TICKS * 1000) };
  };
  const waitStarted = async (held: ReturnType<typeof heldLoop>) => {
    for (let i = 0; held.started() < TICKS; i++) {
      if (i > 6000) throw new Error(`${held.started()} of ${TICKS} runs started`);
      await new Promise((r) => setTimeout(r, 5));
    }
  };

  it(`fireDueTicks with a signal holds ${TICKS} runs at once without a listener per run on it`, async () => {
    const { held, s, now } = thousand();
    const journal = jsonJournal();
    const stop = new AbortController();
    const warnings = await warningsOf(async () => {
      const look = fireDueTicks(journal, [s], { now, signal: stop.signal });
      await waitStarted(held);
      held.release();
      expect((await look).fired).toHaveLength(TICKS);
    });
    expect(warnings).toEqual([]);
    expect(await runIds(journal)).toHaveLength(TICKS);
  }, 60_000);

  it(`startSchedules holds ${TICKS} runs at once without a listener per run, and stop({ abort }) still reaches each`, async () => {
    const { held, s, now } = thousand();
    const journal = jsonJournal();
    const warnings = await warningsOf(async () => {
      const scheduler = startSchedules(journal, [s], { now, pollMs: 5 });
      await waitStarted(held);
      await scheduler.stop({ abort: true });
    });
    expect(warnings).toEqual([]);
    const last = await Promise.all(
      (await runIds(journal)).map(async (id) => (await journal.store.read(id)).at(-1)?.type),
    );
    expect(last).toHaveLength(TICKS);
    expect(new Set(last)).toEqual(new Set(["run.interrupted"]));
  }, 60_000);
});
