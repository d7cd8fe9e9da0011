import { Cron } from "croner";
import { isIdName, scheduleRunId } from "../../events/ids.ts";
import type { Message } from "../../events/types.ts";
import { ScheduleError } from "../base/errors.ts";
import type { AgentLoop } from "./agentLoop.ts";

/**
 * What happens to ticks that passed while no scheduler was running (an outage, a deploy), that is,
 * ticks older than `lateAfterMs` when a scheduler first sees them:
 * - `"skip"`: none of them runs; the schedule goes on from the next tick.
 * - `"latest"`: the newest of them runs (once), unless a tick on time runs anyway; the rest are skipped.
 * - `"all"`: each of them runs, the newest `maxMissed` at most; older ones are skipped.
 *
 * Ticks on time (due less than `lateAfterMs` ago) always run, whatever the policy.
 */
export type MissedTicks = "skip" | "latest" | "all";

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
export interface Schedule {
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
  /** The policy for missed ticks. */
  readonly missed: MissedTicks;
  /** The most ticks one look fires. */
  readonly maxMissed: number;
  /** How old a due tick may be and still count as on time. */
  readonly lateAfterMs: number;
  /** No tick before it, if given. */
  readonly startAt: Date | undefined;
  /** The first tick after `after` (exclusive), or undefined if the pattern has no more. */
  nextTick(after: Date): Date | undefined;
  /** The newest ticks at or before `at`, newest first, at most `count`. */
  ticksBefore(at: Date, count: number): Date[];
  /** The run id of a tick: `<id>@<ISO tick>`. */
  runIdOf(tick: Date): string;
}

const POLICIES: readonly MissedTicks[] = ["skip", "latest", "all"];

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
  let cron: Cron;
  try {
    if (typeof pattern !== "string") throw new TypeError("the pattern is not a string");
    cron = new Cron(pattern, { timezone, paused: true });
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
  if (!POLICIES.includes(missed)) {
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
    nextTick: (after: Date) => cron.nextRun(after) ?? undefined,
    // croner's reference is exclusive: one ms later includes a tick at `at`.
    ticksBefore: (at: Date, count: number) => cron.previousRuns(count, new Date(at.getTime() + 1)),
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

/** What one look at a schedule decides ({@link dueTicks}). */
export interface DueTicks {
  /** The ticks to fire now, oldest first. */
  readonly fire: readonly Date[];
  /** The oldest and newest due ticks the policy did not fire (there may be others between), if any. */
  readonly skipped: { readonly first: Date; readonly last: Date } | undefined;
  /** Where the schedule stands after this look: its newest due tick (or `cursor` when none was due). */
  readonly cursor: Date;
}

/**
 * Where a schedule stands when no tick of it was recorded yet: just before `startAt`, else at the
 * tick before its newest one, and no earlier than `lateAfterMs` before now. So a tick due a moment
 * before the first look still runs, and only that one: the ticks before it came before the
 * schedule did, and are neither run nor reported as missed.
 */
export function initialCursor(s: Schedule, now: Date): Date {
  if (s.startAt !== undefined) return new Date(s.startAt.getTime() - 1);
  const window = now.getTime() - s.lateAfterMs;
  const before = s.ticksBefore(now, 2)[1]?.getTime() ?? window;
  return new Date(Math.max(window, before));
}

/**
 * The policy, as a pure decision: given the last tick the schedule handled (`cursor`) and the time,
 * which ticks fire now. The due ticks are those after `cursor` and at or before `now`; those due
 * less than `lateAfterMs` ago are on time and always fire; the late ones follow `missed`.
 *
 * @example
 * const s = schedule({ id: "hourly", cron: "0 * * * *", loop, input: () => "go", missed: "latest" });
 * dueTicks(s, new Date("2026-01-01T00:00:00Z"), new Date("2026-01-01T05:30:00Z"));
 * // { fire: [05:00], skipped: { first: 01:00, last: 04:00 }, cursor: 05:00 }
 */
export function dueTicks(s: Schedule, cursor: Date, now: Date): DueTicks {
  const fetched = s.ticksBefore(now, s.maxMissed + 1).filter((t) => t.getTime() > cursor.getTime());
  const due = fetched.reverse(); // oldest first
  const newest = due[due.length - 1];
  if (newest === undefined) return { fire: [], skipped: undefined, cursor };
  const lateBefore = now.getTime() - s.lateAfterMs;
  const onTime = due.filter((t) => t.getTime() >= lateBefore);
  const late = due.filter((t) => t.getTime() < lateBefore);
  let fire: Date[];
  if (s.missed === "all") fire = due.slice(-s.maxMissed);
  else if (s.missed === "latest") fire = onTime.length > 0 ? onTime : late.slice(-1);
  else fire = onTime;
  fire = fire.slice(-s.maxMissed);
  const fired = new Set(fire.map((t) => t.getTime()));
  const notFired = due.filter((t) => !fired.has(t.getTime()));
  // The look fetched maxMissed + 1 ticks: when all were due, older due ticks may lie before them.
  const oldestDue = due.length > s.maxMissed ? s.nextTick(cursor) : due[0];
  const first = notFired.length > 0 ? (due.length > s.maxMissed ? oldestDue : notFired[0]) : undefined;
  const last = notFired[notFired.length - 1];
  return {
    fire,
    skipped: first !== undefined && last !== undefined ? { first, last } : undefined,
    cursor: newest,
  };
}
