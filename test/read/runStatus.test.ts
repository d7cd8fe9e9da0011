import { describe, expect, it } from "vitest";
import { deliverEvent, readJournal, runActivity } from "../../src/index.ts";
import { statusLabel } from "../../src/read/activity.ts";
import { runInfo } from "../../src/read/runInfo.ts";
import { approvalLoop } from "../runtime/workers/approvalLoop.ts";
import { loops, tokens } from "../runtime/workers/waitLoops.ts";
import { jsonJournal } from "../support/loop.ts";

/**
 * A run's status in words (src/read/activity.ts `statusLabel`), the one place `loom runs`,
 * `loom show` and the viewer take it from: a run interrupted to wait says what it waits for.
 */

const T0 = Date.parse("2026-01-01T00:00:00.000Z");

/** The status label of a run, read as the CLI and the viewer read it (entries, then activity). */
async function statusOf(journal: ReturnType<typeof jsonJournal>, runId: string): Promise<string> {
  const entries = await readJournal(journal, runId);
  return statusLabel(runInfo(runId, entries, (await runActivity(journal, runId, entries)).activity));
}

describe("statusLabel", () => {
  it("says until when a sleeping run waits, by the run's clock", async () => {
    const journal = jsonJournal();
    await loops[1]?.run({ runId: "nap-1", journal, input: "nap", now: () => T0 }).catch(() => {});
    expect(await statusOf(journal, "nap-1")).toBe(`waiting (until ${new Date(T0 + 60_000).toISOString()})`);
  });

  it("says 'waiting for event' while an event wait has no timeout, 'due now' once delivered", async () => {
    const journal = jsonJournal();
    await loops[0]?.run({ runId: "pay-1", journal, input: "pay" }).catch(() => {});
    expect(await statusOf(journal, "pay-1")).toBe("waiting for event");
    await deliverEvent(journal, tokens.at(-1) as string, { paid: 1 });
    expect(await statusOf(journal, "pay-1")).toBe("waiting (due now)");
    await loops[0]?.run({ runId: "pay-1", journal });
    expect(await statusOf(journal, "pay-1")).toBe("completed");
  });

  it("says 'waiting for approval' for a run stopped for an approval", async () => {
    const journal = jsonJournal();
    const { loop } = approvalLoop();
    await loop.run({ runId: "r-1", journal, input: "refund" }).catch(() => {});
    expect(await statusOf(journal, "r-1")).toBe("waiting for approval");
  });

  it("keeps the activity's label for any other interruption", async () => {
    const info = runInfo("x", []);
    expect(statusLabel({ ...info, activity: "interrupted", interrupted: { reason: "max-iterations" } })).toBe(
      "interrupted",
    );
  });
});
