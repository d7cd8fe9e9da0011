import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { openSqliteJournal } from "../../src/index.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { runRows, runsPage } from "../../src/viewer/runsPage.ts";
import { loom, tempDir } from "./support.ts";

const fixture = join(import.meta.dirname, "../fixtures/schedules.ts");
const TICK = "hourly@2026-01-02T08:00:00.000Z";

/** A journal with one run the hourly schedule started and one started by hand. */
async function journalWithScheduledRun(): Promise<{ dir: string; db: string }> {
  const dir = tempDir();
  const db = join(dir, "loom.db");
  const fired = await loom(dir, ["schedule", "run", fixture, "--db", db, "--now", "2026-01-02T08:00:10Z"]);
  expect(fired.stdout).toContain(`ran ${TICK}`);
  const journal = openSqliteJournal(db);
  try {
    const plain = agentLoop$({ id: "digest", model: scriptedModel(async () => ({ content: "ok", toolCalls: [] })) });
    await plain.run({ runId: "by-hand", journal, input: "hello" });
  } finally {
    await journal.close();
  }
  return { dir, db };
}

describe("a run a schedule started", () => {
  it("loom runs shows its schedule and tick, and a run started by hand none", async () => {
    const { dir, db } = await journalWithScheduledRun();
    const r = await loom(dir, ["runs", "--db", db]);
    expect(r.code).toBe(0);
    const lines = r.stdout.split("\n");
    expect(lines[0]).toMatch(/started\s+schedule\s+stopped/);
    expect(lines.find((l) => l.startsWith(TICK))).toMatch(/hourly 2026-01-02 08:00/);
    expect(lines.find((l) => l.startsWith("by-hand"))).toMatch(/\s-\s/);
    const json = JSON.parse((await loom(dir, ["runs", "--db", db, "--json"])).stdout) as {
      runId: string;
      schedule?: unknown;
    }[];
    expect(json.find((x) => x.runId === TICK)?.schedule).toEqual({
      scheduleId: "hourly",
      tick: "2026-01-02T08:00:00.000Z",
    });
    expect(json.find((x) => x.runId === "by-hand")).not.toHaveProperty("schedule");
  });

  it("loom runs keeps the seconds of a seconds-level schedule's tick", async () => {
    const dir = tempDir();
    const db = join(dir, "loom.db");
    const journal = openSqliteJournal(db);
    try {
      // What a `*/5 * * * * *` schedule names its run for the tick at 08:00:05.
      const loop = agentLoop$({ id: "pulse", model: scriptedModel(async () => ({ content: "ok", toolCalls: [] })) });
      await loop.run({ runId: "every5s@2026-01-02T08:00:05.000Z", journal, input: "beat" });
    } finally {
      await journal.close();
    }
    const r = await loom(dir, ["runs", "--db", db]);
    expect(r.stdout.split("\n").find((l) => l.startsWith("every5s@"))).toMatch(/ every5s 2026-01-02 08:00:05 /);
  });

  it("loom runs has no schedule column when no schedule started a run", async () => {
    const dir = tempDir();
    const db = join(dir, "loom.db");
    const journal = openSqliteJournal(db);
    const plain = agentLoop$({ id: "digest", model: scriptedModel(async () => ({ content: "ok", toolCalls: [] })) });
    await plain.run({ runId: "by-hand", journal, input: "hello" });
    await journal.close();
    const r = await loom(dir, ["runs", "--db", db]);
    expect(r.stdout.split("\n")[0]).not.toContain("schedule");
  });

  it("loom show says which schedule and tick started it", async () => {
    const { dir, db } = await journalWithScheduledRun();
    const r = await loom(dir, ["show", TICK, "--db", db]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("from    schedule hourly, tick 2026-01-02 08:00:00 UTC\n");
    const plain = await loom(dir, ["show", "by-hand", "--db", db]);
    expect(plain.stdout).not.toContain("from    schedule");
    const json = JSON.parse((await loom(dir, ["show", TICK, "--db", db, "--json"])).stdout) as { schedule?: unknown };
    expect(json.schedule).toEqual({ scheduleId: "hourly", tick: "2026-01-02T08:00:00.000Z" });
  });

  it("the viewer's runs list says which schedule and tick started it", async () => {
    const { db } = await journalWithScheduledRun();
    const journal = openSqliteJournal(db);
    try {
      const page = runsPage(await runRows(journal), undefined, db);
      const row = (runId: string) => page.slice(page.indexOf(`data-run="${runId}"`)).split("</tr>")[0] ?? "";
      expect(row(TICK)).toContain("schedule hourly, tick 2026-01-02 08:00:00 UTC");
      expect(row("by-hand")).not.toContain("schedule");
    } finally {
      await journal.close();
    }
  });

  it("documents it in loom runs --help", async () => {
    const r = await loom(tempDir(), ["runs", "--help"]);
    expect(r.stdout).toContain("<scheduleId>@<tick>");
  });
});
