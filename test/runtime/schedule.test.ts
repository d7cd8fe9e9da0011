import { describe, expect, it } from "vitest";
import { scheduleRunId, scheduleTickOf } from "../../src/events/ids.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { dueTicks, initialCursor } from "../../src/policies/schedule.ts";
import { isScheduleError, ScheduleError } from "../../src/runtime/base/errors.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { type ScheduleConfig, schedule } from "../../src/runtime/run/schedule.ts";

const loop = agentLoop$({ id: "digest", model: scriptedModel(async () => ({ content: "ok", toolCalls: [] })) });
const hourly = (over: Partial<ScheduleConfig> = {}) =>
  schedule({ id: "hourly", cron: "0 * * * *", loop, input: (t) => `tick ${t.toISOString()}`, ...over });
const at = (hhmm: string) => new Date(`2026-01-01T${hhmm}:00.000Z`);
const iso = (ds: readonly Date[]) => ds.map((d) => d.toISOString().slice(11, 16));

function refused(config: Partial<ScheduleConfig>): ScheduleError {
  try {
    hourly(config);
  } catch (e) {
    if (isScheduleError(e)) return e;
    throw e;
  }
  throw new Error("the schedule was accepted");
}

describe("schedule", () => {
  it("refuses a bad cron pattern with invalidCron, naming the schedule and the fix", () => {
    for (const cron of ["61 * * * *", "every morning", "* * *"]) {
      const e = refused({ cron });
      expect(e).toBeInstanceOf(ScheduleError);
      expect(e.code).toBe("invalidCron");
      expect(e.scheduleId).toBe("hourly");
      expect(e.message).toContain('schedule "hourly"');
      expect(e.message).toContain(JSON.stringify(cron));
      expect(e.message).toContain("5 fields");
    }
  });

  it("refuses a time zone that is not an IANA name with invalidTimezone", () => {
    const e = refused({ timezone: "Mars/Olympus" });
    expect(e.code).toBe("invalidTimezone");
    expect(e.message).toContain('"Mars/Olympus"');
  });

  it("refuses other bad settings with invalidSchedule", () => {
    expect(refused({ id: "my schedule" }).code).toBe("invalidSchedule");
    expect(refused({ id: "a@b" }).code).toBe("invalidSchedule"); // `@` separates the id from the tick
    expect(refused({ missed: "some" as never }).code).toBe("invalidSchedule");
    expect(refused({ maxMissed: 0 }).code).toBe("invalidSchedule");
    expect(refused({ startAt: new Date("nope") }).code).toBe("invalidSchedule");
    expect(refused({ input: "hello" as never }).code).toBe("invalidSchedule");
  });

  it("reads the pattern in its time zone", () => {
    const paris = hourly({ cron: "0 9 * * *", timezone: "Europe/Paris" });
    expect(paris.nextTick(at("00:00"))?.toISOString()).toBe("2026-01-01T08:00:00.000Z"); // 9:00 in Paris, winter
    expect(hourly({ cron: "0 9 * * *" }).nextTick(at("00:00"))?.toISOString()).toBe("2026-01-01T09:00:00.000Z");
  });

  it("names a tick's run <id>@<ISO tick>, and reads it back", () => {
    const s = hourly();
    expect(s.runIdOf(at("05:00"))).toBe("hourly@2026-01-01T05:00:00.000Z");
    expect(scheduleTickOf(scheduleRunId("hourly", at("05:00")), "hourly")).toEqual(at("05:00"));
    expect(scheduleTickOf("hourly-2@2026-01-01T05:00:00.000Z", "hourly")).toBeUndefined();
    expect(scheduleTickOf("hourly@2026-01-01T05:00:00Z", "hourly")).toBeUndefined(); // not the form Loom writes
    expect(scheduleTickOf("hourly@2026-02-30T05:00:00.000Z", "hourly")).toBeUndefined();
  });
});

