import { writeFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { readJournal } from "../../src/events/journal.ts";
import { submitRun } from "../../src/postgres.ts";
import { deliverEvent } from "../../src/runtime/control/events.ts";
import { payLoop } from "./fixtures/waitWorker.ts";
import { cleanAfterEach, PG_URL, processScene, sleep, sql, until } from "./pg.ts";

/**
 * An event delivered to a run whose process is gone (issue 31's "Must show"), on PostgreSQL: the
 * worker process that ran two runs into their event waits is SIGKILLed; one event is delivered
 * from this process while no worker is alive, and a new worker process resumes that run when it
 * starts; the other is delivered while the new worker runs, and the NOTIFY wakes it. Neither
 * tool runs again; each run's model is fed its payload once.
 */

const FIXTURE = "test/postgres/fixtures/waitWorker.ts";
const cleanups = cleanAfterEach();

describe.skipIf(PG_URL === undefined)("an event delivered to a run whose worker process is gone", () => {
  it("is journaled at once, and a new worker process resumes the run; the tool does not run again", async () => {
    const { schema, dir, journal, spawn } = processScene("eventkill", cleanups);
    const clockFile = dir.file("clock");
    writeFileSync(clockFile, String(Date.now())); // the real time: these waits have no timeout
    const start = async () => {
      const p = spawn(FIXTURE, [schema, clockFile]);
      await p.waitFor((l) => l === "ready", "a worker ready", 60_000);
      return p;
    };
    const last = async (runId: string) => (await readJournal(journal, runId)).at(-1);
    const queued = async () =>
      (await sql<{ run_id: string }>(`SELECT run_id FROM "${schema}".loom_leases ORDER BY run_id`)).map(
        (r) => r.run_id,
      );
    const loop = payLoop(() => {});

    await journal.store.listRuns(); // the schema exists before the worker races to make it
    await submitRun(journal, { runId: "order-a", loop, input: "a" });
    await submitRun(journal, { runId: "order-b", loop, input: "b" });
    const first = await start();
    for (const runId of ["order-a", "order-b"])
      await until(
        `${runId} to wait`,
        async () => ((await last(runId))?.data as { reason?: string } | undefined)?.reason === "waiting",
      );
    const tokenOf = (order: string) =>
      first.lines.find((l) => l.startsWith(`token ${order} `))?.slice(`token ${order} `.length) as string;
    expect(tokenOf("a")).toMatch(/^lw1\./);
    first.child.kill("SIGKILL");
    expect((await first.exited).signal).toBe("SIGKILL");
    expect(await queued()).toEqual([]); // only a delivery can end these waits: nothing for a worker to do

    // No worker is alive: the delivery is journaled and queues the run.
    expect(await deliverEvent(journal, tokenOf("a"), { paid: 4200 })).toMatchObject({ runId: "order-a" });
    expect(await queued()).toEqual(["order-a"]);
    expect((await last("order-a"))?.type).toBe("frame.completed");

    const second = await start();
    await until("order-a to complete", async () => (await last("order-a"))?.type === "run.completed");
    await sleep(200);
    expect((await last("order-b"))?.type).toBe("run.interrupted"); // not delivered: left alone

    // Delivered while the new worker runs: its NOTIFY wakes the worker.
    await deliverEvent(journal, tokenOf("b"), { paid: 99 });
    await until("order-b to complete", async () => (await last("order-b"))?.type === "run.completed");
    second.child.kill("SIGTERM");
    expect(await second.exited).toEqual({ code: 0, signal: null });

    expect(first.lines.filter((l) => l.startsWith("tool "))).toHaveLength(2);
    expect(second.lines.filter((l) => l.startsWith("tool "))).toEqual([]); // no tool ran again
    expect(second.lines.filter((l) => l.startsWith("model "))).toEqual(["model 1", "model 1"]);
    for (const [runId, payload] of [
      ["order-a", { paid: 4200 }],
      ["order-b", { paid: 99 }],
    ] as const) {
      const entries = await readJournal(journal, runId);
      const step = "pay#turn:0:tool:0";
      const ofStep = (type: string) =>
        entries.filter((e) => e.type === type && (e.data as { frameId?: string }).frameId === step);
      expect(ofStep("frame.started")).toHaveLength(1);
      expect(ofStep("frame.completed").map((e) => (e.data as { output?: unknown }).output)).toEqual([payload]);
      expect(entries.filter((e) => e.type === "run.interrupted")).toHaveLength(1);
      expect(entries.at(-1)?.data).toMatchObject({
        output: { content: `order ${runId.slice(-1)}: ${JSON.stringify(payload)}` },
      });
    }
    expect(await queued()).toEqual([]);
  }, 120_000);
});
