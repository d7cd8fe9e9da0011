import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type OpenJournal, openSqliteJournal, readJournal } from "../../src/index.ts";
import { buildTravel, buildTravelLog, logsAt, logsFrom } from "../../src/viewer/travel.ts";
import { tempDir } from "../cli/support.ts";
import { viewerJournal } from "./support.ts";

/** The logs read once and filtered per point are, at every point, what the fold up to that point rebuilds. */
let journal: OpenJournal;
beforeAll(async () => {
  journal = openSqliteJournal(await viewerJournal(tempDir("loom-travel-log-")), { readonly: true });
});
afterAll(() => journal?.close());

describe("time travel's logs, read once", () => {
  for (const runId of ["sink-1", "wait-1", "flaky-1"]) {
    it(`${runId}: logsFrom equals logsAt at every point`, async () => {
      const travel = buildTravel(runId, await readJournal(journal, runId));
      const log = await buildTravelLog(journal, travel);
      let grew = 0;
      for (let i = 0; i <= travel.entries.length; i++) {
        const fast = logsFrom(log, i);
        const slow = await logsAt(journal, travel, i);
        expect(fast.full, `point ${i}`).toEqual(slow.full);
        expect(fast.lean, `point ${i}`).toEqual(slow.lean);
        for (const s of slow.lean) expect(fast.claimChecked.get(s.stepId)).toEqual(slow.claimChecked.get(s.stepId));
        if (i > 0 && fast.lean.length > logsFrom(log, i - 1).lean.length) grew++;
      }
      if (runId !== "flaky-1") expect(grew).toBeGreaterThan(0);
    });
  }
});
