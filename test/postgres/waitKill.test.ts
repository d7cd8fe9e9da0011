import { writeFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { waitId } from "../../src/events/ids.ts";
import { readJournal } from "../../src/events/journal.ts";
import { submitRun } from "../../src/postgres.ts";
import { listWaits } from "../../src/runtime/run/waits.ts";
import { holdLoop } from "./fixtures/holdWorker.ts";
import { DAY } from "./fixtures/waitWorker.ts";
import { cleanAfterEach, PG_URL, processScene, until } from "./pg.ts";

/**
 * A 3-day sleep on PostgreSQL whose worker process is SIGKILLed after the wait is journaled and
 * before the run stops for it (`run.interrupted`): listWaits finds the wait from its decision, a
 * new worker takes the run over once the dead one's lease runs out and parks it, and wakes it once
 * when its clock reaches the wake time. The sleeping tool is not run again.
 */

const FIXTURE = "test/postgres/fixtures/holdWorker.ts";
const STEP = "remh#turn:0:tool:0";
const cleanups = cleanAfterEach();

describe.skipIf(PG_URL === undefined)("a sleep on PostgreSQL killed between its wait and the interruption", () => {
  it("is listed, parked by a new worker, and woken once at the time", async () => {
    const { schema, dir, journal, spawn } = processScene("waitkill", cleanups);
    const clockFile = dir.file("clock");
    const setClock = (ms: number) => writeFileSync(clockFile, String(ms));
    // The fake clock is 30 days behind the real one: PostgreSQL finds a parked run due at once,
    // and the worker's clock alone says whether the wait has ended.
    const T0 = Math.floor((Date.now() - 30 * DAY) / 1000) * 1000;
    const WAKE = T0 + 3 * DAY;
    const entries = () => readJournal(journal, "reminder");

    setClock(T0);
    await journal.store.listRuns(); // the schema exists before the worker races to make it
    await submitRun(journal, {
      runId: "reminder",
      loop: holdLoop(
        () => T0,
        false,
        () => {},
      ),
      input: "remind me",
    });
    const first = spawn(FIXTURE, [schema, clockFile, "hold"]);
    await first.waitFor((l) => l === "ready", "the first worker ready", 60_000);
    await until("the wait to be journaled", async () =>
      (await entries()).some((e) => e.type === "decision.recorded" && e.data.decisionId === waitId(STEP)),
    );
    await first.waitFor((l) => l === "tool hold", "the call that holds the turn");
    first.child.kill("SIGKILL");
    expect((await first.exited).signal).toBe("SIGKILL");
    const killed = await entries();
    expect(killed.some((e) => e.type === "run.interrupted")).toBe(false);

    // The wait is found from its decision, though the run never stopped for it.
    expect(await listWaits(journal)).toMatchObject([
      { runId: "reminder", stepId: STEP, kind: "sleep", until: new Date(WAKE).toISOString() },
    ]);

    // A new worker, its clock before the wake time: it takes the run over and parks it, waiting.
    const second = spawn(FIXTURE, [schema, clockFile, "go"]);
    await second.waitFor((l) => l === "ready", "the second worker ready", 60_000);
    await until("the run to stop for its wait", async () => (await entries()).at(-1)?.type === "run.interrupted");
    const parked = await entries();
    expect(parked.at(-1)?.data).toMatchObject({ reason: "waiting" });

    setClock(WAKE);
    await until("the run to complete", async () => (await entries()).at(-1)?.type === "run.completed");
    second.child.kill("SIGTERM");
    expect(await second.exited).toEqual({ code: 0, signal: null });
    expect(first.lines.filter((l) => l === "tool remind")).toHaveLength(1);
    expect(second.lines.filter((l) => l === "tool remind")).toEqual([]); // the sleep is not run again
    expect(second.lines.filter((l) => l.startsWith("model "))).toEqual([`model 1 ${WAKE}`]); // woken once, at the time
    const after = await entries();
    const completed = after.filter((e) => e.type === "frame.completed" && e.data.frameId === STEP);
    expect(completed.map((e) => (e.type === "frame.completed" ? e.data.output : undefined))).toEqual([
      { reminded: true },
    ]);
  }, 120_000);
});