describe("dueTicks (the missed-tick policy, a pure decision)", () => {
  it("fires a tick on time under every policy, and nothing before it is due", () => {
    for (const missed of ["skip", "latest", "all"] as const) {
      const s = hourly({ missed });
      expect(dueTicks(s, at("04:00"), at("04:59"))).toEqual({ fire: [], skipped: undefined, cursor: at("04:00") });
      expect(dueTicks(s, at("04:00"), at("05:00"))).toEqual({
        fire: [at("05:00")],
        skipped: undefined,
        cursor: at("05:00"),
      });
      expect(dueTicks(s, at("04:00"), at("05:00")).fire).toEqual([at("05:00")]);
    }
  });

  it("after an outage, skip fires none of the missed ticks", () => {
    const d = dueTicks(hourly({ missed: "skip" }), at("00:00"), at("05:30"));
    expect(d.fire).toEqual([]);
    expect(d.skipped).toEqual({ first: at("01:00"), last: at("05:00") });
    expect(d.cursor).toEqual(at("05:00"));
  });

  it("after an outage, latest fires the newest missed tick once", () => {
    const d = dueTicks(hourly({ missed: "latest" }), at("00:00"), at("05:30"));
    expect(iso(d.fire)).toEqual(["05:00"]);
    expect(d.skipped).toEqual({ first: at("01:00"), last: at("04:00") });
    // A tick on time runs anyway: no catch-up run beside it.
    const onTime = dueTicks(hourly({ missed: "latest" }), at("00:00"), new Date(at("05:00").getTime() + 30_000));
    expect(iso(onTime.fire)).toEqual(["05:00"]);
  });

  it("after an outage, all fires every missed tick, oldest first, up to maxMissed", () => {
    const d = dueTicks(hourly({ missed: "all" }), at("00:00"), at("05:30"));
    expect(iso(d.fire)).toEqual(["01:00", "02:00", "03:00", "04:00", "05:00"]);
    expect(d.skipped).toBeUndefined();
    const capped = dueTicks(hourly({ missed: "all", maxMissed: 2 }), at("00:00"), at("05:30"));
    expect(iso(capped.fire)).toEqual(["04:00", "05:00"]);
    expect(capped.skipped).toEqual({ first: at("01:00"), last: at("03:00") });
    expect(capped.cursor).toEqual(at("05:00"));
  });

  it("counts a tick due less than lateAfterMs ago as on time", () => {
    const s = hourly({ cron: "* * * * * *", missed: "skip", lateAfterMs: 2500 });
    const now = new Date(at("05:00").getTime() + 5000);
    expect(dueTicks(s, at("05:00"), now).fire.map((t) => t.getTime() - at("05:00").getTime())).toEqual([
      3000, 4000, 5000,
    ]);
  });

  it("starts from startAt, or from lateAfterMs before the first look", () => {
    expect(initialCursor(hourly({ startAt: at("03:00") }), at("05:30"))).toEqual(new Date(at("03:00").getTime() - 1));
    expect(
      iso(
        dueTicks(
          hourly({ startAt: at("03:00"), missed: "all" }),
          initialCursor(hourly({ startAt: at("03:00") }), at("05:30")),
          at("05:30"),
        ).fire,
      ),
    ).toEqual(["03:00", "04:00", "05:00"]);
    const s = hourly();
    const firstLook = new Date(at("05:00").getTime() + 10_000);
    expect(dueTicks(s, initialCursor(s, firstLook), firstLook).fire).toEqual([at("05:00")]);
  });

  it("on first sight fires the newest tick of the last lateAfterMs only, under every policy", () => {
    const firstLook = new Date(at("05:00").getTime() + 59_500); // 12 ticks of */5 s lie in the last minute
    for (const missed of ["skip", "latest", "all"] as const) {
      const s = hourly({ cron: "*/5 * * * * *", missed });
      const d = dueTicks(s, initialCursor(s, firstLook), firstLook);
      expect(d.fire).toEqual([new Date(at("05:00").getTime() + 55_000)]);
      expect(d.skipped).toBeUndefined(); // the ticks before it were never this schedule's: none was missed
    }
    // The newest tick older than lateAfterMs is not run on first sight: the schedule starts after it.
    const late = hourly({ missed: "latest" });
    const afterIt = new Date(at("05:00").getTime() + 61_000);
    expect(dueTicks(late, initialCursor(late, afterIt), afterIt)).toMatchObject({ fire: [], skipped: undefined });
  });
});
