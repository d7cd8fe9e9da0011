import { isIdName, scheduleRunId } from "../../events/ids.ts";
import type { Message } from "../../events/types.ts";
import { type CronTicks, cronTicks, MISSED_TICKS, type MissedTicks, type TickPolicy } from "../../policies/schedule.ts";
import { ScheduleError } from "../base/errors.ts";
import type { AgentLoop } from "./agentLoop.ts";

// The policy is pure and lives with the other policies; the public API takes it from here.
export { type DueTicks, dueTicks, initialCursor, type MissedTicks } from "../../policies/schedule.ts";

/** What `schedule(...)` takes: when to start a loop, and with what input. */
export interface ScheduleConfig {
  /** Names the schedule and prefixes its runs' ids (`<id>@<tick>`): letters, digits, `_`, `.`, `:`, `-`. */
  readonly id: string;
  /** A cron pattern (5 fields, or 6 with seconds first), as croner reads it: `"0 9 * * 1-5"`. */
  readonly cron: string;
  /** The IANA time zone the pattern is read in (default UTC): `"Europe/Paris"`. */
  readonly timezone?: string;
  /** The loop each tick starts. */
  readonly loop: AgentLoop;
  /** The run's input for a tick. Called again when a tick is fired twice, so keep it a function of the tick. */
  readonly input: (tick: Date) => string | readonly Message[];
  /** The policy for ticks missed during an outage (default `"latest"`). See {@link MissedTicks}. */
  readonly missed?: MissedTicks;
  /** The most ticks one look fires (the cap of `"all"`; default 100). */
  readonly maxMissed?: number;
  /** How old a due tick may be and still count as on time (default 60 s). */
  readonly lateAfterMs?: number;
  /** The first tick may not be before this; ticks from it on count, even if missed (default: first seen). */
  readonly startAt?: Date;
}

/** A checked schedule (`schedule(...)`): its settings with defaults, and its ticks. */
export interface Schedule extends TickPolicy {
  /** Its id, the prefix of its runs' ids. */
  readonly id: string;
  /** Its cron pattern, as given. */
  readonly cron: string;
  /** The time zone its pattern is read in (`"UTC"` unless given). */
  readonly timezone: string;
  /** The loop each tick starts. */
  readonly loop: AgentLoop;
  /** A tick's run input. */
  readonly input: (tick: Date) => string | readonly Message[];
  /** The run id of a tick: `<id>@<ISO tick>`. */
  runIdOf(tick: Date): string;
}

/**
 * Checks a schedule: a loop started at each tick of a cron pattern, each tick's run named
 * `<id>@<tick>` so that it runs once however many schedulers fire it. Fire it with
 * `runSchedules(journal, [s])` (any journal, one process) or, on PostgreSQL,
 * `startScheduler({ journal, schedules: [s] })` beside `startWorker` in any number of processes.
 * Throws `ScheduleError` (`invalidCron`, `invalidTimezone`, `invalidSchedule`).
 *
 * @example
 * ```ts
 * const digest = schedule({
 *   id: "digest",
 *   cron: "0 9 * * 1-5", // weekdays at 9:00
 *   timezone: "Europe/Paris",
 *   loop: digestLoop,
 *   input: (tick) => `Write the digest for ${tick.toISOString().slice(0, 10)}`,
 *   missed: "latest", // after an outage, one catch-up run
 * });
 * ```
 */
export function schedule(config: ScheduleConfig): Schedule {
  const { id, cron: pattern, loop, input } = config;
  const name = typeof id === "string" ? JSON.stringify(id) : String(id);
  const bad = (code: "invalidCron" | "invalidTimezone" | "invalidSchedule", message: string, cause?: unknown) =>
    new ScheduleError(code, String(id), `schedule ${name}: ${message}`, cause === undefined ? undefined : { cause });
  if (!isIdName(id)) throw bad("invalidSchedule", "its id must be letters, digits, `_`, `.`, `:` or `-`; rename it");
  const timezone = config.timezone ?? "UTC";
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: timezone });
  } catch (e) {
    throw bad(
      "invalidTimezone",
      `time zone ${JSON.stringify(timezone)} is not an IANA time zone name; use one such as "Europe/Paris" or "UTC"`,
      e,
    );
  }
  let ticks: CronTicks;
  try {
    if (typeof pattern !== "string") throw new TypeError("the pattern is not a string");
    ticks = cronTicks(pattern, timezone);
  } catch (e) {
    throw bad(
      "invalidCron",
      `cron pattern ${JSON.stringify(pattern)} is not valid (${(e as Error).message}); write 5 fields (minute hour day month weekday) or 6 with seconds first, e.g. "0 9 * * 1-5"`,
      e,
    );
  }
  if (typeof loop?.run !== "function") throw bad("invalidSchedule", "`loop` must be an agent loop (agentLoop$)");
  if (typeof input !== "function") throw bad("invalidSchedule", "`input` must be a function of the tick");
  const missed = config.missed ?? "latest";
  if (!MISSED_TICKS.includes(missed)) {
    throw bad("invalidSchedule", `missed ${JSON.stringify(missed)} is not one of "skip", "latest", "all"`);
  }
  const maxMissed = config.maxMissed ?? 100;
  if (!Number.isInteger(maxMissed) || maxMissed < 1) throw bad("invalidSchedule", "maxMissed must be an integer ≥ 1");
  const lateAfterMs = config.lateAfterMs ?? 60_000;
  if (!(lateAfterMs >= 0)) throw bad("invalidSchedule", "lateAfterMs must be a number ≥ 0");
  const startAt = config.startAt;
  if (startAt !== undefined && !(startAt instanceof Date && !Number.isNaN(startAt.getTime()))) {
    throw bad("invalidSchedule", "startAt must be a valid Date");
  }
  return Object.freeze({
    id,
    cron: pattern,
    timezone,
    loop,
    input,
    missed,
    maxMissed,
    lateAfterMs,
    startAt,
    nextTick: ticks.nextTick,
    ticksBefore: ticks.ticksBefore,
    runIdOf: (tick: Date) => scheduleRunId(id, tick),
  });
}

/**
 * A tick's run input: `s.input(tick)`, or `ScheduleError` (`inputFailed`) naming the schedule and
 * the tick when it throws (the tick is then not fired; the schedule goes on).
 */
export function tickInput(s: Schedule, tick: Date): string | readonly Message[] {
  try {
    return s.input(tick);
  } catch (e) {
    throw new ScheduleError(
      "inputFailed",
      s.id,
      `schedule ${JSON.stringify(s.id)}: input(${tick.toISOString()}) threw (${(e as Error)?.message ?? String(e)}), so run ${s.runIdOf(tick)} was not started; fix the input function (later ticks still fire)`,
      { cause: e },
    );
  }
}
