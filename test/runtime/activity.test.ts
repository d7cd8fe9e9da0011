import { describe, expect, it } from "vitest";
import { createJournal, forkRun, memoryStore, recordApproval, runActivity } from "../../src/index.ts";
import { activityOf, type ForkedFromData, type JournalEntry } from "../../src/journal.ts";
import { foldEntries } from "../../src/projections/runState.ts";
import { supportLoop, waitingRun } from "../viewer/support.ts";

const at = "2026-12-04T10:00:00.000Z";
const entry = (seq: number, e: Pick<JournalEntry, "type" | "data">): JournalEntry =>
  ({ runId: "r", seq, meta: { at, v: 1 }, ...e }) as JournalEntry;
const started = (forkedFrom?: ForkedFromData) =>
  entry(1, {
    type: "run.started",
    data: { loopId: "l", input: "hi", tools: [], ...(forkedFrom ? { forkedFrom } : {}) },
  });
const frame = (seq: number) =>
  entry(seq, { type: "frame.started", data: { frameId: "l#turn:0:model", effect: "model", inputDigest: "d" } });
const holder = { owner: "loop.run l", host: "h", pid: 1, token: 1, expiresAt: Date.now() + 10_000 };

describe("activityOf: a run's activity from its fold and what the store says", () => {
  const cases: [string, JournalEntry[], Parameters<typeof activityOf>[1], string][] = [
    ["a live owner", [started(), frame(2)], { holder, pendingApprovals: 0, first: undefined }, "running"],
    [
      "no owner, journal not ended",
      [started(), frame(2)],
      { holder: undefined, pendingApprovals: 0, first: undefined },
      "stalled",
    ],
    [
      "a store that cannot tell",
      [started(), frame(2)],
      { holder: "unknown", pendingApprovals: 0, first: undefined },
      "running",
    ],
    [
      "a lone run.started (submitted)",
      [started()],
      { holder: undefined, pendingApprovals: 0, first: started() },
      "not-started",
    ],
    [
      "a fork with only its copied entries",
      [started({ runId: "s", seq: 2, entries: 2 }), frame(2)],
      { holder: undefined, pendingApprovals: 0, first: started({ runId: "s", seq: 2, entries: 2 }) },
      "not-started",
    ],
    [
      "a fork with an entry past them",
      [started({ runId: "s", seq: 2, entries: 1 }), frame(2)],
      { holder: undefined, pendingApprovals: 0, first: started({ runId: "s", seq: 2, entries: 1 }) },
      "stalled",
    ],
  ];
  it.each(cases)("%s", (_, entries, facts, want) => {
    expect(activityOf(foldEntries(entries), facts)).toBe(want);
  });
});

describe("runActivity", () => {
  it("tells a run waiting for approval from one whose approval was answered, and a fork nobody resumed", async () => {
    const journal = createJournal({ store: memoryStore({ json: true }) });
    await waitingRun(journal, "w-1");
    expect(await runActivity(journal, "w-1")).toEqual({ activity: "waiting-for-approval", ownershipKnown: true });
    await recordApproval(journal, "w-1", "support#turn:1:tool:0", { approved: true });
    expect((await runActivity(journal, "w-1")).activity).toBe("answered");
    await forkRun(journal, "w-1", { at: "support#turn:1:model", newRunId: "w-2" });
    expect((await runActivity(journal, "w-2")).activity).toBe("not-started");
    await supportLoop()
      .run({ runId: "w-2", journal })
      .catch(() => {}); // resumed: it asks again
    expect((await runActivity(journal, "w-2")).activity).toBe("waiting-for-approval");
    await supportLoop().run({ runId: "w-1", journal });
    expect((await runActivity(journal, "w-1")).activity).toBe("completed");
  });
});
