import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { forkRun, openSqliteJournal } from "../../src/index.ts";
import { runRows, runsPage } from "../../src/viewer/runsPage.ts";
import { startWorker, type Worker } from "../support/processes.ts";
import { loom, tempDir } from "./support.ts";

const dir = tempDir("loom-activity-");
const db = join(dir, "activity.db");
const workers: Worker[] = [];
afterAll(() => {
  for (const w of workers) w.child.kill("SIGKILL");
});

/** The `loom runs` row of a run, split into its columns (two or more spaces apart). */
async function rowOf(runId: string): Promise<string[]> {
  const { code, stdout } = await loom(dir, ["runs", "--db", db]);
  expect(code).toBe(0);
  const line = stdout.split("\n").find((l) => l.startsWith(`${runId} `));
  expect(line, stdout).toBeDefined();
  return (line as string).split(/\s{2,}/);
}

const activityOf = async (runId: string) =>
  (JSON.parse((await loom(dir, ["runs", "--db", db, "--json"])).stdout) as { runId: string; activity: string }[]).find(
    (r) => r.runId === runId,
  )?.activity;

describe("a run's activity: running, stalled, not started", () => {
  it("tells a run its process owns from the same run once the process is killed, and a fork nobody resumed", async () => {
    const worker = startWorker("test/fixtures/stuckTool.ts", [db, "pay-1"]);
    workers.push(worker);
    await worker.waitFor((l) => l === "tool running", "the tool to start");

    // Alive: its lease is current.
    expect((await rowOf("pay-1"))[2]).toBe("running");
    expect(await activityOf("pay-1")).toBe("running");
    expect((await loom(dir, ["show", "pay-1", "--db", db])).stdout).toMatch(/^status {2}running, /m);

    // Killed mid-tool: the journal is the same, nobody owns the run any more.
    worker.child.kill("SIGKILL");
    await worker.exited;
    const row = await rowOf("pay-1");
    expect(row[2]).toBe("stalled");
    expect(row.at(-1)).toBe('resume with loop.run({ runId: "pay-1", journal })');
    expect(await activityOf("pay-1")).toBe("stalled");
    const json = JSON.parse((await loom(dir, ["runs", "--db", db, "--json"])).stdout)[0];
    expect(json).toMatchObject({ runId: "pay-1", status: "running", activity: "stalled" }); // status: the journal's
    expect((await loom(dir, ["show", "pay-1", "--db", db])).stdout).toContain(
      'status  stalled — resume with loop.run({ runId: "pay-1", journal }), 1 model calls',
    );

    // A fork of it that no one resumed yet.
    const journal = openSqliteJournal(db);
    try {
      await forkRun(journal, "pay-1", { at: "stuck#turn:0:tool:0", newRunId: "pay-1b" });
    } finally {
      await journal.close();
    }
    expect((await rowOf("pay-1b"))[2]).toBe("not started");
    expect((await loom(dir, ["show", "pay-1b", "--db", db])).stdout).toContain(
      'status  not started — resume with loop.run({ runId: "pay-1b", journal })',
    );

    // The viewer's runs page says the same, and filters by it.
    const read = openSqliteJournal(db, { readonly: true });
    try {
      const rows = await runRows(read);
      expect(Object.fromEntries(rows.map((r) => [r.runId, r.activity]))).toEqual({
        "pay-1": "stalled",
        "pay-1b": "not-started",
      });
      expect(runsPage(rows, "running", db)).toContain("no running runs");
      expect(runsPage(rows, "stalled", db)).toContain('data-run="pay-1"');
      expect(runsPage(rows, undefined, db)).toContain('<span class="status not-started">not started</span>');
    } finally {
      await read.close();
    }
  }, 60_000);
});
