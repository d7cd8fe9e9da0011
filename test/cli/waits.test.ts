import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { agentLoop$, openSqliteJournal, readJournal, scriptedModel } from "../../src/index.ts";
import { loops, tokens } from "../runtime/workers/waitLoops.ts";
import { diesAtInterruption } from "../support/diesAt.ts";
import { loom, tempDir } from "./support.ts";

const dir = tempDir("loom-cli-waits-");
const MODULE = resolve("test/runtime/workers/waitLoops.ts");

/** A journal with a run waiting for a payment event (`pay-1`) and one sleeping a minute (`nap-1`). */
async function waitingJournal(): Promise<{ db: string; token: string }> {
  const db = join(dir, `waits-${tokens.length}.db`);
  const journal = openSqliteJournal(db);
  try {
    await loops[0]?.run({ runId: "pay-1", journal, input: "pay" }).catch(() => {});
    await loops[1]?.run({ runId: "nap-1", journal, input: "nap" }).catch(() => {});
  } finally {
    await journal.close();
  }
  return { db, token: tokens.at(-1) as string };
}

describe("loom waits / show / deliver / wake", () => {
  it("lists every wait, shows it in the run's story, delivers once, and wakes the delivered run", async () => {
    const { db, token } = await waitingJournal();
    const waits = await loom(dir, ["waits", "--db", db, "--json"]);
    expect(JSON.parse(waits.stdout)).toEqual([
      expect.objectContaining({ runId: "nap-1", kind: "sleep", what: "a nap", until: expect.any(String) }),
      expect.objectContaining({ runId: "pay-1", kind: "event", what: "payment" }),
    ]);
    const until = (JSON.parse(waits.stdout) as { runId: string; until?: string }[])[0]?.until;
    // A waiting run's status says what it waits for, not plain "interrupted" (one read layer: src/read).
    const runs = await loom(dir, ["runs", "--db", db]);
    expect(runs.stdout).toMatch(new RegExp(`nap-1 +napper +waiting \\(until ${until?.replaceAll(".", "\\.")}\\)`));
    expect(runs.stdout).toMatch(/pay-1 +payer +waiting for event {2}/);
    const story = await loom(dir, ["show", "pay-1", "--db", db]);
    expect(story.stdout).toMatch(/^status {2}waiting for event,/m);
    const napStory = await loom(dir, ["show", "nap-1", "--db", db]);
    expect(napStory.stdout).toContain(`status  waiting (until ${until}),`);
    expect(story.stdout).toMatch(/waiting payer#turn:0:tool:0 \(pay\) for an event "payment": deliver the event/);

    const dry = await loom(dir, ["wake", "--db", db, "--json"]);
    expect(JSON.parse(dry.stdout).map((w: { runId: string; outcome: string }) => [w.runId, w.outcome])).toEqual([
      ["nap-1", "not-due"],
      ["pay-1", "not-due"],
    ]);

    const delivered = await loom(dir, ["deliver", token, "--db", db, "--payload", '{"paid":12}']);
    expect([delivered.code, delivered.stdout]).toEqual([0, expect.stringContaining("run pay-1: delivered to pay")]);
    const ready = await loom(dir, ["runs", "--db", db]);
    expect(ready.stdout).toMatch(/pay-1 +payer +waiting \(due now\)/); // delivered: goes on when woken
    const again = await loom(dir, ["deliver", token, "--db", db, "--payload", '{"paid":13}']);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("delivered once");
    const forged = await loom(dir, ["deliver", `${token.slice(0, -4)}AAAA`, "--db", db]);
    expect(forged.code).toBe(1);

    // Due because its event was delivered: wake says so, not a due time (there is none).
    const listed = await loom(dir, ["wake", "--db", db]);
    expect(listed.stdout).toMatch(/pay-1 +payer +event delivered +no-loop/);
    expect(listed.stdout).not.toContain("1970");

    const woken = await loom(dir, ["wake", "--db", db, "--loops", MODULE, "--json"]);
    expect(woken.code).toBe(0);
    expect(JSON.parse(woken.stdout).map((w: { runId: string; outcome: string }) => [w.runId, w.outcome])).toEqual([
      ["nap-1", "not-due"],
      ["pay-1", "completed"],
    ]);
    expect(JSON.parse(woken.stdout)[1]).toEqual({
      runId: "pay-1",
      loopId: "payer",
      ended: "event-delivered",
      outcome: "completed",
    });
    const napDue = await loom(dir, ["wake", "--db", db, "--loops", MODULE, "--now", String(Date.now() + 120_000)]);
    expect(napDue.stdout).toMatch(/nap-1\s.*completed/);
    const journal = openSqliteJournal(db);
    try {
      const completed = (await readJournal(journal, "pay-1")).find(
        (e) => e.type === "frame.completed" && e.data.frameId === "payer#turn:0:tool:0",
      );
      expect(completed?.data).toMatchObject({ output: { paid: 12 } });
    } finally {
      await journal.close();
    }
  });
});

describe("loom waits / wake for a run whose process died before it stopped for its wait", () => {
  it("lists the wait and wakes the run when due", async () => {
    const db = join(dir, "stalled.db");
    const journal = openSqliteJournal(db);
    try {
      const dying = { ...journal, store: diesAtInterruption(journal.store) };
      await expect(loops[1]?.run({ runId: "nap-2", journal: dying, input: "nap" })).rejects.toThrow("the process died");
      expect((await readJournal(journal, "nap-2")).some((e) => e.type === "run.interrupted")).toBe(false);
    } finally {
      await journal.close();
    }
    const waits = await loom(dir, ["waits", "--db", db, "--json"]);
    expect(JSON.parse(waits.stdout)).toEqual([
      expect.objectContaining({ runId: "nap-2", kind: "sleep", what: "a nap" }),
    ]);
    const early = await loom(dir, ["wake", "--db", db, "--loops", MODULE, "--json"]);
    expect(JSON.parse(early.stdout).map((w: { runId: string; outcome: string }) => [w.runId, w.outcome])).toEqual([
      ["nap-2", "not-due"],
    ]);
    const due = await loom(dir, [
      "wake",
      "--db",
      db,
      "--loops",
      MODULE,
      "--now",
      String(Date.now() + 120_000),
      "--json",
    ]);
    expect(JSON.parse(due.stdout).map((w: { runId: string; outcome: string }) => [w.runId, w.outcome])).toEqual([
      ["nap-2", "completed"],
    ]);
  });
});

describe("an event wait that times out", () => {
  it("reads as waiting for an event, with when it times out, not as a sleep until then", async () => {
    const db = join(dir, "timeout.db");
    const at = Date.parse("2026-05-01T10:00:00.000Z");
    const bill = agentLoop$({
      id: "biller",
      model: scriptedModel([{ toolCalls: [{ id: "b", name: "bill", input: {} }] }]),
      tools: {
        bill: {
          description: "waits for the invoice to be paid",
          execute: (_input, ctx) => ctx.waitForEvent({ what: "invoice paid", timeoutMs: 3_600_000 }),
        },
      },
    });
    const journal = openSqliteJournal(db);
    try {
      await bill.run({ runId: "bill-1", journal, input: "bill", now: () => at }).catch(() => {});
    } finally {
      await journal.close();
    }
    const timesOut = "2026-05-01T11:00:00.000Z";
    const runs = await loom(dir, ["runs", "--db", db]);
    expect(runs.stdout).toMatch(/bill-1 +biller +waiting for event \(times out 2026-05-01T11:00:00\.000Z\)/);
    expect(runs.stdout).not.toContain("waiting (until");
    const story = (await loom(dir, ["show", "bill-1", "--db", db])).stdout;
    expect(story).toContain(`status  waiting for event (times out ${timesOut}),`);
    expect(story).toContain(`waiting biller#turn:0:tool:0 (bill) for an event "invoice paid" (times out ${timesOut}):`);
  });
});
