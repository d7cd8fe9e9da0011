import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { aWeekOfDigests } from "../../examples/schedule.ts";
import { readJournal } from "../../src/index.ts";
import { foldRun } from "../../src/journal.ts";
import { inProcess } from "../support/journalFile.ts";

const dir = mkdtempSync(join(tmpdir(), "loom-schedule-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const inbox = (day: string) => (day.endsWith("3") ? ["invoice", "lunch?", "release notes"] : ["standup notes"]);
// 7:00 in Paris is 06:00 UTC in March (before the clocks change on the 29th).
const digest = (day: string) => `morning-digest@2026-03-${day}T06:00:00.000Z`;

describe("examples/schedule.ts", () => {
  it("writes one digest each weekday morning, and one catch-up digest after an outage", async () => {
    const file = join(dir, "digest.db");
    // Monday 2 March 2026, 00:00 UTC, to the next Monday.
    const week = await inProcess(file, (j) => aWeekOfDigests(j, new Date("2026-03-02T00:00:00Z"), inbox));
    expect(week).toEqual(["02", "03", "04", "05", "06"].map(digest));
    const tuesday = await inProcess(file, (j) => foldRun(j, digest("03")));
    expect(tuesday.status).toBe("completed");
    const entries = await inProcess(file, (j) => readJournal(j, digest("03")));
    expect(entries.at(-1)?.data).toMatchObject({ output: { content: "Digest for 2026-03-03: 3 messages." } });

    // Nothing ran from that Monday until Wednesday the 11th at noon: "latest" writes Wednesday's
    // digest once (Monday's and Tuesday's are skipped), then the mornings go on.
    const after = await inProcess(file, (j) => aWeekOfDigests(j, new Date("2026-03-11T12:00:00Z"), inbox));
    expect(after).toEqual(["11", "12", "13", "16", "17", "18"].map(digest));
    const runs = await inProcess(file, (j) => j.store.listRuns());
    expect(runs.map((r) => r.runId).sort()).toEqual([...week, ...after].sort());
  });
});
