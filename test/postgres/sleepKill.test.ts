import { writeFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { waitId } from "../../src/events/ids.ts";
import { readJournal } from "../../src/events/journal.ts";
import type { JournalEntry } from "../../src/events/types.ts";
import { submitRun } from "../../src/postgres.ts";
import { DAY, sleepLoop } from "./fixtures/waitWorker.ts";
import { cleanAfterEach, PG_URL, processScene, sleep, sql, until } from "./pg.ts";

/**
 * A 3-day sleep on PostgreSQL with a fake clock (`WorkerOptions.clock`), across a SIGKILL of the
 * worker process and a new worker process (issue 31's "Must show"). The fake clock starts 30 days
 * behind the real one, so PostgreSQL (whose `now()` decides when a parked run is claimed) finds
 * the parked run due at once, and the worker's clock alone says whether its wait has ended: the
 * run must be resumed once, when that clock reaches the wake time, and never before.
 */

const FIXTURE = "test/postgres/fixtures/waitWorker.ts";
const STEP = "rem#turn:0:tool:0";
const cleanups = cleanAfterEach();

const ofType = (entries: readonly JournalEntry[], type: string) => entries.filter((e) => e.type === type);

describe.skipIf(PG_URL === undefined)("a 3-day sleep on PostgreSQL across a worker SIGKILL", () => {
  it("is woken once, by the new worker, when its clock reaches the wake time, and not before", async () => {
    const { schema, dir, journal, spawn } = processScene("sleepkill", cleanups);
    const clockFile = dir.file("clock");
    const setClock = (ms: number) => writeFileSync(clockFile, String(ms));
    const start = () => spawn(FIXTURE, [schema, clockFile]);
    const T0 = Math.floor((Date.now() - 30 * DAY) / 1000) * 1000;
    const WAKE = T0 + 3 * DAY;
    const wakeIso = new Date(WAKE).toISOString();
    const entries = () => readJournal(journal, "reminder");
    const lease = async () =>
      (await sql<{ owner: string | null }>(`SELECT owner FROM "${schema}".loom_leases WHERE run_id = 'reminder'`))[0];

    setClock(T0);
    await journal.store.listRuns(); // the schema exists before the worker races to make it
    await submitRun(journal, {
      runId: "reminder",
      loop: sleepLoop(
        () => T0,
        () => {},
      ),
      input: "remind me in 3 days",
    });
    const first = start();
    await first.waitFor((l) => l === "ready", "the first worker ready", 60_000);
    await until("the run to wait", async () => (await entries()).at(-1)?.type === "run.interrupted");
    // The first worker keeps polling while the run is parked (due by the database's clock, not by the worker's).
    await sleep(500);
    const parked = await entries();
    expect(parked.map((e) => e.type)).toEqual([
      "run.started",
      "frame.started",
      "frame.completed",
      "frame.started",
      "decision.recorded",
      "run.interrupted",
    ]);
    const wait = parked.find((e) => e.type === "decision.recorded" && e.data.decisionId === waitId(STEP));
    expect(wait?.data).toMatchObject({ source: "wait", choice: { kind: "sleep", until: wakeIso } });
    expect(parked.at(-1)?.data).toMatchObject({ reason: "waiting", detail: { expiresAt: { [STEP]: wakeIso } } });

    first.child.kill("SIGKILL"); // the worker process dies while the run sleeps
    expect((await first.exited).signal).toBe("SIGKILL");
    expect(first.lines.filter((l) => l.startsWith("tool "))).toEqual([`tool ${STEP}`]);
    expect(first.lines.filter((l) => l.startsWith("model "))).toEqual([`model 0 ${T0}`]);
    // Still queued: the wait outlives the process. The worker looked at the run every poll, so it may
    // have been killed mid-look, holding the row until its lease (1 s) runs out.
    const heldAtKill = (await lease())?.owner;
    expect(heldAtKill === null || heldAtKill?.includes(`:${first.child.pid}:`)).toBe(true);

    // A new worker process, its clock a minute before the wake time: it leaves the run parked.
    setClock(WAKE - 60_000);
    const second = start();
    await second.waitFor((l) => l === "ready", "the second worker ready", 60_000);
    if (heldAtKill !== null)
      await until("the dead worker's lease to run out", async () => (await lease())?.owner !== heldAtKill);
    await sleep(500); // some twenty looks at the run
    expect(await entries()).toEqual(parked); // not resumed early: nothing journaled
    expect(second.lines.filter((l) => l.startsWith("model ") || l.startsWith("tool "))).toEqual([]);

    // The clock reaches the wake time: the run is woken once and completes.
    setClock(WAKE);
    await until("the run to complete", async () => (await entries()).at(-1)?.type === "run.completed");
    second.child.kill("SIGTERM");
    expect(await second.exited).toEqual({ code: 0, signal: null });
    expect(second.lines.filter((l) => l.startsWith("tool "))).toEqual([]); // the tool did not run again
    expect(second.lines.filter((l) => l.startsWith("model "))).toEqual([`model 1 ${WAKE}`]); // its continuation, once, at the time

    const after = await entries();
    expect(after.slice(0, parked.length)).toEqual(parked);
    expect(ofType(after, "run.interrupted")).toHaveLength(1);
    expect(ofType(after, "run.completed")).toHaveLength(1);
    const toolFrames = (type: string) =>
      ofType(after, type).filter((e) => (e.data as { frameId?: string }).frameId === STEP);
    expect(toolFrames("frame.started")).toHaveLength(1);
    expect(toolFrames("frame.completed").map((e) => (e.data as { output?: unknown }).output)).toEqual([
      { reminded: true },
    ]);
    expect(await lease()).toBeUndefined(); // off the queue
  }, 120_000);
});
