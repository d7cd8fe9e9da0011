import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openSqliteJournal, readJournal } from "../../src/events/journal.ts";
import type { EntryOf } from "../../src/events/types.ts";
import { tempDir } from "../events/tmp.ts";
import { startWorker } from "../support/processes.ts";

/**
 * A run stopped during a model back-off and resumed by another process: the attempt count goes on
 * from the journal (the resumed call is attempt 2), and the new process waits only what remained
 * of the journaled wait. The first process is stopped either by an abort (the run interrupts
 * `aborted`) or by SIGKILL while its chart waits in `backingOff`.
 */

const SCRIPT = "test/runtime/workers/backoffProcess.ts";
let tmp: ReturnType<typeof tempDir>;
beforeAll(() => {
  tmp = tempDir("loom-backoff-process-");
});
afterAll(() => tmp.remove());

describe.each(["abort", "SIGKILL"] as const)("a back-off stopped by %s, resumed in a fresh process", (how) => {
  it("continues the attempt count and waits only the rest of the journaled wait", async () => {
    const path = tmp.file(`backoff-${how}.db`);
    const first = startWorker(SCRIPT, ["first", path, how === "abort" ? "abort" : "wait"]);
    const line = await first.waitFor((l) => l.startsWith("backing-off "), "the failed attempt journaled");
    const retryAt = Date.parse(line.slice("backing-off ".length));
    if (how === "abort") await first.waitFor((l) => l.startsWith("stopped "), "the run stopped");
    else first.child.kill("SIGKILL");
    const exit = await first.exited;
    if (how === "abort") {
      expect(first.lines).toContain("stopped aborted");
      expect(exit.code).toBe(0);
    } else expect(exit.signal).toBe("SIGKILL");
    await new Promise((r) => setTimeout(r, 500)); // part of the 3 s passes while no process runs

    const second = startWorker(SCRIPT, ["resume", path]);
    const report = JSON.parse(await second.waitFor((l) => l.startsWith("{"), "the resumed run's report")) as {
      content: string;
      calls: number;
      startedAt: number;
      firstCallAt: number;
    };
    expect((await second.exited).code).toBe(0);
    expect(report.content).toBe("done");
    expect(report.calls).toBe(2); // attempt 2 (503, retried) and attempt 3 (answers): attempt 1 is not asked again
    // The first call of the new process came once the journaled retryAt had passed, not a whole
    // Retry-After later (the first process ran for part of it, and 500 ms passed between them).
    expect(report.firstCallAt).toBeGreaterThanOrEqual(retryAt - 5);
    expect(report.firstCallAt - report.startedAt).toBeLessThan(3000 - 400);

    const journal = openSqliteJournal(path);
    try {
      const entries = await readJournal(journal, "r");
      const failed = entries.filter((e): e is EntryOf<"attempt.failed"> => e.type === "attempt.failed");
      expect(failed.map((e) => [e.data.attempt, e.data.error.status])).toEqual([
        [1, 429],
        [2, 503],
      ]);
      expect(failed[0]?.data.retryAt).toBe(retryAt);
      // Each attempt is its own frame.started, written ahead of its call: three in all, in two processes.
      expect(entries.filter((e) => e.type === "frame.started")).toHaveLength(3);
      expect(entries.at(-1)?.type).toBe("run.completed");
    } finally {
      await journal.close();
    }
  }, 30_000);
});
