import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openSqliteJournal, readJournal } from "../../src/events/journal.ts";
import { runActivity } from "../../src/runtime/control/activity.ts";
import { tempDir } from "../events/tmp.ts";
import { startWorker } from "../support/processes.ts";

/**
 * A sleep whose process is SIGKILLed after the wait is journaled and before the run stops for it
 * (`run.interrupted`): the run is stalled, and the wait is still found, from its decision, by
 * listWaits and wakeDueRuns in new processes. It is woken once, at its time, never earlier; the
 * sleeping tool is not run again.
 */

const SCRIPT = "test/runtime/workers/sleepKill.ts";
const T0 = Date.parse("2026-03-01T09:00:00.000Z");
const WAKE = T0 + 3 * 86_400_000;
const STEP = "rem#turn:0:tool:0";
let tmp: ReturnType<typeof tempDir>;
beforeAll(() => {
  tmp = tempDir("loom-sleep-kill-");
});
afterAll(() => tmp.remove());

async function inProcess<T>(args: readonly string[]): Promise<{ out: T; lines: string[] }> {
  const w = startWorker(SCRIPT, args);
  const out = JSON.parse(await w.waitFor((l) => l.startsWith("{") || l.startsWith("["), "the report")) as T;
  expect((await w.exited).code, w.stderr()).toBe(0);
  return { out, lines: w.lines };
}

const wake = (path: string, now: number) =>
  inProcess<{ woken: { runId: string; outcome: string; dueAt?: string }[]; modelCalls: number }>([
    "wake",
    path,
    String(now),
  ]);

describe("a sleep killed between its wait and the run's interruption (SQLite)", () => {
  it("is listed, and woken once at its time by wakeDueRuns, never earlier", { timeout: 60_000 }, async () => {
    const path = tmp.file("sleep.db");
    const first = startWorker(SCRIPT, ["start", path, String(T0)]);
    await first.waitFor((l) => l === "wait-journaled", "the wait journaled");
    first.child.kill("SIGKILL");
    expect((await first.exited).signal).toBe("SIGKILL");
    expect(first.lines.filter((l) => l === "tool-executed remind")).toHaveLength(1);

    const journal = openSqliteJournal(path);
    try {
      const killed = await readJournal(journal, "r");
      expect(killed.some((e) => e.type === "run.interrupted")).toBe(false); // it never stopped for the wait
      // Once the dead process's lease runs out, nobody holds the run: it is stalled.
      for (let i = 0; (await runActivity(journal, "r")).activity !== "stalled"; i++) {
        if (i > 200) throw new Error("the run was never seen stalled");
        await new Promise((resolve) => setTimeout(resolve, 50));
      }

      const waits = await inProcess<{ runId: string; stepId: string; kind: string; until?: string }[]>(["waits", path]);
      expect(waits.out).toMatchObject([
        { runId: "r", stepId: STEP, kind: "sleep", until: new Date(WAKE).toISOString() },
      ]);

      const early = await wake(path, WAKE - 1);
      expect(early.out.woken).toEqual([
        { runId: "r", loopId: "rem", dueAt: new Date(WAKE).toISOString(), outcome: "not-due" },
      ]);
      expect(early.out.modelCalls).toBe(0);
      expect(await readJournal(journal, "r")).toEqual(killed); // nothing journaled before it is due

      const due = await wake(path, WAKE);
      expect(due.out.woken).toEqual([
        { runId: "r", loopId: "rem", dueAt: new Date(WAKE).toISOString(), outcome: "completed" },
      ]);
      expect(due.out.modelCalls).toBe(1); // the second turn only
      expect(due.lines).not.toContain("tool-executed remind"); // the sleep is not run again

      expect((await wake(path, WAKE * 2)).out.woken).toEqual([]);
      const entries = await readJournal(journal, "r");
      const of = (type: string) =>
        entries.filter((e) => e.type === type && (e.data as { frameId?: string }).frameId === STEP);
      expect(of("frame.started")).toHaveLength(1);
      expect(of("frame.completed").map((e) => (e.data as { output?: unknown }).output)).toEqual([{ reminded: true }]);
      expect(entries.at(-1)?.type).toBe("run.completed");
    } finally {
      await journal.close();
    }
  });
});
