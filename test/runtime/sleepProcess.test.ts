import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openSqliteJournal, readJournal } from "../../src/events/journal.ts";
import { tempDir } from "../events/tmp.ts";
import { startWorker } from "../support/processes.ts";

/**
 * A 3-day sleep with a fake clock (`RunOptions.now`) across a process kill and a restart (issue
 * 31): the process that started the run is SIGKILLed while its embedded scheduler polls; a new
 * process a millisecond before the wake time resumes nothing; one at the wake time wakes the run
 * once (the tool is not run again, the model is asked once more); a later one finds nothing to do.
 */

const SCRIPT = "test/runtime/workers/sleepProcess.ts";
const T0 = Date.parse("2026-03-01T09:00:00.000Z");
const THREE_DAYS = 3 * 86_400_000;
let tmp: ReturnType<typeof tempDir>;
beforeAll(() => {
  tmp = tempDir("loom-sleep-process-");
});
afterAll(() => tmp.remove());

async function wake(path: string, now: number) {
  const w = startWorker(SCRIPT, ["wake", path, String(now)]);
  const report = JSON.parse(await w.waitFor((l) => l.startsWith("{"), "the wake report")) as {
    woken: { runId: string; outcome: string; dueAt?: string }[];
    modelCalls: number;
  };
  expect((await w.exited).code).toBe(0);
  expect(w.lines).not.toContain("tool-executed");
  return report;
}

describe("a 3-day sleep across a SIGKILL", () => {
  it("is woken once, at the time, never earlier, and the tool is not run again", async () => {
    const path = tmp.file("sleep.db");
    const first = startWorker(SCRIPT, ["start", path, String(T0)]);
    expect(await first.waitFor((l) => l.startsWith("waiting "), "the run waits")).toBe(
      "waiting 2026-03-04T09:00:00.000Z",
    );
    await first.waitFor((l) => l.startsWith("tick "), "the embedded scheduler polled");
    first.child.kill("SIGKILL");
    expect((await first.exited).signal).toBe("SIGKILL");
    expect(first.lines.filter((l) => l === "tool-executed")).toHaveLength(1);

    const early = await wake(path, T0 + THREE_DAYS - 1);
    expect(early.woken).toEqual([{ runId: "r", loopId: "rem", dueAt: "2026-03-04T09:00:00.000Z", outcome: "not-due" }]);
    expect(early.modelCalls).toBe(0);

    const due = await wake(path, T0 + THREE_DAYS);
    expect(due.woken).toEqual([{ runId: "r", loopId: "rem", dueAt: "2026-03-04T09:00:00.000Z", outcome: "completed" }]);
    expect(due.modelCalls).toBe(1); // the second turn only: the first is served from the journal

    const later = await wake(path, T0 + 2 * THREE_DAYS);
    expect(later.woken).toEqual([]);

    const journal = openSqliteJournal(path);
    try {
      const entries = await readJournal(journal, "r");
      const tool = "rem#turn:0:tool:0";
      const of = (type: string) =>
        entries.filter((e) => e.type === type && (e.data as { frameId?: string }).frameId === tool);
      expect(of("frame.started")).toHaveLength(1);
      expect(of("frame.completed").map((e) => (e.data as { output?: unknown }).output)).toEqual([{ reminded: true }]);
      expect(entries.at(-1)?.type).toBe("run.completed");
      const interruptions = entries.filter((e) => e.type === "run.interrupted");
      expect(interruptions).toHaveLength(1); // the early wake resumed nothing, so journaled nothing
    } finally {
      await journal.close();
    }
  });
});
