import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createJournal } from "../../src/events/journal.ts";
import { sqliteStore } from "../../src/events/sqlite/sqlite.ts";
import { openSqliteJournal } from "../../src/index.ts";
import { schedules } from "../fixtures/schedules.ts";
import { crashingStore } from "../support/loop.ts";
import { loom, tempDir } from "./support.ts";

const fixture = join(import.meta.dirname, "../fixtures/schedules.ts");

describe("loom schedule", () => {
  it("lists a module's schedules with their next tick", async () => {
    const dir = tempDir();
    const r = await loom(dir, ["schedule", "list", fixture, "--now", "2026-01-02T10:30:00Z", "--json"]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual([
      {
        id: "hourly",
        cron: "0 * * * *",
        timezone: "UTC",
        missed: "all",
        loop: "digest",
        lastTick: null,
        nextTick: "2026-01-02T11:00:00.000Z",
      },
      {
        id: "morning",
        cron: "0 9 * * 1-5",
        timezone: "Europe/Paris",
        missed: "skip",
        loop: "digest",
        lastTick: null,
        nextTick: "2026-01-05T08:00:00.000Z", // Friday 10:30 → Monday 9:00 in Paris
      },
    ]);
  });

  it("runs the due ticks once, and a second look picks up after the last run", async () => {
    const dir = tempDir();
    const db = join(dir, "loom.db");
    const first = await loom(dir, ["schedule", "run", fixture, "--db", db, "--now", "2026-01-02T08:00:10Z"]);
    expect(first.stderr).toBe("");
    expect(first.stdout).toBe("ran hourly@2026-01-02T08:00:00.000Z\nran morning@2026-01-02T08:00:00.000Z\n");
    // Three hours later: hourly catches up on each missed tick; the morning report had none due.
    const later = await loom(dir, ["schedule", "run", fixture, "--db", db, "--now", "2026-01-02T11:00:05Z", "--json"]);
    expect(later.code).toBe(0);
    const report = JSON.parse(later.stdout) as { fired: { runId: string }[]; skipped: unknown[] };
    expect(report.fired.map((f) => f.runId)).toEqual([
      "hourly@2026-01-02T09:00:00.000Z",
      "hourly@2026-01-02T10:00:00.000Z",
      "hourly@2026-01-02T11:00:00.000Z",
    ]);
    const journal = openSqliteJournal(db);
    try {
      const runs = await journal.store.listRuns();
      expect(runs.map((r) => [r.runId, r.lastType]).sort()).toEqual([
        ["hourly@2026-01-02T08:00:00.000Z", "run.completed"],
        ["hourly@2026-01-02T09:00:00.000Z", "run.completed"],
        ["hourly@2026-01-02T10:00:00.000Z", "run.completed"],
        ["hourly@2026-01-02T11:00:00.000Z", "run.completed"],
        ["morning@2026-01-02T08:00:00.000Z", "run.completed"],
      ]);
    } finally {
      await journal.close();
    }
    const listed = await loom(dir, ["schedule", "list", fixture, "--db", db, "--now", "2026-01-02T11:00:05Z"]);
    expect(listed.stdout.split("\n")[0]).toMatch(/last fired\s+next tick/);
    expect(listed.stdout).toMatch(
      /hourly\s+0 \* \* \* \*\s+UTC\s+all\s+digest\s+2026-01-02 11:00:00\s+2026-01-02 12:00:00/,
    );
  });

  it("resumes a tick's run that a process left part-way, and says so", async () => {
    const dir = tempDir();
    const db = join(dir, "loom.db");
    const hourly = schedules[0] as (typeof schedules)[number];
    const runId = "hourly@2026-01-02T08:00:00.000Z";
    // The process that ran 08:00's tick died after its first append: the run is part-way, held by nobody.
    const store = sqliteStore(db);
    const dying = createJournal({ store: crashingStore(store, 1) });
    await expect(hourly.loop.run({ runId, journal: dying, input: "2026-01-02T08:00:00.000Z" })).rejects.toThrow();
    await store.close();
    const r = await loom(dir, ["schedule", "run", fixture, "--db", db, "--now", "2026-01-02T08:00:20Z"]);
    expect(r.stderr).toBe("");
    expect(r.stdout).toBe(
      `resumed ${runId} (left part-way by a process that died)\nran morning@2026-01-02T08:00:00.000Z\n`,
    );
    const journal = openSqliteJournal(db);
    try {
      expect((await journal.store.read(runId)).at(-1)?.type).toBe("run.completed");
    } finally {
      await journal.close();
    }
  });

  it("says what is wrong with the module or the time", async () => {
    const dir = tempDir();
    const missing = await loom(dir, ["schedule", "list", join(dir, "nope.mjs")]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("cannot load");
    const empty = await loom(dir, ["schedule", "list", join(import.meta.dirname, "support.ts")]);
    expect(empty.stderr).toContain("exports no schedules");
    const badNow = await loom(dir, ["schedule", "run", fixture, "--now", "soon"]);
    expect(badNow.code).toBe(2);
    expect(badNow.stderr).toContain("--now takes an ISO 8601 time");
  });

  it("documents itself in --help", async () => {
    const r = await loom(tempDir(), ["schedule", "run", "--help"]);
    expect(r.stdout).toContain("--watch");
    expect(r.stdout).toContain("submitted to the workers");
  });
});
